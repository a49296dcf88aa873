"""Resources events and prompt optimization steps (resources topic, compacted: one key per snapshot or step)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agl_events.events.typed.base import Decided
from agl_events.events.typed.records import ResourcesSnapshot


@dataclass(frozen=True, slots=True, kw_only=True)
class _ResourcesEvent(Decided):
    resources: ResourcesSnapshot

    @property
    def key(self) -> str:
        return self.resources.resources_id


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourcesPublished(_ResourcesEvent):
    """A new resources snapshot (add_resources, or update_resources of an unknown id); it becomes the latest."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourcesUpdated(_ResourcesEvent):
    """An existing snapshot replaced with version + 1; it becomes the latest."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptCandidateRecorded(Decided):
    """A step of a prompt optimization run (APO): a candidate `proposed`, `scored` or `failed`."""

    run_id: str
    candidate_id: str
    stage: str
    round: int
    parent_id: str | None = None
    template: str | None = None
    critique: str | None = None
    scope: str | None = None
    score: float | None = None
    rollout_ids: list[str] = field(default_factory=list)
    reason: str | None = None

    @property
    def key(self) -> str:
        """One key per step: a key shared with the candidate's resources snapshot (or with another step) would
        let compaction drop the older record."""
        return "/".join(("apo", self.run_id, self.candidate_id, self.stage, str(self.round), self.scope or ""))
