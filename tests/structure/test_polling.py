"""Tests wait through `tests/eventually.py` only: no hand-written polling loop (a sleep inside a loop, or a loop
until a clock passes a deadline) anywhere else in tests/."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.eventually import eventually, eventually_async

TESTS = Path(__file__).resolve().parents[1]
HELPER = TESTS / "eventually.py"

#: Loops that sleep but poll nothing, by "path::function" (relative to tests/), each with why it may.
NOT_POLLING: dict[str, str] = {
    "server/test_durability.py::_workload": "a workload run for a fixed time through kills; the sleep is its "
                                            "back-off after a failed step, nothing is awaited",
}

Loop = ast.While | ast.For | ast.AsyncFor
Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef


def _calls(node: ast.AST, names: set[str]) -> bool:
    """Whether `node` is a call of one of `names`, bare or as an attribute (`time.sleep`, `asyncio.sleep`)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else "") in names


SLEEPS = {"sleep"}
CLOCKS = {"monotonic", "time", "perf_counter"}  # `time.monotonic()`, `loop.time()`: a deadline in a loop's test


def _body(loop: Loop) -> Iterator[ast.AST]:
    """The nodes a loop runs each time round (its `else` and the functions it defines are not)."""
    stack: list[ast.AST] = list(loop.body)
    while stack:
        node = stack.pop()
        if not isinstance(node, Scope):
            yield node
            stack.extend(ast.iter_child_nodes(node))


def _polls(loop: Loop) -> bool:
    """A loop that sleeps each time round, or one that runs until a clock passes a deadline."""
    return any(_calls(node, SLEEPS) for node in _body(loop)) or (
        isinstance(loop, ast.While) and any(_calls(node, CLOCKS) for node in ast.walk(loop.test)))


def _polling_loops(tree: ast.AST, path: str) -> Iterator[tuple[str, int]]:
    """("path::function", line) of each polling loop, `function` the innermost one around it."""
    def visit(node: ast.AST, scope: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else scope
            if isinstance(child, Loop) and _polls(child):
                yield f"{path}::{scope}", child.lineno
            yield from visit(child, inner)
    yield from visit(tree, "<module>")


def polling_loops(root: Path = TESTS) -> list[str]:
    """Every sleeping loop under `root` outside the helper and the allow-lists, as "path::function:line"."""
    found = []
    for file in sorted(root.rglob("*.py")):
        if file == HELPER:
            continue
        path = file.relative_to(root).as_posix()
        for where, line in _polling_loops(ast.parse(file.read_text(), str(file)), path):
            if where not in NOT_POLLING:
                found.append(f"{where}:{line}")
    return found


def test_no_hand_written_polling_loop_in_tests() -> None:
    assert polling_loops() == [], "wait with tests/eventually.py instead (or allow-list a loop that polls nothing)"


def test_the_allow_list_names_loops_that_exist() -> None:
    """An allow-list entry whose loop is gone (converted, renamed) goes too, so the list only shrinks."""
    every = set()
    for file in TESTS.rglob("*.py"):
        path = file.relative_to(TESTS).as_posix()
        every.update(where for where, _ in _polling_loops(ast.parse(file.read_text()), path))
    assert sorted(set(NOT_POLLING) - every) == []


def test_the_check_finds_each_kind_of_sleeping_loop(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text('''
import asyncio, time
from time import sleep

def a():
    while not done():
        time.sleep(0.1)

async def b():
    for _ in range(10):
        if done():
            break
        await asyncio.sleep(0.1)

def c():
    while True:
        try:
            return probe()
        except OSError:
            sleep(0.1)

def d():
    end = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < end:
        got.extend(reader.poll(0.2))

def fine():
    time.sleep(0.1)
    for item in items:
        def later():
            time.sleep(1)
    while (cpu() or 0.0) < spent + 0.05:
        burn()
''')
    assert polling_loops(tmp_path) == ["test_x.py::a:6", "test_x.py::b:10", "test_x.py::c:16",
                                        "test_x.py::d:24"]


def test_eventually_returns_the_answer_that_held() -> None:
    answers = iter([0, 0, 3])
    assert eventually(lambda: next(answers), "a third answer") == 3


def test_eventually_fails_saying_what_it_awaited_and_what_it_last_saw() -> None:
    with pytest.raises(AssertionError, match=r"not within 0.2 s: the count at 5 \(last seen: 2\)\nthe log's tail"):
        eventually(lambda: 2, "the count at 5", within=0.2, until=lambda n: n == 5, context=lambda: "the log's tail")


def test_eventually_counts_ignored_errors_as_not_yet_and_raises_others() -> None:
    answers = iter([ConnectionError("refused"), ConnectionError("refused"), "up"])

    def probe() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert eventually(probe, "the server", ignoring=(ConnectionError,)) == "up"
    with pytest.raises(AssertionError, match=r"last seen: ConnectionError\('refused'\)"):
        eventually(lambda: probe_refused(), "the server", within=0.2, ignoring=(ConnectionError,))
    with pytest.raises(ValueError):
        eventually(lambda: int("x"), "a number")


def probe_refused() -> None:
    raise ConnectionError("refused")


async def test_eventually_async_awaits_coroutine_probes_and_plain_ones() -> None:
    answers = iter([None, {"id": 1}])

    async def probe() -> dict[str, int] | None:
        return next(answers)

    assert await eventually_async(probe, "the rollout") == {"id": 1}
    assert await eventually_async(lambda: 4, "four", until=lambda n: n == 4) == 4
    with pytest.raises(AssertionError, match=r"not within 0.2 s: nothing \(last seen: None\)"):
        await eventually_async(lambda: None, "nothing", within=0.2)
