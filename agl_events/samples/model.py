"""A training sample: what a finished rollout gives a trainer, and its Avro record (SampleAdded) both ways.

Pure: the samples processor builds these from a RolloutFinished record and the rollout's spans, trainers
read them back from the samples topic. Token ids and logprobs are Avro arrays, the rest of each triplet
JSON text, so whatever an adapter puts in a triplet comes back unchanged.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from pydantic import BaseModel

from agl_events.events.convert import dumps
from agl_events.types import RolloutMode, Triplet

#: Rollout metadata keys an enqueuer sets to group rollouts (GRPO): the task's id and the group's size.
DATA_ID_KEY = "data_id"
GROUP_SIZE_KEY = "group_size"


class Sample(BaseModel):
    """One finished rollout as training data (see schemas/SampleAdded.avsc for each field's meaning)."""

    sample_id: str
    rollout_id: str
    attempt_id: str | None
    group_id: str
    group_size: int | None = None
    resources_id: str | None = None
    resources_generation: int | None = None
    mode: RolloutMode | None = None
    status: str
    final_reward: float | None = None
    input: Any = None
    adapter: str
    triplets: list[Triplet]


def sample_id(rollout_id: str, attempt_id: str | None) -> str:
    """The same on every re-emit of a rollout's sample: what consumers dedupe by."""
    return f"{rollout_id}:{attempt_id or '-'}"


def group_id(input: Any, metadata: dict[str, Any] | None, resources_id: str | None) -> str:
    """Rollouts of one task under one resources id: the task is metadata `data_id` if given, else the input."""
    task = (metadata or {}).get(DATA_ID_KEY)
    basis = dumps({"task": task} if task is not None else {"input": input}) + "\x00" + (resources_id or "")
    return hashlib.sha256(basis.encode()).hexdigest()[:24]


def group_size(metadata: dict[str, Any] | None) -> int | None:
    size = (metadata or {}).get(GROUP_SIZE_KEY)
    return size if isinstance(size, int) and size > 0 else None


_TRIPLET_SIDES = ("prompt", "response")


def triplet_record(triplet: Triplet) -> dict[str, Any]:
    prompt = dict(triplet.prompt) if isinstance(triplet.prompt, dict) else {"raw_content": triplet.prompt}
    response = dict(triplet.response) if isinstance(triplet.response, dict) else {"raw_content": triplet.response}
    logprobs = response.pop("logprobs", None)
    return {
        "prompt_token_ids": list(prompt.pop("token_ids", None) or []),
        "response_token_ids": list(response.pop("token_ids", None) or []),
        "response_logprobs": None if logprobs is None else [_logprob(x) for x in logprobs],
        "reward": triplet.reward,
        "prompt_json": dumps(prompt),
        "response_json": dumps(response),
        "metadata_json": dumps(triplet.metadata),
    }


def _logprob(entry: Any) -> float:
    """A response token's logprob: a number, or OpenAI's per-token dict (`logprobs.content`, as upstream's
    TracerTraceToTriplet copies it), of which only `logprob` is kept."""
    return float(entry["logprob"] if isinstance(entry, dict) else entry)


def triplet_from_record(record: dict[str, Any]) -> Triplet:
    prompt = {"token_ids": list(record["prompt_token_ids"]), **orjson.loads(record["prompt_json"])}
    response = {"token_ids": list(record["response_token_ids"]), **orjson.loads(record["response_json"])}
    if record["response_logprobs"] is not None:
        response["logprobs"] = list(record["response_logprobs"])
    return Triplet(prompt=prompt, response=response, reward=record["reward"],
                   metadata=orjson.loads(record["metadata_json"]))


def sample_fields(sample: Sample) -> dict[str, Any]:
    """The SampleAdded fields (all but event_id, time, producer_id) for `log.records.event`."""
    fields = sample.model_dump(exclude={"input", "triplets"})
    fields["input_json"] = dumps(sample.input)
    fields["triplets"] = [triplet_record(t) for t in sample.triplets]
    return fields


def sample_from_record(record: dict[str, Any]) -> Sample:
    """A decoded SampleAdded record back to the model (extra event fields ignored)."""
    fields = {k: record[k] for k in Sample.model_fields if k in record and k not in ("input", "triplets")}
    return Sample(**fields, input=orjson.loads(record["input_json"]),
                  triplets=[triplet_from_record(t) for t in record["triplets"]])
