"""The reducer registry and the Pending changes every reducer writes through."""

from __future__ import annotations

import pytest

from agl_events.events.kinds import UnknownEventKind
from agl_events.events.typed import TaskDispatched
from agl_events.reducers import keys, reduce
from agl_events.reducers.changes import Pending
from tests.reducers import logged


def test_an_unknown_kind_is_refused_loudly() -> None:
    with pytest.raises(UnknownEventKind, match="RolloutTeleported"):
        reduce({}.get, "RolloutTeleported", {"rollout_id": "ro-a"})


def test_kinds_outside_the_view_change_nothing() -> None:
    dispatched = logged(TaskDispatched(rollout_id="ro-a", input_json="{}", queue_seq=1))
    assert reduce({}.get, dispatched.kind, dispatched.record) == {}


def test_reads_see_the_changes_already_decided_deletions_included() -> None:
    pending = Pending({"k": 1, "gone": 2}.get)
    pending.put("k", 3)
    pending.delete("gone")
    assert (pending.get("k"), pending.get("gone"), pending.get("other")) == (3, None, None)
    assert pending.changes == {"k": 3, "gone": None}


def test_create_counts_a_key_only_when_it_is_new() -> None:
    pending = Pending({"old": 1, keys.count("things"): 5}.get)
    pending.create("old", 2, "things")
    assert pending.get(keys.count("things")) == 5
    pending.create("new", 1, "things")
    pending.create("new", 1, "things")  # the second sees the first through the pending changes
    assert pending.changes == {"old": 2, "new": 1, keys.count("things"): 6}


def test_chmax_writes_only_a_greater_value() -> None:
    pending = Pending({"c": 5}.get)
    pending.chmax("c", 3)
    assert pending.changes == {}
    pending.chmax("c", 8)
    pending.chmax("d", 1)
    assert pending.changes == {"c": 8, "d": 1}
