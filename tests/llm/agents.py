"""Agents that call the LLM proxy, at module level so spawned runner processes can import them."""

from __future__ import annotations

from typing import Any

import openai

from agl_events import operation, rollout
from agl_events.types import LLM


@rollout
def asking_agent(task: dict[str, Any], llm: LLM) -> float:
    """Two calls on the attempt's own route (one inside a traced step, one streamed), then a reward."""
    client = openai.OpenAI(base_url=llm.endpoint, api_key="unused", max_retries=0)
    with operation(step="think"):
        first = client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task["q"]}])
    chunks = client.chat.completions.create(model=llm.model, stream=True, messages=[
        {"role": "user", "content": task["q"]}, {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "again"}])
    second = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    client.close()
    return 1.0 if second == "Echo: again" else 0.0
