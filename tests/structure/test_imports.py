"""The import graph of the package, read from the source: no circles, pure layers stay pure, the core never
reaches into the benchmarks.

Edges are the modules an `import` names (a `from package import module` names the module), at any depth in
the file, lazy imports inside functions included: an import hidden in a function is still a dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agl_events",)
#: Layers that must run without Kafka, HTTP or RocksDB (unit-testable on plain data).
PURE = ("agl_events.reducers", "agl_events.store.commands", "agl_events.topics", "agl_events.events.kinds",
        "agl_events.adapter", "agl_events.samples.model", "agl_events.samples.build", "agl_events.samples.buffer",
        "agl_events.samples.batching", "agl_events.samples.generations", "agl_events.deploy",
        "agl_events.supervise.plan", "agl_events.supervise.backoff", "agl_events.supervise.state",
        "agl_events.supervise.view")
IO_LIBRARIES = ("confluent_kafka", "rocksdict", "fastapi", "httpx", "uvicorn", "aiohttp", "faust")
#: Who may import the benchmarks: the benchmarks themselves and the command line that runs them.
BENCH_USERS = ("agl_events.bench", "agl_events.cli")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for top in PACKAGES for p in (ROOT / top).rglob("*.py")}


def _imports(name: str) -> Iterator[str]:
    """Every module (ours or not) that module `name` imports, resolved to absolute names."""
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
    assert "agl_events.store.follower" in graph["agl_events.store.service"]
    assert "agl_events.runner.results" in graph["agl_events.runner.worker"]


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
