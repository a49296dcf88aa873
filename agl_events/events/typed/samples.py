"""Training samples (samples topic): a finished rollout turned into triplets by the configured adapter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from agl_events.events.typed.base import Decided


class Triplet(TypedDict):
    """One LLM call of a trajectory: token ids and logprobs as arrays, everything else as JSON text."""

    prompt_token_ids: list[int]
    response_token_ids: list[int]
    response_logprobs: list[float] | None
    reward: float | None
    prompt_json: str
    response_json: str
    metadata_json: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleAdded(Decided):
    """Emitted at least once per finished rollout; `sample_id` is the same on every re-emit (consumers dedupe)."""

    sample_id: str
    rollout_id: str
    attempt_id: str | None = None
    group_id: str
    group_size: int | None = None
    resources_id: str | None = None
    resources_generation: int | None = None
    mode: str | None = None
    status: str
    final_reward: float | None = None
    input_json: str
    adapter: str
    triplets: list[Triplet]

    @property
    def key(self) -> str:
        return self.rollout_id
