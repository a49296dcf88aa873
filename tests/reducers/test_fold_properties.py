"""Properties of folding a real log: replay rebuilds the live view, and folding again changes nothing.

The store's recovery depends on these: after a crash the view may be ahead of its stored positions and
replays events it already holds, and a view rebuilt from offset 0 must answer what the live one did.
Each seed drives a different random workload through the real commands (see `workload`).
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict

import pytest

from agl_events.log.records import LoggedEvent
from agl_events.reducers import REDUCERS
from agl_events.topics import Topic
from tests.reducers import View, apply, changes_of, fold
from tests.reducers.workload import Run, random_run

SEEDS = range(6)
#: Topics whose events are ordered per key only (several partitions, keyed by rollout id); the others have
#: one partition, so one order for all their events.
KEYED = {Topic.ROLLOUTS.value, Topic.ATTEMPTS.value, Topic.SPANS.value}


@pytest.fixture(params=SEEDS, ids=lambda seed: f"seed{seed}")
async def run(request: pytest.FixtureRequest) -> Run:
    return await random_run(request.param)


def test_the_workload_exercises_every_reducer(run: Run) -> None:
    assert set(REDUCERS) <= {e.kind for e in run.events}


def test_folding_the_log_into_an_empty_view_rebuilds_the_live_one(run: Run) -> None:
    """The live view folded events in commit order across topics; replay goes topic by topic."""
    assert fold(run.events) == run.view


def test_folding_every_event_twice_in_a_row_is_folding_it_once(run: Run) -> None:
    view: View = {}
    for e in run.events:
        apply(view, changes_of(view, e))
        apply(view, changes_of(view, e))
    assert view == run.view


def test_refolding_the_whole_log_changes_nothing(run: Run) -> None:
    assert fold(run.events, fold(run.events)) == run.view


def test_refolding_any_suffix_changes_nothing(run: Run) -> None:
    """A view that crashed ahead of its positions replays from wherever they were."""
    rng = random.Random(len(run.events))
    for start in rng.sample(range(len(run.events)), 12):
        assert fold(run.events[start:], copy.deepcopy(run.view)) == run.view, f"refolding from event {start}"


def _interleaved(events: list[LoggedEvent], rng: random.Random) -> list[LoggedEvent]:
    """A random merge that keeps the only order the log promises: per key on keyed topics, else per topic."""
    streams: dict[tuple[str, str | None], list[LoggedEvent]] = defaultdict(list)
    for e in events:
        streams[(e.topic, e.key if e.topic in KEYED else None)].append(e)
    heads = [list(reversed(stream)) for stream in streams.values()]
    merged = []
    while heads:
        stream = rng.choice(heads)
        merged.append(stream.pop())
        if not stream:
            heads.remove(stream)
    return merged


def test_any_interleaving_of_partitions_folds_to_the_same_view(run: Run) -> None:
    """A reader sees partitions in no particular relative order; the view must not depend on it."""
    rng = random.Random(len(run.events))
    for _ in range(5):
        merged = _interleaved(run.events, rng)
        assert merged != run.events
        assert fold(merged) == run.view
