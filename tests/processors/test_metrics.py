"""A processor worker's /metrics figures, read from real partition views (RocksDB) and the worker's counters."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agl_events.processors.metrics import WorkerCollector, WorkerFigures
from agl_events.processors.partition_views import PartitionViews
from tests.reducers.workload import random_run


async def test_lag_size_and_counters_of_the_assigned_partitions(tmp_path: Path) -> None:
    run = await random_run(3)
    rollouts = [e for e in run.events if e.topic == "rollouts"]
    position = (rollouts[0].topic, rollouts[0].partition)
    views = PartitionViews(tmp_path)
    views.assign([position])
    view = views.view(*position)
    assert view is not None
    mine = [e for e in rollouts if e.partition == position[1]]
    view.apply_logged(mine)
    registry = CollectorRegistry()
    registry.register(WorkerCollector(
        WorkerFigures("samples", "exp", views, applied=lambda: len(mine), dead_letters=lambda: 1, samples=lambda: 4),
        highwater=lambda topic, partition: mine[-1].offset + 1 + 5))  # 5 records appended since

    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(generate_latest(registry).decode())
               for s in family.samples}
    labels = (("app", "samples"), ("experiment", "exp"))
    assert samples[("agl_processor_events_applied_total", labels)] == len(mine)
    assert samples[("agl_processor_dead_letters_total", labels)] == 1
    lag = (*labels, ("partition", str(position[1])), ("topic", position[0]))
    assert samples[("agl_processor_consumer_lag", lag)] == 5
    assert samples[("agl_processor_view_bytes", labels)] > 0
    assert samples[("agl_samples_produced_total", (("experiment", "exp"),))] == 4
    views.close()
