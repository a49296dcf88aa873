"""Event ids: unique across threads and processes, with no randomness drawn per id (a runner makes one per span)."""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from agl_events.log.records import new_event_id


def test_event_ids_draw_no_randomness_per_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """uuid4 read os.urandom for every id, a syscall per span on the runner's hot path."""
    drawn: list[int] = []
    real = os.urandom

    def counting(size: int) -> bytes:
        drawn.append(size)
        return real(size)

    monkeypatch.setattr(os, "urandom", counting)
    ids = [new_event_id() for _ in range(1_000)]
    assert drawn == []
    assert len(set(ids)) == 1_000
    assert all(re.fullmatch(r"[0-9a-f]{32}", event_id) for event_id in ids)


def test_event_ids_are_unique_across_threads_and_a_forked_child() -> None:
    with ThreadPoolExecutor(8) as pool:
        batches = list(pool.map(lambda _: [new_event_id() for _ in range(2_000)], range(8)))
    ids = [event_id for batch in batches for event_id in batch]
    assert len(set(ids)) == len(ids)

    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child writes the ids it makes (the parent's counter state, a new prefix) and exits
        os.write(write, " ".join(new_event_id() for _ in range(100)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        from_child = pipe.read().split()
    os.waitpid(child, 0)
    from_parent = [new_event_id() for _ in range(100)]
    assert len(from_child) == 100
    assert not set(from_child) & set(from_parent)
    assert {event_id[:16] for event_id in from_child} != {event_id[:16] for event_id in from_parent}
