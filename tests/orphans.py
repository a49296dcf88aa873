"""Children whose parent was SIGKILLed: start a parent that starts one, kill the parent, see the child go."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def orphan(parent_script: str, stdin: str) -> tuple[int, subprocess.Popen[str]]:
    """Run `parent_script` (Python, fed `stdin`), which starts a child and prints the child's pid, then SIGKILL
    the parent (no stop, no atexit): the child's pid, and the dead parent, whose stderr the child inherited
    (read it to its end once the child exited)."""
    parent = subprocess.Popen([sys.executable, "-c", parent_script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert parent.stdin is not None and parent.stdout is not None
        parent.stdin.write(stdin)
        parent.stdin.close()
        child = int(parent.stdout.readline())
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    return child, parent


def exited(pid: int) -> bool:
    """Whether `pid` ended (gone, or a zombie no one has reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"
