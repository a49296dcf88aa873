"""The KeyValue contract: JSON values, None deletes, ordered prefix scans; RocksKV also survives a reopen."""

from __future__ import annotations

import random
from pathlib import Path

from agl_events.reducers import keys
from agl_events.views.kv import KeyValue
from agl_events.views.rocks import RocksKV


def test_a_missing_key_reads_as_none(kv: KeyValue) -> None:
    assert kv.get("r/nothing") is None


def test_values_come_back_as_json_falsy_ones_included(kv: KeyValue) -> None:
    values = {"nested": {"a": [1, "x", None, {"b": 2.5}]}, "big": 2**40, "float": 0.25, "text": "héllo ✓",
              "zero": 0, "false": False, "empty": "", "list": [], "dict": {}, "tuple": (1, 2)}
    kv.write(values)
    assert {k: kv.get(k) for k in values} == {**values, "tuple": [1, 2]}


def test_values_are_copies_on_the_way_in_and_out(kv: KeyValue) -> None:
    value = {"a": [1]}
    kv.write({"k": value})
    value["a"].append(2)
    kv.get("k")["a"].append(3)
    assert kv.get("k") == {"a": [1]}


def test_one_write_puts_overwrites_and_deletes_together(kv: KeyValue) -> None:
    kv.write({"a": 1, "b": 2})
    kv.write({"a": None, "b": 3, "c": 4, "never-there": None})
    assert (kv.get("a"), kv.get("b"), kv.get("c"), kv.get("never-there")) == (None, 3, 4, None)
    assert list(kv.scan("")) == [("b", 3), ("c", 4)]


def test_a_prefix_scan_returns_exactly_the_prefix_in_key_order(kv: KeyValue) -> None:
    """Bounds: `a.` sorts just before `a/` and `a0` just after it; neither belongs to the prefix."""
    names = ["a.", "a/", "a/x", "a/x/y", "a/y", "a0", "b", "0"]
    kv.write({name: i for i, name in enumerate(random.Random(3).sample(names, len(names)))})
    assert [k for k, _ in kv.scan("a/")] == ["a/", "a/x", "a/x/y", "a/y"]
    assert [k for k, _ in kv.scan("a/x")] == ["a/x", "a/x/y"]
    assert [k for k, _ in kv.scan("")] == sorted(names)
    assert list(kv.scan("c")) == [] and list(kv.scan("a/z")) == []


def test_scans_order_padded_numbers_and_non_ascii_as_the_reducers_expect(kv: KeyValue) -> None:
    kv.write({keys.span("ro-a", seq, "at-1", "s"): seq for seq in (10, 9, 100, 1)})
    assert [v for _, v in kv.scan(keys.spans_of("ro-a"))] == [1, 9, 10, 100]
    kv.write({"w/é": 2, "w/z": 1, "w/\U0001f600": 3})  # code point order, which is UTF-8 byte order
    assert [v for _, v in kv.scan("w/")] == [1, 2, 3]


def test_a_scan_does_not_see_deleted_keys(kv: KeyValue) -> None:
    kv.write({"q/1": "a", "q/2": "b", "q/3": "c"})
    kv.write({"q/2": None})
    assert list(kv.scan("q/")) == [("q/1", "a"), ("q/3", "c")]


def test_rocks_keeps_its_data_across_a_reopen(tmp_path: Path) -> None:
    first = RocksKV(tmp_path / "kv")
    first.write({"a/1": {"x": 1}, "a/2": [2], "gone": 1})
    first.write({"gone": None})
    first.close()
    again = RocksKV(tmp_path / "kv")
    try:
        assert list(again.scan("")) == [("a/1", {"x": 1}), ("a/2", [2])]
    finally:
        again.close()


def test_a_scan_ends_at_its_prefix_among_deleted_keys_and_multi_byte_last_characters(kv: KeyValue) -> None:
    """As the samples buffer leaves them: entries written, then deleted, around the prefix scanned."""
    kv.write({f"b/{i:04d}/{j}": j for i in range(300) for j in range(3)} | {"b/é": 1, "b/éa": 2, "b/ê": 3})
    kv.write({f"b/{i:04d}/{j}": None for i in range(300) for j in range(3) if i != 150})
    assert list(kv.scan("b/0150/")) == [("b/0150/0", 0), ("b/0150/1", 1), ("b/0150/2", 2)]
    assert list(kv.scan("b/0151/")) == [] and list(kv.scan("b/0")) == list(kv.scan("b/0150"))
    assert list(kv.scan("b/é")) == [("b/é", 1), ("b/éa", 2)]
