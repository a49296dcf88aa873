"""The import graph of the package, read from the source: no circles, pure layers stay pure, lower layers never
import higher ones, Kafka's client is imported in one package only, the core never reaches into the benchmarks.

Edges are the modules an `import` names (a `from package import module` names the module), at any depth in
the file, lazy imports inside functions included: an import hidden in a function is still a dependency.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agl_events",)
#: Layers that must run without Kafka, HTTP or RocksDB (unit-testable on plain data).
PURE = ("agl_events.reducers", "agl_events.store.commands", "agl_events.topics", "agl_events.events.kinds",
        "agl_events.adapter", "agl_events.samples.model", "agl_events.samples.build", "agl_events.samples.buffer",
        "agl_events.samples.batching", "agl_events.samples.generations", "agl_events.samples.steps",
        "agl_events.deploy", "agl_events.supervise.plan", "agl_events.supervise.backoff", "agl_events.supervise.state",
        "agl_events.supervise.view")
IO_LIBRARIES = ("confluent_kafka", "rocksdict", "fastapi", "httpx", "uvicorn", "aiohttp", "faust")
#: Who may import the benchmarks: the benchmarks themselves and the command line that runs them.
BENCH_USERS = ("agl_events.bench", "agl_events.cli")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for top in PACKAGES for p in (ROOT / top).rglob("*.py")}


@functools.cache
def _imports(name: str) -> tuple[str, ...]:
    """Every module (ours or not) that module `name` imports, resolved to absolute names; read once per run
    (every test here walks the whole package, and parsing it is most of their time)."""
    return tuple(_read_imports(name))


def _read_imports(name: str) -> Iterator[str]:
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base


def _graph() -> dict[str, set[str]]:
    return {name: {dep for dep in _imports(name) if dep in MODULES and dep != name} for name in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph[node]):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_read_from_the_source() -> None:
    graph = _graph()
    assert "agl_events.log.source" in graph["agl_events.store.follower"]
    assert "agl_events.runner.results" in graph["agl_events.runner.worker"]
    assert "confluent_kafka" in set(_imports("agl_events.log.clients"))
    assert "confluent_kafka.schema_registry" in set(_imports("agl_events.log.registry"))  # a lazy import counts


#: The one package that talks to Kafka's client library; everything else goes through its interfaces
#: (`log.sink.EventSink`, `log.source.LogSource`, `log.consumer.GroupConsumer`, ...). Tests may use it directly.
KAFKA_EDGE = "agl_events.log"


def test_only_the_log_package_imports_confluent_kafka() -> None:
    offenders = {name: sorted(dep for dep in _imports(name) if dep.split(".")[0] == "confluent_kafka")
                 for name in MODULES if not name.startswith(KAFKA_EDGE + ".")}
    assert {name: deps for name, deps in offenders.items() if deps} == {}


#: The layers of the core, lowest first: a module may import its own layer and the ones below, never one above.
#: A module is in the layer of the longest prefix that names it; modules in no layer (server, runner, tracer,
#: replay, processors, the CLI, ...) sit above all of them.
LAYERS: tuple[tuple[str, ...], ...] = (
    # plain data and settings; process tools
    ("agl_events.topics", "agl_events.types", "agl_events.semconv", "agl_events.config", "agl_events.proc"),
    # pure: events and their schemas, reducers, span emitters and adapters, samples' data
    ("agl_events.events", "agl_events.reducers", "agl_events.emitter", "agl_events.adapter", "agl_events.deploy",
     "agl_events.samples.model", "agl_events.samples.generations", "agl_events.samples.batching",
     "agl_events.samples.build"),
    # the Kafka edge: writers, readers, consumers, admin, codec framing, DLQ
    (KAFKA_EDGE,),
    # the local broker and whether a cluster answers
    ("agl_events.broker",),
    # views: state folded from the log, with its positions
    ("agl_events.views",),
    # the store: commands, committer, follower, group
    ("agl_events.store",),
)


def _layer(name: str) -> int | None:
    found = [(len(prefix), index) for index, layer in enumerate(LAYERS) for prefix in layer
             if name == prefix or name.startswith(prefix + ".")]
    return max(found)[1] if found else None


def _upward_imports(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Per module of a layer, the modules it imports from a higher layer (or from no layer: above them all)."""
    found: dict[str, list[str]] = {}
    for name, deps in graph.items():
        own = _layer(name)
        if own is None:
            continue
        up = sorted(dep for dep in deps if (layer := _layer(dep)) is None or layer > own)
        if up:
            found[name] = up
    return found


def test_lower_layers_never_import_higher_ones() -> None:
    assert _upward_imports(_graph()) == {}


def test_the_layer_check_finds_an_upward_import() -> None:
    graph = {"agl_events.log.writer": {"agl_events.store.committer", "agl_events.events.codec"},
             "agl_events.store.committer": {"agl_events.log.writer"}, "agl_events.server.app": {"agl_events.store"}}
    assert _upward_imports(graph) == {"agl_events.log.writer": ["agl_events.store.committer"]}


def test_no_import_circles() -> None:
    assert _cycles(_graph()) == []


def test_nothing_imports_a_top_level_processors_package() -> None:
    """The faust workers live in `agl_events.processors`: a top-level `processors` package would be installed into
    site-packages beside ours and could import `agl_events` back (the circle it once was)."""
    offenders = {name: sorted(dep for dep in _imports(name) if dep.split(".")[0] == "processors") for name in MODULES}
    assert {name: deps for name, deps in offenders.items() if deps} == {}
    assert not list((ROOT / "processors").glob("**/*.py"))


def test_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_core_module_imports_the_benchmarks() -> None:
    offenders = {name: sorted(dep for dep in deps if dep.startswith("agl_events.bench"))
                 for name, deps in _graph().items() if not name.startswith(BENCH_USERS)}
    assert {name: deps for name, deps in offenders.items() if deps} == {}


@pytest.mark.parametrize("layer", PURE)
def test_pure_layers_import_no_kafka_http_or_rocksdb(layer: str) -> None:
    """Transitively: a pure module importing an agl_events module that imports Kafka is not pure either."""
    graph = _graph()
    seen: set[str] = set()
    todo = [name for name in MODULES if name == layer or name.startswith(layer + ".")]
    assert todo, f"no module in layer {layer}"
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(graph[name])
    io = {name: sorted(dep for dep in _imports(name) if dep.split(".")[0] in IO_LIBRARIES) for name in seen}
    assert {name: deps for name, deps in io.items() if deps} == {}


#: Who may import torch and verl (the `training` extra): the policy, GRPO, the verl modules (batch layout,
#: rollouts, manager, trainer), the GRPO demo and its benches (recipe, async), and nothing the core imports.
TORCH_USERS = ("agl_events.policy", "agl_events.algorithm.grpo", "agl_events.algorithm.verl",
               "agl_events.demo.learn", "agl_events.bench.grpo_recipe", "agl_events.bench.async_grpo")
TORCH_LIBRARIES = ("torch", "transformers", "tokenizers", "verl", "ray", "omegaconf", "hydra")


def test_only_the_training_modules_import_torch() -> None:
    """Directly or through a training module: `import agl_events`, the CLI and the runners stay torch-free."""
    offenders = {name: sorted(dep for dep in _imports(name) if dep.split(".")[0] in TORCH_LIBRARIES
                              or dep.startswith(TORCH_USERS))
                 for name in MODULES if not name.startswith(TORCH_USERS)}
    assert {name: deps for name, deps in offenders.items() if deps} == {}
