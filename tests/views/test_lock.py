"""The views lock (one store process per views folder) and RocksKV's opening modes, on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agl_events.proc.pids import command_line
from agl_events.views.lock import LOCK_NAME, ViewsInUseError, ViewsLock, holder_of
from agl_events.views.rocks import RocksKV, ViewUnavailableError


def test_a_second_lock_on_a_views_root_is_refused_naming_the_holder(tmp_path: Path) -> None:
    with ViewsLock(tmp_path / "views"), pytest.raises(ViewsInUseError) as refused:
        ViewsLock(tmp_path / "views")
    assert refused.value.folder == tmp_path / "views"
    assert refused.value.holder.pid == os.getpid()
    assert str(refused.value) == (f"the views folder {tmp_path / 'views'} is in use by pid {os.getpid()} "
                                  f"({(command_line(os.getpid()) or '').strip()}): give this store a folder of "
                                  "its own with --views DIR")


def test_a_released_lock_is_free_and_its_file_names_no_holder(tmp_path: Path) -> None:
    root = tmp_path / "views"
    ViewsLock(root).release()
    assert (root / LOCK_NAME).is_file() and holder_of(root) is None
    with ViewsLock(root):  # the file left behind blocks nobody
        pass


def test_holder_of_finds_the_held_root_above_a_folder(tmp_path: Path) -> None:
    root = tmp_path / "views"
    with ViewsLock(root):
        held = holder_of(root / "exp1" / "deeper")
        assert held is not None and held[0] == root and held[1].pid == os.getpid()
        assert holder_of(tmp_path / "elsewhere") is None


def test_a_read_only_view_opens_beside_its_writer_and_holds_what_was_there(tmp_path: Path) -> None:
    writer = RocksKV(tmp_path / "view")
    writer.write({"a": 1})
    reader = RocksKV(tmp_path / "view", read_only=True)
    writer.write({"b": 2})
    assert reader.get("a") == 1 and reader.get("b") is None
    reader.close()
    writer.close()


def test_a_view_that_cannot_be_opened_says_which_and_why(tmp_path: Path) -> None:
    writer = RocksKV(tmp_path / "view")
    with pytest.raises(ViewUnavailableError, match=f"the view in {tmp_path / 'view'} cannot be opened: .*LOCK"):
        RocksKV(tmp_path / "view")
    writer.close()
    with pytest.raises(ViewUnavailableError, match=f"no view in {tmp_path / 'none'}"):
        RocksKV(tmp_path / "none", read_only=True)
