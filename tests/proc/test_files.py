"""Open files against the limit, read from /proc for any process."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

from agl_events.proc.files import OpenFiles, open_files

#: Opens 50 files, says so, and holds them until its stdin closes.
HOLDER = ("import sys\nfiles = [open(sys.executable, 'rb') for _ in range(50)]\n"
          "print('open', flush=True)\nsys.stdin.read()")


def test_open_files_of_a_process_count_its_descriptors_against_its_soft_limit() -> None:
    child = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "open\n"
        hard = resource.prlimit(child.pid, resource.RLIMIT_NOFILE)[1]
        resource.prlimit(child.pid, resource.RLIMIT_NOFILE, (200, hard))
        files = open_files(child.pid)
        assert files is not None and files.limit == 200
        assert files.used == len(os.listdir(f"/proc/{child.pid}/fd")) >= 50
    finally:
        child.kill()
        child.wait()
    assert open_files(child.pid) is None  # gone


def test_near_limit_from_four_fifths() -> None:
    assert OpenFiles(80, 100).near_limit
    assert not OpenFiles(79, 100).near_limit
