"""Our attribute helpers give what agentlightning 0.3.0's (`agentlightning.utils.otel`) give, on the same inputs.

Every emitted operation and annotation goes through them, so ours are rewritten for speed; these inputs cover
the corner cases the rewrites must keep: key order, value types (True is not 1), empty containers, lists kept
whole or expanded, mixed lists (a warning, then indexes), None, tuples, subclasses of the primitive types, keys
with dots, and the errors (same type, same message).
"""

from __future__ import annotations

import enum
import logging
from collections import OrderedDict
from typing import Any

import pytest
from agentlightning.utils import otel as upstream

from agl_events.emitter import attributes as ours


class Colour(enum.IntEnum):
    RED = 1


class Label(str):
    pass


INPUTS: list[Any] = [
    {},
    [],
    {"a": 1},
    {"a": {"b": {"c": "deep"}}, "z": "last"},
    {"a": {}, "b": [], "c": None},
    {"flag": True, "n": 0, "x": 1.5, "s": ""},
    {"bools": [True, False], "ints": [1, 2], "floats": [0.5, 2.0], "strs": ["a", "b"]},
    {"mixed": [1, "a", 2.5], "bool_int": [True, 1], "int_float": [1, 2.0]},
    {"dicts": [{"k": 1}, {"k": [1, 2]}], "nested": [[1, 2], ["a"]]},
    {"tuple": (1, 2), "set": {1}, "bytes": b"raw"},
    {"enum": Colour.RED, "label": Label("text"), "od": OrderedDict([("b", 1), ("a", 2)])},
    {"dotted.key": {"x.y": 1}, "": {"empty": 1}, "0": "zero"},
    [1, 2, 3],
    [{"a": 1}, [True, "x"], None],
    {"prompt": {"0": {"role": "user", "content": "hi" * 200}}, "attrs": {"k0": {"k1": "v", "k2": ["p", "q"]}}},
    {"none_list": [None, None], "list_with_dict": [1, {"a": 2}]},
]


def typed(flat: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Items in order with each value's type: == alone says True == 1 and [1] == [1.0]."""
    return [(k, type(v).__name__, repr(v)) for k, v in flat.items()]


def outcome(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return "ok", typed(fn(*args, **kwargs))
    except Exception as exc:
        return "error", type(exc).__name__, str(exc)


@pytest.mark.parametrize("expand", [False, True])
@pytest.mark.parametrize("nested", INPUTS, ids=[str(i) for i in range(len(INPUTS))])
def test_flatten_matches_upstream(nested: Any, expand: bool, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        theirs = outcome(upstream.flatten_attributes, nested, expand_leaf_lists=expand)
        their_warnings = [r.getMessage() for r in caplog.records]
        caplog.clear()
        mine = outcome(ours.flatten_attributes, nested, expand_leaf_lists=expand)
        my_warnings = [r.getMessage() for r in caplog.records]
    assert mine == theirs
    assert my_warnings == their_warnings


@pytest.mark.parametrize("nested", [{1: "a"}, {"a": {2: "b"}}, {"a": [{None: 1}]}])
def test_non_string_keys_are_refused_like_upstream(nested: Any) -> None:
    mine = outcome(ours.flatten_attributes, nested)
    assert mine[0] == "error"
    assert mine == outcome(upstream.flatten_attributes, nested)


OPAQUE = object()  # not JSON: str() of it (forced) or an error; one instance, so both sides print one address


@pytest.mark.parametrize("force", [True, False])
@pytest.mark.parametrize("nested", INPUTS, ids=[str(i) for i in range(len(INPUTS))])
def test_sanitize_matches_upstream(nested: Any, force: bool) -> None:
    flat = upstream.flatten_attributes(nested) if isinstance(nested, dict) else {"v": nested}
    for attributes in (flat, {"whole": nested}, {"opaque": OPAQUE, "after": 1}):
        assert outcome(ours.sanitize_attributes, attributes, force=force) == outcome(
            upstream.sanitize_attributes, attributes, force=force)
