"""The order tests run in: the longest files first, so that two pytest workers finish together.

`make test` hands whole files to two workers (pytest-xdist, `--dist loadfile --no-loadscope-reorder`: without
the flag xdist puts the files with the most tests first), round robin at first and then
to whichever is free, in collection order. A file of several minutes collected last runs alone at the end
while the other worker idles; started first, it overlaps everything else.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

#: The files that take longest on the 2-core machine (about 1 to 3 minutes each), longest first.
HEAVIEST = (
    "cluster/test_cluster.py",
    "algorithm/test_grpo_exactly_once.py",
    "algorithm/test_grpo_pipelined.py",
    "demo/test_tools_learns.py",
    "chaos/test_chaos_run.py",
    "secure/test_secure.py",
    "server/test_fuzz.py",
    "runner/test_runners.py",
    "supervise/test_up.py",
    "cli/test_produce.py",
    "cli/test_demo.py",
    "algorithm/test_apo.py",
    "replay/test_export.py",
    "deploy/test_manifests.py",
)


def heaviest_first(items: list[pytest.Item]) -> None:
    """Move the tests of HEAVIEST's files to the front, in its order; everything else keeps its order."""
    rank = {TESTS / name: place for place, name in enumerate(HEAVIEST)}
    items.sort(key=lambda item: rank.get(item.path, len(HEAVIEST)))
