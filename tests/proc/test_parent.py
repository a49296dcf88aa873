"""`stop_when_orphaned`: a child signals itself once the pid it was started by is no longer its parent."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

from agl_events.proc.parent import stop_when_orphaned
from tests.eventually import eventually


def test_a_process_whose_parent_is_another_signals_itself() -> None:
    signalled = threading.Event()

    def handler(_signum: int, _frame: FrameType | None) -> None:
        signalled.set()

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        watcher = stop_when_orphaned(os.getppid() + 1_000_000, signal.SIGUSR1, every=0.01)  # not our parent
        eventually(signalled.is_set, "SIGUSR1 from the watcher")
        watcher.join(5)
        assert not watcher.is_alive()
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_process_whose_parent_lives_keeps_watching() -> None:
    watcher = stop_when_orphaned(os.getppid(), signal.SIGUSR1, every=0.01)
    watcher.join(0.2)  # twenty looks
    assert watcher.is_alive() and watcher.daemon
