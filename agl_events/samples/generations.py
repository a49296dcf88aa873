"""Resources generations: the global order of resources ids that staleness is counted in.

Resources ids are created by `add_resources` at any time and never renamed; ranking them by create time
(ties by id) gives every id a 1-based generation that stays the same on every rebuild, even after the
compacted resources topic dropped older snapshots. "k versions back" means k generations before the
latest. Pure: callers pass the snapshots they have (the store's view, or `query_resources`).
"""

from __future__ import annotations

from collections.abc import Iterable


def generations(snapshots: Iterable[tuple[float, str]]) -> dict[str, int]:
    """Every resources id's generation among `(create_time, resources_id)` pairs."""
    return {rid: generation for generation, (_, rid) in enumerate(sorted(snapshots), start=1)}


def generation_of(resources_id: str | None, snapshots: Iterable[tuple[float, str]]) -> int | None:
    """The generation of `resources_id` among `(create_time, resources_id)` pairs; None if absent."""
    return None if resources_id is None else generations(snapshots).get(resources_id)


def is_stale(generation: int | None, current: int | None, max_staleness: int | None) -> bool:
    """Too many generations behind `current`? Unversioned samples and unbounded staleness never are."""
    if generation is None or current is None or max_staleness is None:
        return False
    return current - generation > max_staleness
