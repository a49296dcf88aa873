"""The entity records events carry (`schemas/types/`): a rollout, an attempt, a resources snapshot.

Each converts from the store's model (the JSON-shaped dict the view holds, `of`) and back (`to_model`), with
arbitrary JSON (input, metadata, resources) as JSON text in between. A rollout's config is a TypedDict: the
view stores it as it comes and nothing takes it apart on the way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

import orjson

from agl_events.events.jsontext import dumps, loads_optional
from agl_events.events.typed.base import Record


class RolloutConfig(TypedDict):
    """Agent Lightning's RolloutConfig: timeouts and the retry policy of a rollout."""

    timeout_seconds: float | None
    unresponsive_seconds: float | None
    max_attempts: int
    retry_condition: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rollout(Record):
    rollout_id: str
    input_json: str
    start_time: float
    end_time: float | None = None
    mode: str | None = None
    resources_id: str | None = None
    status: str
    config: RolloutConfig
    metadata_json: str | None = None

    @classmethod
    def of(cls, rollout: Mapping[str, Any]) -> Rollout:
        return cls(rollout_id=rollout["rollout_id"], input_json=dumps(rollout["input"]),
                   start_time=rollout["start_time"], end_time=rollout["end_time"], mode=rollout["mode"],
                   resources_id=rollout["resources_id"], status=rollout["status"], config=rollout["config"],
                   metadata_json=None if rollout["metadata"] is None else dumps(rollout["metadata"]))

    def to_model(self) -> dict[str, Any]:
        return {"rollout_id": self.rollout_id, "input": orjson.loads(self.input_json), "start_time": self.start_time,
                "end_time": self.end_time, "mode": self.mode, "resources_id": self.resources_id,
                "status": self.status, "config": dict(self.config), "metadata": loads_optional(self.metadata_json)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt(Record):
    rollout_id: str
    attempt_id: str
    sequence_id: int
    start_time: float
    end_time: float | None = None
    status: str
    worker_id: str | None = None
    last_heartbeat_time: float | None = None
    metadata_json: str | None = None

    @classmethod
    def of(cls, attempt: Mapping[str, Any]) -> Attempt:
        return cls(rollout_id=attempt["rollout_id"], attempt_id=attempt["attempt_id"],
                   sequence_id=attempt["sequence_id"], start_time=attempt["start_time"],
                   end_time=attempt["end_time"], status=attempt["status"], worker_id=attempt["worker_id"],
                   last_heartbeat_time=attempt["last_heartbeat_time"],
                   metadata_json=None if attempt["metadata"] is None else dumps(attempt["metadata"]))

    def to_model(self) -> dict[str, Any]:
        return {"rollout_id": self.rollout_id, "attempt_id": self.attempt_id, "sequence_id": self.sequence_id,
                "start_time": self.start_time, "end_time": self.end_time, "status": self.status,
                "worker_id": self.worker_id, "last_heartbeat_time": self.last_heartbeat_time,
                "metadata": loads_optional(self.metadata_json)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourcesSnapshot(Record):
    """Agent Lightning's ResourcesUpdate; the named resources as JSON text, so new resource kinds need no schema."""

    resources_id: str
    version: int
    create_time: float
    update_time: float
    resources_json: str

    @classmethod
    def of(cls, snapshot: Mapping[str, Any]) -> ResourcesSnapshot:
        return cls(resources_id=snapshot["resources_id"], version=snapshot["version"],
                   create_time=snapshot["create_time"], update_time=snapshot["update_time"],
                   resources_json=dumps(snapshot["resources"]))

    def to_model(self) -> dict[str, Any]:
        return {"resources_id": self.resources_id, "version": self.version, "create_time": self.create_time,
                "update_time": self.update_time, "resources": orjson.loads(self.resources_json)}
