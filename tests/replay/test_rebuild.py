"""Rebuilding views from the log on the real broker: a rebuild equals the live view (by digest through the
store API), a rebuild as of a resources version or a time equals the live view captured then, a rebuild from a
snapshot equals one from offset 0, and pruned history is refused rather than silently missed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from agl_events.config import Settings
from agl_events.log.clients import make_admin
from agl_events.replay.cut import CutSpec
from agl_events.replay.digest import Digest, digest
from agl_events.replay.rebuild import HistoryGone, Rebuilt, rebuild
from agl_events.replay.snapshot import list_snapshots, partial_dir, prune_spans, seal
from agl_events.store.kafka import KafkaLightningStore
from agl_events.store.readonly import ReadOnlyStore
from tests.reducers.workload import workload
from tests.store import prompt

pytestmark = pytest.mark.kafka

#: Kafka stamps records in milliseconds: a pause this long puts a cut strictly between two stretches of work.
TICK = 0.005


async def _live(settings: Settings, folder: Path) -> KafkaLightningStore:
    return await KafkaLightningStore.open(settings, view_dir=folder, scan_debounce_seconds=3600)


async def _rebuilt_digest(settings: Settings, to: Path, spec: CutSpec | None = None,
                          snapshots: Path | None = None) -> tuple[Rebuilt, Digest]:
    done = await asyncio.to_thread(rebuild, settings, to, spec, snapshots=snapshots)
    store = ReadOnlyStore.open(done.path)
    try:
        return done, await digest(store)
    finally:
        await store.close()


async def test_a_rebuilt_view_has_the_live_views_digest(settings: Settings, tmp_path: Path) -> None:
    live = await _live(settings, tmp_path / "live")
    try:
        await workload(live, seed=3).run(150)
        want = await digest(live)
    finally:
        await live.close()
    done, got = await _rebuilt_digest(settings, tmp_path / "rebuilt")
    assert got.value == want.value and got.counts == want.counts
    assert min(want.counts.values()) > 0, want.counts  # every kind of part took part
    assert done.snapshot is None and done.records == done.cut.total > 0


async def test_a_view_as_of_a_resources_version_or_a_time_is_the_live_view_of_then(settings: Settings,
                                                                                  tmp_path: Path) -> None:
    live = await _live(settings, tmp_path / "live")
    try:
        work = workload(live, seed=5)
        await work.run(80)
        version = await live.add_resources({"main": prompt("as of {name}")})
        then = await digest(live)
        await asyncio.sleep(TICK)
        moment = time.time()
        await asyncio.sleep(TICK)
        await work.run(80)
        now = await digest(live)
    finally:
        await live.close()
    assert now.value != then.value  # the later work changed the view, so equal digests below mean something
    _, as_of_version = await _rebuilt_digest(settings, tmp_path / "v", CutSpec(until_resources=version.resources_id))
    _, as_of_time = await _rebuilt_digest(settings, tmp_path / "t", CutSpec(until=moment))
    _, to_the_end = await _rebuilt_digest(settings, tmp_path / "end")
    assert as_of_version.value == as_of_time.value == then.value
    assert to_the_end.value == now.value
    with pytest.raises(LookupError, match="no resources 'rs-nope'"):
        await asyncio.to_thread(rebuild, settings, tmp_path / "nope", CutSpec(until_resources="rs-nope"))


async def test_a_rebuild_from_a_snapshot_equals_one_from_offset_0_even_after_pruning(settings: Settings,
                                                                                   tmp_path: Path) -> None:
    root = tmp_path / "snapshots"
    live = await _live(settings, tmp_path / "live")
    try:
        work = workload(live, seed=7)
        await work.run(100)
        taken_at = time.time()
        partial = partial_dir(root, settings.experiment, taken_at)
        first = await asyncio.to_thread(rebuild, settings, partial / "view")
        snapshot = seal(partial, settings.experiment, taken_at, first.cut)
        await work.run(100)
        want = await digest(live)
    finally:
        await live.close()
    assert list_snapshots(root, settings.experiment) == [snapshot]

    from_snapshot, a = await _rebuilt_digest(settings, tmp_path / "a", snapshots=root)
    from_zero, b = await _rebuilt_digest(settings, tmp_path / "b")
    assert from_snapshot.snapshot == snapshot and from_zero.snapshot is None
    assert from_snapshot.records == from_zero.records - first.records  # it read only what came after
    assert a.value == b.value == want.value

    admin = make_admin(settings.bootstrap_servers)
    spans = {pos: end for pos, end in snapshot.cut.positions.items() if pos[0].endswith(".spans") and end > 0}
    keep = {pos: end // 2 for pos, end in spans.items()}
    assert any(keep.values())
    # Recent spans kept (as `--keep-spans-for` asks): pruning stops at the earlier of the two.
    assert await asyncio.to_thread(prune_spans, admin, snapshot, keep) == {p: o for p, o in keep.items() if o}
    pruned = await asyncio.to_thread(prune_spans, admin, snapshot)
    assert pruned == spans
    with pytest.raises(HistoryGone, match="spans"):
        await asyncio.to_thread(rebuild, settings, tmp_path / "c")
    _, again = await _rebuilt_digest(settings, tmp_path / "d", snapshots=root)
    assert again.value == want.value
    # A cut before the snapshot cannot use it, and the spans it would need are gone.
    with pytest.raises(HistoryGone):
        await asyncio.to_thread(rebuild, settings, tmp_path / "e", CutSpec(until=taken_at - 3600), snapshots=root)


def test_a_rebuild_refuses_a_folder_that_holds_something(settings: Settings, tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    with pytest.raises(FileExistsError, match="not empty"):
        rebuild(settings, tmp_path / "busy")
