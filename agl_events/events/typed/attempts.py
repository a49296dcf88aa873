"""Attempt events (attempts topic)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agl_events.events.typed.base import Decided
from agl_events.events.typed.records import Attempt


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptCreated(Decided):
    """A new attempt of a rollout (dequeue, claim, start_rollout or start_attempt)."""

    attempt: Attempt

    @property
    def key(self) -> str:
        return self.attempt.rollout_id


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptUpdated(Decided):
    """update_attempt replaced the `changed` fields; `attempt` is the whole record afterwards."""

    attempt: Attempt
    changed: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.attempt.rollout_id


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptStatusChanged(Decided):
    """An attempt's status changed (first span of a preparing or unresponsive attempt)."""

    rollout_id: str
    attempt_id: str
    status: str
    previous_status: str
    end_time: float | None = None

    @property
    def key(self) -> str:
        return self.rollout_id


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptHeartbeat(Decided):
    """A span arrived for the attempt: liveness on the store's clock."""

    rollout_id: str
    attempt_id: str
    heartbeat_time: float

    @property
    def key(self) -> str:
        return self.rollout_id
