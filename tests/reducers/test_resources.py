"""Resources events: snapshots by id, and the latest one (greatest update time, ties to the later event)."""

from __future__ import annotations

from agl_events.events.typed import ResourcesPublished, ResourcesSnapshot, ResourcesUpdated
from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from tests.reducers import fold, logged
from tests.store import prompt


def published(rs_id: str, update_time: float, version: int = 1,
              kind: type[ResourcesPublished | ResourcesUpdated] = ResourcesPublished) -> LoggedEvent:
    snapshot = {"resources_id": rs_id, "version": version, "create_time": 1.0, "update_time": update_time,
                "resources": {"main": prompt(f"{rs_id} v{version}")}}
    return logged(kind(resources=ResourcesSnapshot.of(snapshot)))


def updated(rs_id: str, update_time: float, version: int) -> LoggedEvent:
    return published(rs_id, update_time, version, ResourcesUpdated)


def test_published_resources_are_stored_counted_and_latest() -> None:
    view = fold([published("rs-a", 2.0)])
    assert view[keys.resources("rs-a")]["resources"] == {"main": prompt("rs-a v1")}
    assert view[keys.LATEST_RESOURCES] == "rs-a"
    assert view[keys.count("resources")] == 1


def test_the_latest_is_the_newest_by_update_time_not_the_last_folded() -> None:
    view = fold([published("rs-a", 2.0), published("rs-b", 1.0)])  # e.g. two stores with skewed clocks
    assert view[keys.LATEST_RESOURCES] == "rs-a"
    assert view[keys.count("resources")] == 2


def test_equal_update_times_go_to_the_later_event() -> None:
    assert fold([published("rs-a", 2.0), published("rs-b", 2.0)])[keys.LATEST_RESOURCES] == "rs-b"


def test_an_update_replaces_the_snapshot_and_can_make_it_latest() -> None:
    view = fold([published("rs-a", 1.0), published("rs-b", 2.0), updated("rs-a", 3.0, version=2)])
    assert view[keys.resources("rs-a")]["version"] == 2
    assert view[keys.LATEST_RESOURCES] == "rs-a"
    assert view[keys.count("resources")] == 2  # an update is not new resources


def test_an_update_of_the_latest_keeps_it_latest() -> None:
    view = fold([published("rs-a", 1.0), published("rs-b", 5.0), updated("rs-b", 4.0, version=2)])
    assert view[keys.LATEST_RESOURCES] == "rs-b"
    assert view[keys.resources("rs-b")]["update_time"] == 4.0
