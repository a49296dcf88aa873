"""The run order's list of heaviest files names files that exist, and puts them first."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.order import HEAVIEST, TESTS, heaviest_first


@dataclass
class _Item:
    """What heaviest_first reads of a collected test: its file."""

    path: Path


def test_every_heaviest_file_exists() -> None:
    missing = [name for name in HEAVIEST if not (TESTS / name).is_file()]
    assert not missing, f"tests/order.py names files that are gone: {missing}"


def test_the_heaviest_files_run_first_in_their_order_and_the_rest_keep_theirs() -> None:
    light = [_Item(TESTS / "a" / "test_one.py"), _Item(TESTS / "b" / "test_two.py")]
    heavy = [_Item(TESTS / HEAVIEST[1]), _Item(TESTS / HEAVIEST[0]), _Item(TESTS / HEAVIEST[0])]
    items = [light[0], heavy[0], light[1], heavy[1], heavy[2]]
    heaviest_first(items)  # type: ignore[arg-type]
    assert items == [heavy[1], heavy[2], heavy[0], light[0], light[1]]
