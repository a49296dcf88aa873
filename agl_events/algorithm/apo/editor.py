"""APO's two model calls: a critique of a prompt's training batch (the textual gradient), and the edit that
applies it. Through any OpenAI-compatible async client (`openai.AsyncOpenAI`, a LiteLLM proxy, vLLM).

The prompts are ours (`prompts/*.j2`, two of each kind, one picked at random per call, as upstream picks
among its POML files), filled with the same variables as upstream's: `prompt_template` and `experiments`
(status, final reward, messages) for the critique, `prompt_template` and `critique` for the edit.

A call that fails is retried (`retries` times, doubling the wait); what still fails, and an answer that is
no usable template (empty, unchanged, or dropping or adding a placeholder the agent fills), raises
`EditFailed` with the reason: the algorithm counts it, records it and goes on without that candidate.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Awaitable, Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from agl_events.algorithm.apo.beam import template_variables

log = logging.getLogger(__name__)

PROMPTS = Path(__file__).parent / "prompts"
CRITIQUE_PROMPTS = ("critique_failures.j2", "critique_goal.j2")
EDIT_PROMPTS = ("edit_rewrite.j2", "edit_conservative.j2")
_FENCE = re.compile(r"^```[\w-]*\n(.*?)\n?```$", re.DOTALL)


class EditFailed(RuntimeError):
    """No candidate from this edit; `str(error)` says why (recorded as the step's reason)."""


@cache
def _template(name: str) -> jinja2.Template:
    return jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True).from_string(
        (PROMPTS / name).read_text())


def render(name: str, **variables: Any) -> str:
    return _template(name).render(**variables)


def usable_edit(answer: str | None, parent: str) -> str:
    """The new template in a model's answer (a code fence around it taken off), or EditFailed."""
    text = (answer or "").strip()
    fenced = _FENCE.match(text)
    text = fenced.group(1).strip() if fenced else text
    if not text:
        raise EditFailed("the edit model answered nothing")
    if text == parent.strip():
        raise EditFailed("the edit model gave the template back unchanged")
    try:
        found, wanted = template_variables(text), template_variables(parent)
    except ValueError as exc:  # unbalanced braces
        raise EditFailed(f"the edit is no f-string template: {exc}") from exc
    if found != wanted:
        lost, added = sorted(wanted - found), sorted(found - wanted)
        raise EditFailed("the edit changed the placeholders: " + "; ".join(
            part for part in (f"lost {{{', '.join(lost)}}}" if lost else "",
                              f"added {{{', '.join(added)}}}" if added else "") if part))
    return text


class PromptEditor:
    """Critique and edit through `client` (`client.chat.completions.create`, awaited)."""

    def __init__(self, client: Any, *, gradient_model: str, apply_edit_model: str, temperature: float,
                 rng: random.Random, retries: int = 2, backoff: float = 1.0,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.client, self.gradient_model, self.apply_edit_model = client, gradient_model, apply_edit_model
        self.temperature, self.rng, self.retries, self.backoff, self.sleep = temperature, rng, retries, backoff, sleep

    async def critique(self, template: str, experiments: Sequence[dict[str, Any]]) -> str:
        text = await self._ask(self.gradient_model, render(self.rng.choice(CRITIQUE_PROMPTS),
                                                           prompt_template=template, experiments=experiments))
        if not text.strip():
            raise EditFailed("the gradient model answered nothing")
        return text.strip()

    async def edit(self, template: str, critique: str) -> str:
        answer = await self._ask(self.apply_edit_model, render(self.rng.choice(EDIT_PROMPTS),
                                                               prompt_template=template, critique=critique))
        return usable_edit(answer, template)

    async def _ask(self, model: str, prompt: str) -> str:
        failures, wait = 0, self.backoff
        while True:
            try:
                response = await self.client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": prompt}], temperature=self.temperature)
            except Exception as exc:  # the endpoint down, an HTTP error status, a body that is no JSON
                failures += 1
                if failures > self.retries:
                    raise EditFailed(f"{model} failed after {failures} tries: {type(exc).__name__}: {exc}") from exc
                log.warning("%s: %s (try %d of %d, again in %.1f s)", model, exc, failures, self.retries + 1, wait)
                await self.sleep(wait)
                wait *= 2
                continue
            return _content(response)


def _content(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError) as exc:
        raise EditFailed(f"the answer is no chat completion: {str(response)[:200]}") from exc
    return content if isinstance(content, str) else ""
