"""The attributes a runner adds to AgentOps' `openai.chat.completion` span, for each place a backend puts vLLM's
token ids (what upstream's token-id patch reads from the same response objects)."""

from __future__ import annotations

import json
from typing import Any

from openai.types.chat import ChatCompletion

from agl_events.tracer.instrument import token_attributes


def _completion(extra: dict[str, Any], choice_extra: dict[str, Any], logprobs: dict[str, Any] | None = None
                ) -> ChatCompletion:
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"},
              "logprobs": logprobs, **choice_extra}
    return ChatCompletion.model_validate({"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
                                          "choices": [choice], **extra})


def test_vllm_token_ids_and_logprobs() -> None:
    entry = {"token": "hi", "logprob": -0.5, "bytes": [104, 105], "top_logprobs": []}
    attributes = token_attributes(_completion({"prompt_token_ids": [1, 2]}, {"token_ids": [3]},
                                              {"content": [entry], "refusal": None}))
    assert json.loads(attributes.pop("logprobs.content")) == [entry]
    assert attributes == {"prompt_token_ids": [1, 2], "response_token_ids": [3]}


def test_litellms_provider_specific_fields() -> None:
    attributes = token_attributes(_completion({"prompt_token_ids": [1]},
                                              {"provider_specific_fields": {"token_ids": [7, 8]}}))
    assert attributes == {"prompt_token_ids": [1], "response_token_ids": [7, 8]}


def test_older_vllms_top_level_response_token_ids_come_first() -> None:
    attributes = token_attributes(_completion({"prompt_token_ids": [1], "response_token_ids": [[5, 6], [9]]},
                                              {"token_ids": [3]}))
    assert attributes == {"prompt_token_ids": [1], "response_token_ids": [5, 6]}


def test_nothing_for_an_openai_answer_or_a_stream() -> None:
    assert token_attributes(_completion({}, {})) == {}
    assert token_attributes(iter([])) == {}
