"""Agents that call their LLM directly with the openai client (no proxy) and open spans with OpenTelemetry's
own API, as agents written for Agent Lightning do; at module level so spawned runner processes import them.

`ask` and `ask_async` are plain functions so upstream's `rollout` decorator can wrap them too (its runner
accepts `(task, llm)` agents); ours wraps them here.
"""

from __future__ import annotations

from typing import Any

import openai
from opentelemetry import trace

from agl_events import rollout
from agl_events.types import LLM

PLAN_SPAN = "plan"  # opened through opentelemetry.trace.get_tracer, around the agent's LLM calls
LOOKUP_SPAN = "lookup"


def ask(task: dict[str, Any], llm: Any) -> float:
    """One chat completion per question, vLLM asked for token ids and logprobs; the task's reward."""
    client = openai.OpenAI(base_url=llm.endpoint, api_key="unused")
    with trace.get_tracer(__name__).start_as_current_span(PLAN_SPAN):
        for question in task["questions"]:
            client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": question}],
                                           logprobs=True, extra_body={"return_token_ids": True})
    return float(task["reward"])


async def ask_async(task: dict[str, Any], llm: LLM) -> float:
    """The async client, inside a span of the agent's own."""
    client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key="unused")
    with trace.get_tracer(__name__).start_as_current_span(LOOKUP_SPAN, attributes={"question": task["question"]}):
        await client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task["question"]}],
                                             extra_body={"return_token_ids": True})
    return 1.0


asking_agent = rollout(ask)
