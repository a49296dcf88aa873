"""The end-to-end APO test's world: a scripted OpenAI-compatible server playing the task model, the critic
and the editor, and the agent the runners run (module level, so spawned runner processes import it).

The task model answers a question's number alone only when the prompt asks for "a number only", otherwise
in a sentence, and slowly unless told "be quick"; the agent rewards an exact answer 1, one found in a
sentence 0.5. The critic reads the template our critique prompt sends and names the first of those
instructions it lacks; the editor adds the instruction the critique names. So the seed prompt can be
improved, and only by going through the critique and the edit.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import openai
from fastapi import FastAPI, Request

from agl_events import rollout
from agl_events.llm.loopback import LoopbackServer
from agl_events.types import LLM, PromptTemplate

HINTS = ("Answer with a number only.", "Be quick.")


def _chat(text: str) -> dict[str, Any]:
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class ScriptedModels(LoopbackServer):
    """`task-model`, `critic` and `editor` behind one `/v1/chat/completions`; `calls` counts by model."""

    def __init__(self, slow_seconds: float = 0.3) -> None:
        self.slow_seconds = slow_seconds
        self.calls: dict[str, int] = {}
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> dict[str, Any]:
            body = await request.json()
            model, prompt = body["model"], body["messages"][-1]["content"]
            self.calls[model] = self.calls.get(model, 0) + 1
            if model == "task-model":
                return _chat(await self._solve(prompt))
            template = re.search(r"<template>\n(.*?)\n</template>", prompt, re.DOTALL)
            if template is None:
                return _chat("no template in this request")
            if model == "critic":
                missing = [hint for hint in HINTS if hint not in template.group(1)]
                return _chat(f"- add the instruction: {missing[0]}" if missing else "- it is fine as it is")
            hint = re.search(r"add the instruction: (.*)", prompt)
            return _chat(template.group(1) + (f" {hint.group(1)}" if hint else " Be kind."))

        super().__init__(app, name="scripted models")

    async def _solve(self, prompt: str) -> str:
        if "Be quick." not in prompt:
            await asyncio.sleep(self.slow_seconds)
        numbers = re.search(r"(\d+) \+ (\d+)", prompt)
        answer = str(int(numbers.group(1)) + int(numbers.group(2))) if numbers else "?"
        return answer if "Answer with a number only." in prompt else f"Let me see. It is {answer}, I believe."


@rollout
def arithmetic_agent(task: dict[str, Any], prompt_template: PromptTemplate, llm: LLM) -> float:
    client = openai.OpenAI(base_url=llm.endpoint, api_key="unused", max_retries=0)
    try:
        reply = client.chat.completions.create(model=llm.model, messages=[
            {"role": "user", "content": prompt_template.format(question=task["question"])}])
    finally:
        client.close()
    text = (reply.choices[0].message.content or "").strip()
    return 1.0 if text == str(task["answer"]) else 0.5 if str(task["answer"]) in text else 0.0


def arithmetic_tasks(count: int, offset: int = 0) -> list[dict[str, Any]]:
    return [{"question": f"What is {i} + {2 * i + 1}?", "answer": 3 * i + 1} for i in range(offset, offset + count)]
