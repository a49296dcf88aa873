"""Folding streamed chunks into the whole response: text, token ids, logprobs and tool calls."""

from __future__ import annotations

from agl_events.llm.stream import StreamAssembler, sse_data


def test_chat_chunks_fold_into_the_unstreamed_response() -> None:
    folded = StreamAssembler(chat=True)
    folded.add({"id": "c1", "model": "m", "prompt_token_ids": [1, 2],
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    folded.add({"id": "c1", "choices": [{"index": 0, "delta": {"content": "Hel"}, "token_ids": [7],
                                         "logprobs": {"content": [{"token": "Hel", "logprob": -0.1}]}}]})
    folded.add({"id": "c1", "prompt_token_ids": [9], "choices": [
        {"index": 0, "delta": {"content": "lo", "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a":'}}]},
         "token_ids": [8], "logprobs": {"content": [{"token": "lo", "logprob": -0.2}]}}]})
    folded.add({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]},
                             "finish_reason": "tool_calls"}]})
    folded.add({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 2}})
    assert folded.response() == {
        "id": "c1", "model": "m", "prompt_token_ids": [1, 2], "object": "chat.completion",
        "usage": {"prompt_tokens": 2, "completion_tokens": 2},
        "choices": [{"index": 0, "finish_reason": "tool_calls", "token_ids": [7, 8],
                     "message": {"role": "assistant", "content": "Hello", "tool_calls": [
                         {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}]},
                     "logprobs": {"content": [{"token": "Hel", "logprob": -0.1}, {"token": "lo", "logprob": -0.2}]}}]}


def test_text_completion_chunks_fold_per_choice() -> None:
    folded = StreamAssembler(chat=False)
    for index, text in [(0, "a"), (1, "x"), (0, "b")]:
        first = {"prompt_token_ids": [5]} if text in "ax" else {}
        folded.add({"id": "t", "choices": [{"index": index, "text": text, "token_ids": [ord(text)], **first,
                                            "logprobs": {"tokens": [text], "token_logprobs": [-1.0],
                                                         "top_logprobs": [{text: -1.0}], "text_offset": [0]}}]})
    choices = folded.response()["choices"]
    assert [(c["text"], c["token_ids"], c["prompt_token_ids"]) for c in choices] == [
        ("ab", [97, 98], [5]), ("x", [120], [5])]
    assert choices[0]["logprobs"]["tokens"] == ["a", "b"]


def test_sse_data_joins_data_lines_and_skips_the_rest() -> None:
    assert sse_data(["event: x", "data: {\"a\":", "data: 1}"]) == '{"a":\n1}'
    assert sse_data([": keep-alive"]) is None
    assert sse_data(["data:[DONE]"]) == "[DONE]"
