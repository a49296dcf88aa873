"""The `kv` fixture: every case of this folder runs on the in-memory dict and on RocksDB."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agl_events.views.kv import DictKV, KeyValue
from agl_events.views.rocks import RocksKV


@pytest.fixture(params=["dict", "rocks"])
def kv(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyValue]:
    store: KeyValue = DictKV() if request.param == "dict" else RocksKV(tmp_path / "kv")
    yield store
    store.close()
