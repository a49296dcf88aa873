"""`GET /metrics` on a processor worker's web port (the one `/views/stats` is on): its figures for Prometheus.

Per worker (labels `experiment` and `app`: `views` for `agl-events processor`, `samples` for `agl-events samples`):
events applied, records dead-lettered, consumer lag per assigned partition (faust's cached high watermark minus
the partition state's own next offset, which is where the worker really is; see `agl_events.processors.app`), the bytes
its partition folders take on disk, and for the samples worker the samples it produced. All read at scrape
time from counters the worker keeps anyway: nothing is added to the fold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import faust
from faust.types import TP
from faust.web import Request, Response, View
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Metric, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from agl_events.processors.partition_views import PartitionStates
from agl_events.views.disk import folder_bytes


@dataclass
class WorkerFigures:
    """Where a worker's figures come from: its partition states and its counters (read when scraped)."""

    app: str
    experiment: str
    states: PartitionStates[Any]
    applied: Callable[[], int]
    dead_letters: Callable[[], int]
    samples: Callable[[], int] | None = None


class WorkerCollector:
    """The Prometheus families of one worker; `highwater(topic, partition)` is the log end faust last saw."""

    def __init__(self, figures: WorkerFigures, highwater: Callable[[str, int], int | None]) -> None:
        self._figures = figures
        self._highwater = highwater

    def collect(self) -> Iterator[Metric]:
        f = self._figures
        labels = [f.experiment, f.app]
        applied = CounterMetricFamily("agl_processor_events_applied", "Events the worker folded into its "
                                      "partition state since it started.", labels=["experiment", "app"])
        applied.add_metric(labels, f.applied())
        dead = CounterMetricFamily("agl_processor_dead_letters", "Records the worker copied to the dead-letter "
                                   "topic since it started.", labels=["experiment", "app"])
        dead.add_metric(labels, f.dead_letters())
        size = GaugeMetricFamily("agl_processor_view_bytes", "Bytes of the worker's partition folders on disk.",
                                 labels=["experiment", "app"])
        size.add_metric(labels, folder_bytes(f.states.data_dir))
        lag = GaugeMetricFamily("agl_processor_consumer_lag", "Records in an assigned partition the worker has "
                                "not folded yet (log end minus the state's next offset).",
                                labels=["experiment", "app", "topic", "partition"])
        for topic, partition in sorted(f.states.assigned):
            end, at = self._highwater(topic, partition), f.states.next_offset(topic, partition)
            if end is not None and at is not None:
                lag.add_metric([*labels, topic, str(partition)], max(end - at, 0))
        yield from (applied, dead, size, lag)
        if f.samples is not None:
            samples = CounterMetricFamily("agl_samples_produced", "Training samples the samples worker wrote to "
                                          "the samples topic since it started.", labels=["experiment"])
            samples.add_metric([f.experiment], f.samples())
            yield samples


def add_metrics_page(app: faust.App, figures: WorkerFigures) -> CollectorRegistry:
    """Serve `figures` at `GET /metrics` of `app`'s web server; returns the registry (tests read it)."""
    registry = CollectorRegistry()

    def highwater(topic: str, partition: int) -> int | None:
        try:
            end = app.consumer.highwater(TP(topic, partition))
        except Exception:  # the consumer has not fetched (or started) yet: no figure rather than a failed scrape
            return None
        return end if isinstance(end, int) and end >= 0 else None

    registry.register(WorkerCollector(figures, highwater))

    @app.page("/metrics")
    async def metrics(web: View, request: Request) -> Response:
        """The Prometheus text format."""
        return web.bytes(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)

    return registry


__all__ = ["WorkerCollector", "WorkerFigures", "add_metrics_page"]
