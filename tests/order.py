"""The order tests run in: the longest files first, so that two pytest workers finish together.

`make test` hands whole files to two workers (pytest-xdist, `--dist loadfile --no-loadscope-reorder`: without
the flag xdist puts the files with the most tests first), in collection order: one file each, then a second
each at once (xdist tops a worker up while it has two tests or fewer pending, so a worker on a one-test file
already holds the next), then to whichever is free. A file of several minutes collected last runs alone at the
end while the other worker idles; started first, it overlaps everything else. One worker begins with the first
and third files, the other with the second and fourth: longest first, but for the third and fourth, swapped so
that the two pairs take about as long.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

#: The files that take longest on the 2-core machine (about 1 to 5 minutes each), longest first but for the third
#: and fourth (2026-12-06, fresh clones and one by one: tools 240-390 s, cluster about 220 s since its cut,
#: exactly-once 150-170 s, pipelined 150-240 s, secured broker 80-160 s, chaos about 100 s).
HEAVIEST = (
    "demo/test_tools_learns.py",
    "cluster/test_cluster.py",
    "algorithm/test_grpo_exactly_once.py",
    "algorithm/test_grpo_pipelined.py",
    "secure/test_secure.py",
    "chaos/test_chaos_run.py",
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
