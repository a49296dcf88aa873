"""View snapshots: a folded view (RocksDB files) and the log positions it holds, kept in a directory tree.

    <root>/<experiment>/<taken-at>/view/            the RocksDB folder of a view folded up to `positions`
    <root>/<experiment>/<taken-at>/manifest.json    experiment, positions (a Cut), when, how many records

A rebuild restores the latest snapshot whose positions are within its cut and folds only what follows, so a
long run's rebuild reads the log's tail, not its whole history; and once a snapshot covers them, old spans can
be deleted from the broker (`prune_spans`) without losing the ability to rebuild. A directory, not a topic:
RocksDB's files copy as they are, and any object store syncs a directory tree. A snapshot is written under a
`.partial` name and renamed when complete, so a crash never leaves one that looks whole.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import orjson
from pydantic import BaseModel

from agl_events.log.admin import delete_records
from agl_events.log.clients import AdminClient
from agl_events.log.records import Position
from agl_events.replay.cut import Cut
from agl_events.topics import Topic, topic_name

MANIFEST = "manifest.json"
VIEW = "view"


class Snapshot(BaseModel):
    """One snapshot's manifest, and where it lies."""

    experiment: str
    taken_at: float
    cut: Cut
    path: Path

    @property
    def view(self) -> Path:
        return self.path / VIEW


def experiment_dir(root: Path, experiment: str) -> Path:
    return root / experiment


def partial_dir(root: Path, experiment: str, taken_at: float) -> Path:
    """Where a snapshot is folded before it is complete (`seal` renames it)."""
    stamp = datetime.fromtimestamp(taken_at, UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return experiment_dir(root, experiment) / f"{stamp}.partial"


def seal(partial: Path, experiment: str, taken_at: float, cut: Cut) -> Snapshot:
    """Write the manifest of a snapshot folded into `partial/view` and make it visible under its final name."""
    final = partial.with_suffix("")
    snapshot = Snapshot(experiment=experiment, taken_at=taken_at, cut=cut, path=final)
    (partial / MANIFEST).write_text(snapshot.model_dump_json(indent=2, exclude={"path"}))
    partial.rename(final)
    return snapshot


def list_snapshots(root: Path, experiment: str) -> list[Snapshot]:
    """Complete snapshots of `experiment`, oldest first."""
    folder = experiment_dir(root, experiment)
    if not folder.is_dir():
        return []
    found = [Snapshot.model_validate({**orjson.loads((path / MANIFEST).read_bytes()), "path": path})
             for path in folder.iterdir() if path.suffix != ".partial" and (path / MANIFEST).is_file()]
    return sorted(found, key=lambda s: s.taken_at)


def usable(snapshots: list[Snapshot], cut: Mapping[Position, int]) -> Snapshot | None:
    """The latest snapshot that does not reach past `cut` in any partition (a rebuild can start from it)."""
    for snapshot in reversed(snapshots):
        if all(end <= cut.get(pos, 0) for pos, end in snapshot.cut.positions.items()):
            return snapshot
    return None


def restore(snapshot: Snapshot, to: Path) -> None:
    """Copy the snapshot's view to `to` (a copy: the rebuild writes to it, the snapshot stays as it was)."""
    shutil.copytree(snapshot.view, to, dirs_exist_ok=True)


def keep_latest(root: Path, experiment: str, keep: int) -> list[Path]:
    """Delete all but the `keep` latest snapshots (and leftover partial ones); returns what was deleted."""
    snapshots = list_snapshots(root, experiment)
    doomed = [s.path for s in snapshots[:max(0, len(snapshots) - keep)]]
    doomed += list(experiment_dir(root, experiment).glob("*.partial"))
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)
    return doomed


def prune_spans(admin: AdminClient, snapshot: Snapshot, keep_from: Mapping[Position, int] | None = None,
                timeout: float = 30.0) -> dict[Position, int]:
    """Delete the span records `snapshot` covers from the broker (Kafka's DeleteRecords): the bulk of the log.
    With `keep_from` (per span partition, e.g. the first offset of the last week), records from there on stay
    even where the snapshot covers them, for exports of recent history.

    What stays replayable: any rebuild from this snapshot or a later one; rollouts, attempts, resources and
    samples in full (their topics are not touched). What does not: a rebuild from offset 0 or from an older
    snapshot, a view as of a time before the snapshot, and an export of spans before it (the samples topic still
    holds the samples made from them)."""
    spans = topic_name(snapshot.experiment, Topic.SPANS)
    keep = keep_from or {}
    ends = {(t, p): min(end, keep.get((t, p), end)) for (t, p), end in snapshot.cut.positions.items() if t == spans}
    return delete_records(admin, ends, timeout)
