"""TraceTree: roots, virtual spans for missing parents, and re-parenting by time."""

from __future__ import annotations

import pytest

from agl_events.adapter import TraceTree
from agl_events.semconv import AGL_VIRTUAL
from tests.adapter import llm, span


def _shape(tree: TraceTree) -> tuple[str, list]:
    return tree.id, [_shape(child) for child in tree.children]


def test_a_single_root_is_the_tree() -> None:
    tree = TraceTree.from_spans([span("c", parent="r", start=1, end=2), span("r", end=3)])
    assert _shape(tree) == ("r", [("c", [])])


def test_a_missing_parent_becomes_a_virtual_span_over_its_children() -> None:
    tree = TraceTree.from_spans([span("a", parent="lost", start=1, end=2), span("b", parent="lost", start=3, end=5)])
    assert _shape(tree) == ("lost", [("a", []), ("b", [])])
    assert (tree.span.name, tree.start_time, tree.end_time, tree.span.attributes) == (AGL_VIRTUAL, 1, 5, {})


def test_several_roots_hang_under_a_virtual_root() -> None:
    tree = TraceTree.from_spans([span("a", start=1, end=2), span("b", start=3, end=4)])
    assert _shape(tree) == ("virtual-root", [("a", []), ("b", [])])
    assert (tree.start_time, tree.end_time) == (1, 4)


def test_missing_parents_become_roots_in_order_of_first_appearance() -> None:
    """Deliberately deterministic: upstream iterates a set here, an order that changes between processes."""
    spans = [span("x", parent="p2"), span("r"), span("y", parent="p1"), span("z", parent="p2")]
    assert _shape(TraceTree.from_spans(spans)) == (
        "virtual-root", [("r", []), ("p2", [("x", []), ("z", [])]), ("p1", [("y", [])])])


def test_repair_moves_roots_under_the_tightest_enclosing_span() -> None:
    spans = [span("agent", start=0, end=10), span("inner", parent="agent", start=1, end=6),
             llm("call", start=2, end=3), span("outside", start=11, end=12)]
    tree = TraceTree.from_spans(spans)
    tree.repair_hierarchy()
    assert _shape(tree) == ("virtual-root", [("agent", [("inner", [("call", [])])]), ("outside", [])])


def test_repair_descends_through_a_single_session_span() -> None:
    spans = [span("session", start=0, end=20), span("agent", parent="session", start=0, end=10),
             llm("call", parent="session", start=2, end=3)]
    tree = TraceTree.from_spans(spans)
    tree.repair_hierarchy()
    assert _shape(tree) == ("session", [("agent", [("call", [])])])


def test_no_spans() -> None:
    with pytest.raises(ValueError, match="No spans provided"):
        TraceTree.from_spans([])
