"""Answers and raw spans in LiteLLM's shapes, checked against LiteLLM's own conversion (no proxy, no broker)."""

from __future__ import annotations

from typing import Any

from agl_events.llm.answer import CHOICE_FIELDS, with_provider_specific_fields
from agl_events.llm.model_list import ModelConfig
from agl_events.llm.routing import ModelRouter
from agl_events.llm.spans import LlmCall, raw_attributes

VLLM_CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m", "prompt_token_ids": [1, 2],
             "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "logprobs": None,
                          "finish_reason": "stop", "stop_reason": None, "token_ids": [7, 8]}],
             "usage": {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}}


def test_choice_fields_are_litellms() -> None:
    from litellm.types.utils import Choices

    assert set(Choices.model_fields) == CHOICE_FIELDS


def test_a_chat_answer_gets_the_provider_specific_fields_litellm_gives_it() -> None:
    from litellm.litellm_core_utils.llm_response_utils.convert_dict_to_response import (
        convert_to_model_response_object,
    )
    from litellm.types.utils import ModelResponse

    theirs = convert_to_model_response_object(response_object=VLLM_CHAT, model_response_object=ModelResponse())
    shaped = with_provider_specific_fields(VLLM_CHAT)
    choice = shaped["choices"][0]
    assert choice["provider_specific_fields"] == theirs.choices[0].provider_specific_fields == {
        "token_ids": [7, 8], "stop_reason": None}
    assert choice["token_ids"] == [7, 8] and shaped["prompt_token_ids"] == [1, 2]  # vLLM's own fields kept
    assert VLLM_CHAT["choices"][0].get("provider_specific_fields") is None  # the backend's answer is not changed


def test_an_answer_with_only_openai_fields_is_left_as_it_is() -> None:
    plain = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}]}
    assert with_provider_specific_fields(plain) == plain


async def raw_request(model: str, sent: dict[str, Any]) -> dict[str, Any]:
    router = ModelRouter([ModelConfig(model_name="p", litellm_params={"model": model,
                                                                       "api_base": "http://127.0.0.1:1/v1"})])
    deployment = await router.route("p")
    call = LlmCall(rollout_id="r", attempt_id="a", sequence_id=1, kind="chat", model_name="p",
                   provider=deployment.provider, request=sent, stream=False, start_time=0.0, end_time=0.0,
                   extra_body=deployment.extra_body("chat", sent))
    return raw_attributes(call)


async def test_the_raw_span_nests_non_openai_parameters_where_litellms_openai_sdk_call_has_them() -> None:
    sent = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "logprobs": True, "return_token_ids": True}
    assert await raw_request("openai/m", sent) == {
        "llm.openai.model": "m", "llm.openai.messages": "[{'role': 'user', 'content': 'hi'}]",
        "llm.openai.logprobs": True, "llm.openai.extra_body": "{'return_token_ids': True}"}
    flat = await raw_request("hosted_vllm/m", sent)  # LiteLLM's own HTTP handler sends and logs it flat
    assert flat["llm.hosted_vllm.return_token_ids"] is True and "llm.hosted_vllm.extra_body" not in flat
