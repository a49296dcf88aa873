"""Resources decisions: new snapshots and versioned updates (upserts, as upstream)."""

from __future__ import annotations

from typing import Any

from agl_events.events.typed import ResourcesPublished, ResourcesSnapshot, ResourcesUpdated
from agl_events.reducers import keys
from agl_events.store.context import DecisionContext
from agl_events.store.ids import new_resources_id


def add_resources(ctx: DecisionContext, resources: dict[str, Any]) -> dict[str, Any]:
    now = ctx.tick()
    snapshot = {"resources_id": new_resources_id(), "create_time": now, "update_time": now,
                "version": 1, "resources": resources}
    ctx.emit(ResourcesPublished(resources=ResourcesSnapshot.of(snapshot)))
    return snapshot


def update_resources(ctx: DecisionContext, resources_id: str, resources: dict[str, Any]) -> dict[str, Any]:
    current = ctx.get(keys.resources(resources_id))
    now = ctx.tick()
    if current is None:
        snapshot = {"resources_id": resources_id, "create_time": now, "update_time": now,
                    "version": 1, "resources": resources}
        ctx.emit(ResourcesPublished(resources=ResourcesSnapshot.of(snapshot)))
        return snapshot
    snapshot = {**current, "update_time": now, "version": current["version"] + 1, "resources": resources}
    ctx.emit(ResourcesUpdated(resources=ResourcesSnapshot.of(snapshot)))
    return snapshot
