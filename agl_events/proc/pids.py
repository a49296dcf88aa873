"""Processes by pid: whether one lives, what command it runs, signalling it and waiting for it to exit.

A pid in a pid file may belong to a process that exited long ago (and a new process may have its number), so
liveness checks treat zombies as dead and callers compare command lines before they trust a pid.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

#: Detached children this Python process started (`track`), so that it can reap them once they exit
#: (otherwise they linger as zombies that still look alive to `kill -0`).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def track(process: subprocess.Popen[bytes]) -> None:
    """Reap `process` in `process_alive` once it exited: for children started detached and then known by pid."""
    _CHILDREN[process.pid] = process


def process_alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie (an exited process nobody has reaped yet)."""
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        del _CHILDREN[pid]
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, but belongs to someone else
        return True
    if not _is_zombie(pid):
        return True
    if child is not None:  # it died after the poll above: reap it now
        child.poll()
        _CHILDREN.pop(pid, None)
    return False


def _is_zombie(pid: int) -> bool:
    """All threads of `pid` have exited (Linux /proc); False where that cannot be read."""
    try:
        stats = [(task / "stat").read_text() for task in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return False
    # The state follows the parenthesised command name, which may itself contain ")".
    return all(stat.rsplit(")", 1)[-1].split()[0] == "Z" for stat in stats)


def command_line(pid: int) -> str | None:
    """The command line of `pid` from /proc (Linux) or `ps` (macOS); None when unavailable."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    ps = shutil.which("ps")
    if ps is None:
        return None
    command = [ps, "-o", "command=", "-p", str(pid)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    return result.stdout if result.returncode == 0 else None


def send_signal(pid: int, signum: signal.Signals) -> None:
    """`signum` to `pid`; a process that is gone already is no error."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def wait_for_exit(pid: int, timeout: float) -> bool:
    """Whether `pid` exited within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while process_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True
