"""How much disk a view takes: the bytes of the files in its folder (RocksDB's SST files, WAL, manifest)."""

from __future__ import annotations

import os
from pathlib import Path


def folder_bytes(folder: Path) -> int:
    """Bytes of the files in `folder` and below; 0 when it does not exist (yet)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:  # compaction removed it meanwhile
                continue
    return total
