"""build_sample: a finished rollout and its attempt's spans to a Sample, and that Sample through its record."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from agl_events.events.convert import span_from_record
from agl_events.samples.build import adapter_name, build_sample, triplets_of
from agl_events.samples.model import sample_fields, sample_from_record
from agl_events.types import Span, Triplet
from tests.samples import CODEC, finished, span_added, token_triplets


def reward(value: float) -> dict[str, Any]:
    """The attributes of upstream's reward span (`emit_reward(value)`)."""
    return {"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": value}


def spans_of(*events: Any) -> list[Span]:
    return [Span.model_validate(span_from_record(e.record["span"])) for e in events]


def trace(rid: str = "ro-1", aid: str = "at-1") -> list[Span]:
    return spans_of(
        span_added(rid, aid, 1, 0, prompt_token_ids=[1, 2, 3], response_token_ids=[4, 5], logprobs=[-0.5, -0.25]),
        span_added(rid, aid, 2, 1, name="agentlightning.annotation", **reward(0.2)),
        span_added(rid, aid, 3, 2, prompt_token_ids=[1, 2, 3, 4, 5, 6], response_token_ids=[7]),
        span_added(rid, aid, 4, 3, name="agentlightning.annotation", **reward(0.9)),
    )


def test_a_sample_carries_the_rollout_the_group_the_final_reward_and_the_triplets() -> None:
    marker = finished("ro-1", "at-1", 9, generation=3, metadata={"data_id": "task-7", "group_size": 4},
                      mode="train", resources_id="rs-2")
    sample = build_sample(marker.record, trace(), token_triplets, "token_triplets")
    assert (sample.sample_id, sample.rollout_id, sample.attempt_id) == ("ro-1:at-1", "ro-1", "at-1")
    assert (sample.resources_id, sample.resources_generation, sample.mode, sample.status) == \
        ("rs-2", 3, "train", "succeeded")
    assert sample.group_size == 4 and sample.input == {"q": "ro-1"} and sample.adapter == "token_triplets"
    assert sample.final_reward == 0.9  # the last reward span, in sequence order
    assert [t.prompt["token_ids"] for t in sample.triplets] == [[1, 2, 3], [1, 2, 3, 4, 5, 6]]
    assert [t.response["token_ids"] for t in sample.triplets] == [[4, 5], [7]]
    assert sample.triplets[0].response["logprobs"] == [-0.5, -0.25]

    # A group is one task under one resources id: the data id decides, not the input.
    other_input = finished("ro-2", "at-2", 10, metadata={"data_id": "task-7"}, input={"q": "other"},
                           resources_id="rs-2")
    other_resources = finished("ro-3", "at-3", 11, metadata={"data_id": "task-7"}, resources_id="rs-1")
    assert build_sample(other_input.record, [], token_triplets, "t").group_id == sample.group_id
    assert build_sample(other_resources.record, [], token_triplets, "t").group_id != sample.group_id


def test_the_sample_survives_its_avro_record() -> None:
    sample = build_sample(finished("ro-1", "at-1", 9).record, trace(), token_triplets, "token_triplets")
    fields = {"event_id": "e", "time": 1.0, "producer_id": "p", **sample_fields(sample)}
    decoded = CODEC.decode(CODEC.encode("SampleAdded", fields))
    assert sample_from_record(decoded.record) == sample


def test_openai_logprob_entries_keep_their_logprob() -> None:
    """Upstream's TracerTraceToTriplet copies `logprobs.content` as OpenAI gives it: one dict per token."""
    entries = [{"token": "4", "logprob": -0.1, "bytes": [52], "top_logprobs": []}, {"token": "!", "logprob": -2.0}]
    triplet = Triplet(prompt={"token_ids": [1]}, response={"token_ids": [2, 3], "logprobs": entries})
    sample = build_sample(finished("ro-1", "at-1", 9).record, trace(), lambda spans: [triplet], "openai")
    fields = {"event_id": "e", "time": 1.0, "producer_id": "p", **sample_fields(sample)}
    [back] = sample_from_record(CODEC.decode(CODEC.encode("SampleAdded", fields)).record).triplets
    assert back.response["logprobs"] == [-0.1, -2.0]


def test_no_spans_no_adapter_call() -> None:
    """A rollout cancelled before it ran (no attempt) or that traced nothing: no triplets, no reward."""
    def refuse(spans: Sequence[Span]) -> list[Triplet]:
        raise AssertionError("called on an empty trace")

    sample = build_sample(finished("ro-1", None, 9, status="cancelled").record, [], refuse, "refuse")
    assert (sample.sample_id, sample.attempt_id, sample.status) == ("ro-1:-", None, "cancelled")
    assert sample.triplets == [] and sample.final_reward is None


def test_adapter_results_are_our_triplets() -> None:
    class OtherTriplet(BaseModel):  # upstream's Triplet has these fields (importing it takes seconds)
        prompt: Any
        response: Any
        reward: float | None = None
        metadata: dict[str, Any] = {}

    other = OtherTriplet(prompt={"token_ids": [1]}, response={"token_ids": [2]}, reward=0.5,
                         metadata={"response_id": "r"})
    ours = Triplet(prompt={"token_ids": [1]}, response={"token_ids": [2]}, reward=0.5, metadata={"response_id": "r"})
    assert triplets_of([other, ours, ours.model_dump()]) == [ours, ours, ours]
    with pytest.raises(TypeError, match="not a list of triplets"):
        triplets_of(None)
    with pytest.raises(ValueError):
        triplets_of([{"prompt": 1}])


def test_adapter_names() -> None:
    class Mine:
        def __call__(self, spans: Sequence[Span]) -> list[Triplet]:
            return []

    def plain(spans: Sequence[Span]) -> list[Triplet]:
        return []

    assert adapter_name(token_triplets) == "TokenTriplets" and adapter_name(Mine()) == "Mine"
    assert adapter_name(plain) == "plain"
