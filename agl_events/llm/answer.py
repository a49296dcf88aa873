"""A backend's chat answer in the shape LiteLLM's proxy (upstream 0.3.0's proxy) gives it, vLLM's fields kept.

LiteLLM turns an OpenAI-compatible chat completion into its `ModelResponse`: each choice keeps OpenAI's
fields and every other field the backend put on it (vLLM's `token_ids`, `stop_reason`, ...) goes into
`choices[i].provider_specific_fields`, where a client written for upstream's proxy reads the token ids.
We answer with both: the fields where LiteLLM puts them, and where vLLM put them (a client written for
vLLM reads `choices[i].token_ids`). The top-level `prompt_token_ids` stays where it is in both.

Text completions need nothing: LiteLLM's `TextCompletionResponse` leaves vLLM's `prompt_token_ids` and
`token_ids` on the choice. Streamed chunks are relayed as the backend sends them: upstream's proxy answers
a streamed chat whole and replays it as chunks without token ids, and LiteLLM's own streaming drops them
too, so its clients read none there. Pure: dicts in, dicts out.
"""

from __future__ import annotations

from typing import Any

# The fields of LiteLLM's `Choices` (litellm.types.utils): a chat choice's fields that stay where they are.
CHOICE_FIELDS = frozenset({"finish_reason", "index", "message", "logprobs", "provider_specific_fields"})


def with_provider_specific_fields(response: dict[str, Any]) -> dict[str, Any]:
    """The chat answer with each choice's non-OpenAI fields also under `provider_specific_fields`."""
    choices = response.get("choices")
    if not isinstance(choices, list):
        return response
    return {**response, "choices": [_choice(c) if isinstance(c, dict) else c for c in choices]}


def _choice(choice: dict[str, Any]) -> dict[str, Any]:
    extra = {key: value for key, value in choice.items() if key not in CHOICE_FIELDS}
    if not extra:
        return choice
    given = choice.get("provider_specific_fields")
    return {**choice, "provider_specific_fields": {**(given if isinstance(given, dict) else {}), **extra}}
