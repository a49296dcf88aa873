"""deploy/grafana/agl-events.json uses exactly the metric names our processes export.

Every PromQL expression's `agl_*` names must be series some registry of ours exposes (a counter's `_total`, a
histogram's `_bucket`/`_sum`/`_count`...), and every `agl_*` family we define must be in the dashboard. The
names come from the real registries: the store server's (with a trainer), the LLM proxy's, and a processor
worker's collector, each built as its process builds it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from agl_events.algorithm.metrics import TrainerMetrics
from agl_events.config import Settings
from agl_events.llm.app import create_proxy_app
from agl_events.llm.model_list import ModelConfig
from agl_events.llm.routing import ModelRouter
from agl_events.processors.metrics import WorkerCollector, WorkerFigures
from agl_events.processors.partition_views import PartitionViews
from agl_events.server.app import create_app
from agl_events.store.contract import LightningStore

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "agl-events.json"
#: The series names a family of each type exposes (what PromQL can name).
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count"),
            "summary": ("_sum", "_count")}
METRIC_NAME = re.compile(r"\bagl_[a-zA-Z0-9_:]*")


def families(registry: CollectorRegistry) -> dict[str, set[str]]:
    """Our families (`agl_*`) in `registry`, each with the series names it exposes."""
    return {f.name: {f.name + suffix for suffix in SUFFIXES[f.type]}
            for f in registry.collect() if f.name.startswith("agl_")}


def exported(tmp_path: Path) -> dict[str, set[str]]:
    async def no_store(name: str) -> LightningStore:
        raise AssertionError("no store is opened")

    store = create_app(no_store, trainer=TrainerMetrics("e")).state.metrics.registry
    router = ModelRouter([ModelConfig.model_validate({"model_name": "m", "litellm_params": {
        "model": "hosted_vllm/m", "api_base": "http://x"}})])
    proxy = create_proxy_app(router, "http://store", Settings.from_env()).state.metrics.registry
    worker = CollectorRegistry()
    worker.register(WorkerCollector(WorkerFigures("samples", "e", PartitionViews(tmp_path), lambda: 0, lambda: 0,
                                                  samples=lambda: 0), lambda topic, partition: None))
    return {**families(store), **families(proxy), **families(worker)}


def expressions(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression: panel targets (rows included) and query variables."""
    found: list[str] = []
    for panel in dashboard["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            found.extend(target["expr"] for target in inner.get("targets", []))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            found.append(variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"])
    return found


def test_the_dashboard_names_exactly_the_metrics_we_export(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    ours = exported(tmp_path)
    series = {name for names in ours.values() for name in names}
    used: set[str] = set()
    for expr in expressions(dashboard):
        names = set(METRIC_NAME.findall(expr))
        assert names, f"an expression with none of our metrics: {expr}"
        assert names <= series, f"{sorted(names - series)} in {expr!r} are exported by none of our processes"
        used |= names
    unused = sorted(family for family, names in ours.items() if not names & used)
    assert not unused, f"metrics we export that the dashboard does not show: {unused}"


def test_the_dashboard_picks_its_data_source_and_experiment() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert all(p["datasource"]["uid"] == "${datasource}" for p in panels)
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
