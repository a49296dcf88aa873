"""A child that ends with its parent: the runners a Trainer or `agl-events runner` spawned stop when it is gone.

A parent that exits normally stops its children itself. One that is SIGKILLed (the OOM killer, `kill -9`) cannot,
and its runners, being processes of their own, would go on polling the task queue for an experiment whose
trainer is gone, for as long as the machine runs. Linux's `PR_SET_PDEATHSIG` fires when the thread that spawned
the child ends, which for a pool started off the main thread is too early; so the child looks at its parent id
instead: once it is no longer the pid it was started by, the parent is gone and the child was re-parented.
"""

from __future__ import annotations

import os
import signal
import threading
import time

#: How often a child looks: a second is nothing next to how long an orphan would otherwise live.
CHECK_SECONDS = 1.0


def stop_when_orphaned(parent_pid: int, sig: int = signal.SIGTERM, every: float = CHECK_SECONDS) -> threading.Thread:
    """Send this process `sig` (its own handler decides what stopping means) once `parent_pid` is no longer its
    parent; at once if it is not its parent now. A daemon thread that looks every `every` seconds."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(every)
        os.kill(os.getpid(), sig)

    watcher = threading.Thread(target=watch, name="agl-parent-watch", daemon=True)
    watcher.start()
    return watcher
