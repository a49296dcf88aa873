"""The history memory benchmark end to end on the real broker, at a size tests can afford.

It starts a real store server and a real processor worker as subprocesses (`python -m agl_events ...`),
so this also checks those entry points fold a history they did not see being written.
"""

from __future__ import annotations

import pytest

from agl_events.bench.history import measure
from agl_events.config import Settings

pytestmark = pytest.mark.kafka


def test_store_and_processor_rebuild_a_history_and_report_their_memory(settings: Settings) -> None:
    figures = measure(settings, spans=1_500, per_rollout=100)
    # measure() raises unless the store answered after catching up and the processor's span views reached
    # every offset; what is left to check is that both were seen and measured.
    assert figures["history_spans"] == 1_500
    assert figures["store_rss_mb_after_rebuild"] > 20 and figures["processor_rss_mb_after_rebuild"] > 20
    assert figures["rebuild_spans_per_s"] > 0 and figures["processor_spans_per_s"] > 0
