"""Folding resources events: snapshots by id, and which one is the latest (greatest update_time)."""

from __future__ import annotations

from agl_events.events.typed import ResourcesPublished, ResourcesUpdated
from agl_events.reducers import keys
from agl_events.reducers.changes import Pending


def resources_published(view: Pending, event: ResourcesPublished | ResourcesUpdated) -> None:
    snapshot = event.resources
    view.create(keys.resources(snapshot.resources_id), snapshot.to_model(), "resources")
    latest_id = view.get(keys.LATEST_RESOURCES)
    latest = view.get(keys.resources(latest_id)) if latest_id is not None else None
    if latest is None or latest_id == snapshot.resources_id or snapshot.update_time >= latest["update_time"]:
        view.put(keys.LATEST_RESOURCES, snapshot.resources_id)


resources_updated = resources_published
