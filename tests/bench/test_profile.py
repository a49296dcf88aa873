"""The bench's profiles: py-spy attached to a live process writes raw stacks; top frames are summed from them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from agl_events.bench.compare import profile_figures
from agl_events.bench.profile import OTHER, STORE_PARTS, Profiler, cpu_parts, top_frames

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
    """The busy process says when its interpreter runs before py-spy attaches. Once, on a loaded machine, py-spy
    attached right after the spawn wrote nothing and left the stop unanswered for 30 s; py-spy retries finding the
    Python of a process still starting up, the likeliest cause (not reproduced on an idle one)."""
    busy = subprocess.Popen([sys.executable, "-c", "print('up', flush=True)\nwhile True: sum(range(1000))"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout is not None and busy.stdout.readline() == "up\n"
        profiler = Profiler(tmp_path, {"busy": busy.pid}, rate=200)
        profiler.start()
        time.sleep(1.0)
        written = profiler.stop()
    finally:
        busy.kill()
        busy.wait()
    assert set(written) == {"busy"}
    assert any("<module>" in f.frame for f in top_frames(written["busy"]))


FULL = """\
process 1;thread 1;serve (/venv/agl_events/server/routes.py);loads (/usr/lib/python3.11/json/decoder.py) 4
process 1;thread 1;follow (/venv/agl_events/store/follower.py);decode (/venv/agl_events/events/codec.py) 3
process 1;thread 1;follow (/venv/agl_events/store/follower.py);fold (/venv/agl_events/views/store_view.py) 2
process 1;thread 1;_run_once (/usr/lib/python3.11/asyncio/base_events.py);select (/usr/lib/python3.11/selectors.py) 1
process 1;thread 1;<module> (/tmp/start.py) 1
"""


def test_cpu_parts_give_each_sample_to_its_deepest_part(tmp_path: Path) -> None:
    """A library frame (json) counts for the part that called it; a codec call is the codec's wherever it ran."""
    path = tmp_path / "store.txt"
    path.write_text(FULL)
    parts = cpu_parts([path, path], STORE_PARTS, rate=10)
    assert parts == {"HTTP (server, routes, JSON)": 0.8, "codec (encode, decode)": 0.6,
                     "follower (poll, fold, RocksDB)": 0.4, "event loop": 0.2, OTHER: 0.2}
    assert list(parts) == sorted(parts, key=lambda part: -parts[part])


def test_profile_figures_split_the_metered_cpu_by_the_parts_shares(tmp_path: Path) -> None:
    path = tmp_path / "store.txt"
    path.write_text(FULL)
    rounds = [{"rollouts": 100, "cpu_seconds": {"store": 0.2}, "profile_files": {"store": [path], "runners": []}},
              {"rollouts": 100, "cpu_seconds": {"store": 0.2}, "profile_files": {"store": [], "runners": []}}]
    figures = profile_figures(rounds)
    parts = figures["profile_store_parts_ms"]
    # The profiled round metered 2 ms per rollout; HTTP had 4 of its 11 samples, the codec 3.
    assert parts["HTTP (server, routes, JSON)"] == round(2 * 4 / 11, 3)
    assert parts["codec (encode, decode)"] == round(2 * 3 / 11, 3)
    assert sum(parts.values()) == pytest.approx(2.0, abs=0.005)
    assert "profile_runners_parts_ms" not in figures
