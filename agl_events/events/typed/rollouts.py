"""Rollout events (rollouts topic), and RolloutFinished (on the rollout's span partition, for span readers)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agl_events.events.typed.base import Decided
from agl_events.events.typed.records import Attempt, Rollout


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutEnqueued(Decided):
    """A rollout created in status queuing, at `queue_seq` in the experiment's FIFO queue."""

    rollout: Rollout
    queue_seq: int

    @property
    def key(self) -> str:
        return self.rollout.rollout_id


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutStarted(Decided):
    """A rollout created directly in status preparing, bypassing the queue (start_rollout)."""

    rollout: Rollout

    @property
    def key(self) -> str:
        return self.rollout.rollout_id


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutUpdated(Decided):
    """update_rollout replaced the `changed` fields; `rollout` is the whole record afterwards."""

    rollout: Rollout
    changed: list[str] = field(default_factory=list)
    queue_seq: int | None = None

    @property
    def key(self) -> str:
        return self.rollout.rollout_id


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutStatusChanged(Decided):
    """A status change as a consequence of another decision (`cause`: dequeue, claim, attempt, span, watchdog)."""

    rollout_id: str
    status: str
    previous_status: str
    end_time: float | None = None
    queue_seq: int | None = None
    cause: str = ""

    @property
    def key(self) -> str:
        return self.rollout_id


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutFinished(Decided):
    """The rollout reached a final status; appended after its spans, so span readers see a complete trace."""

    rollout: Rollout
    attempt: Attempt | None = None
    resources_generation: int | None = None

    @property
    def key(self) -> str:
        return self.rollout.rollout_id
