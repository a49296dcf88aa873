"""Crash points: a process SIGKILLs itself at a named point, when a test asks for it through the environment.

Exactly-once claims are about what survives a crash at the worst moment; a test can only hit that moment
reliably if the process dies there itself. `crash_point("weights-written", 3)` does nothing unless
`AGL_CRASH_AT` is `weights-written:3` (a test sets it for the one process it then restarts): no handler
runs, nothing is flushed, as with the OOM killer or a lost machine.
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "AGL_CRASH_AT"


def crash_point(name: str, step: int) -> None:
    """SIGKILL this process if `AGL_CRASH_AT` names this point (`name:step`)."""
    if os.environ.get(CRASH_ENV) == f"{name}:{step}":
        os.kill(os.getpid(), signal.SIGKILL)
