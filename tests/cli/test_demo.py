"""`agl-events demo`: both jobs end to end on the broker, as `make demo` runs them (shortened: one GRPO step, which
publishes a version that the final held-out evaluation runs on; 10 baseline rollouts). Learning itself is
tests/demo/test_tools_learns.py's (synchronous) and tests/algorithm/test_grpo_pipelined.py's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from agl_events.config import Settings

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("job", [["--algorithm", "grpo", "--steps", "1", "--runners", "2"],
                                 ["--algorithm", "baseline", "--rollouts", "10", "--runners", "2"]])
def test_the_demo_trains_then_rebuilds_an_identical_view(job: list[str], settings: Settings, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers,
                           "--experiment", settings.experiment, "--home", str(tmp_path), "demo", *job],
                          capture_output=True, text=True, timeout=600)
    print(done.stdout[-3000:], done.stderr[-3000:])
    assert done.returncode == 0
    assert "identical to the live view" in done.stdout
    if job[1] == "grpo":
        assert "held-out mean reward" in done.stdout and "weights versions published" in done.stdout
        last = done.stdout.strip().splitlines()[-1]
        assert re.fullmatch(r"demo: success \d\.\d\d -> \d\.\d\d in \d+s \(\d+ rollouts, \d+ spans, 2 model versions\)",
                            last), last
        curves = list((tmp_path / "demo").glob(f"{settings.experiment}-grpo-*/curve.png"))
        assert len(curves) == 1 and curves[0].read_bytes()[:4] == b"\x89PNG"
        assert len((curves[0].parent / "curve.csv").read_text().splitlines()) == 1 + 2  # header, steps 0-1
