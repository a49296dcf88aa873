"""The bench's profiles: py-spy attached to a live process writes raw stacks; top frames are summed from them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from agl_events.bench.profile import Profiler, top_frames

RAW = """\
process 1:"python";thread (0x1);main (bench.py);decode (agl_events/events/codec.py) 6
process 1:"python";thread (0x1);main (bench.py);fold (agl_events/reducers/spans.py) 3
process 1:"python";thread (0x2);poll (/venv/lib/confluent_kafka/consumer.py) 1
"""


def test_top_frames_sum_self_and_total_shares(tmp_path: Path) -> None:
    path = tmp_path / "store.txt"
    path.write_text(RAW)
    frames = top_frames(path)
    assert [f.frame for f in frames] == ["decode (events/codec.py)", "fold (reducers/spans.py)",
                                         "poll (confluent_kafka/consumer.py)"]
    assert [f.self_share for f in frames] == [0.6, 0.3, 0.1]
    assert frames[0].total_share == 0.6
    assert top_frames(path, limit=1)[0].frame == "decode (events/codec.py)"


def test_profiler_samples_a_running_process(tmp_path: Path) -> None:
    busy = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: sum(range(1000))"])
    try:
        profiler = Profiler(tmp_path, {"busy": busy.pid}, rate=200)
        profiler.start()
        time.sleep(1.0)
        written = profiler.stop()
    finally:
        busy.kill()
        busy.wait()
    assert set(written) == {"busy"}
    assert any("<module>" in f.frame for f in top_frames(written["busy"]))
