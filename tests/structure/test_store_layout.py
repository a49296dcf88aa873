"""The store stays in small parts behind one typed contract, and the server depends on that contract alone.

Read from the source (and, for the contract, from the classes): no module of `agl_events/store/` grows past
about 300 lines, the facade stays a facade, nothing in the server probes a store with `getattr`/`hasattr`,
the contract covers upstream's LightningStore, and every path of the shared route table is served.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from agentlightning.store.base import LightningStore as UpstreamStore

from agl_events.server.routes import create_agl_router, fixed_store
from agl_events.store import route_table
from agl_events.store.contract import LightningStore
from agl_events.store.kafka import KafkaLightningStore
from agl_events.store.memory import InMemoryLightningStore
from agl_events.store.readonly import ReadOnlyStore
from agl_events.store.service import EventSourcedStore

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "agl_events" / "store"
SERVER = ROOT / "agl_events" / "server"
#: "About 300 lines": the contract, one docstring per method, is the largest.
MAX_STORE_MODULE_LINES = 330
MAX_FACADE_LINES = 270
#: Upstream methods our stores leave out: OTLP goes to the server's /v1/traces route (capability otlp_traces off).
NOT_IN_CONTRACT = {"add_otel_span", "otlp_traces_endpoint"}


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_store_module_is_over_about_300_lines() -> None:
    sizes = {str(p.relative_to(ROOT)): _lines(p) for p in STORE.rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > MAX_STORE_MODULE_LINES} == {}
    assert sizes["agl_events/store/service.py"] <= MAX_FACADE_LINES


def _probes(path: Path) -> list[str]:
    """`getattr(x, ...)` / `hasattr(x, ...)` calls in `path` whose object mentions a store or its view."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            target = ast.unparse(node.args[0]) if node.args else ""
            if "store" in target.lower() or "view" in target.lower():
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_server_never_probes_a_store() -> None:
    assert [probe for path in sorted(SERVER.glob("*.py")) for probe in _probes(path)] == []
    assert "501" not in (SERVER / "routes.py").read_text()  # every store has every route's method


def test_the_contract_covers_upstream_and_every_store_implements_it() -> None:
    upstream = {name for name, _ in inspect.getmembers(UpstreamStore) if not name.startswith("_")}
    ours = {name for name, _ in inspect.getmembers(LightningStore) if not name.startswith("_")}
    assert upstream - ours == NOT_IN_CONTRACT
    for store in (EventSourcedStore, InMemoryLightningStore, KafkaLightningStore, ReadOnlyStore):
        assert issubclass(store, LightningStore) and not inspect.isabstract(store), store
    for name in ours:  # documented behaviour for every method the server may call
        assert inspect.getdoc(getattr(LightningStore, name)), name


def test_backends_replace_no_part_of_the_store() -> None:
    """Backends are built from parts: they define no method the facade has (public or private)."""
    facade = set(vars(EventSourcedStore))
    for backend in (InMemoryLightningStore, KafkaLightningStore, ReadOnlyStore):
        overridden = {name for name in vars(backend) if name in facade and not name.startswith("__")
                      and name != "_abc_impl"}
        assert overridden == set(), backend


def test_every_shared_route_is_served_as_declared() -> None:
    served = {(method, route.path) for route in create_agl_router(fixed_store(None)).routes  # type: ignore[arg-type]
              for method in route.methods}  # type: ignore[attr-defined]
    declared = {(r.method, "/v1/agl" + r.path) for r in vars(route_table).values() if isinstance(r, route_table.Route)}
    assert declared - served == set()


def test_route_urls_quote_each_parameter_as_one_segment() -> None:
    assert route_table.UPDATE_ATTEMPT.url(rollout_id="ro-1", attempt_id="at-2") == "/rollouts/ro-1/attempts/at-2"
    assert route_table.TASK_REQUEST.url(key="a/b c") == "/task-requests/a%2Fb%20c"
