"""Stream processors of agl-events: faust-streaming workers that fold the log into partition-local state.

`processors.views` folds the view topics into per-partition views (`agl-events processor`);
`processors.samples` turns finished rollouts into training samples (`agl-events samples`). Both keep
their state per partition in RocksDB, derived and disposable: rebuildable from offset 0.
"""

from __future__ import annotations

__all__ = ["create_app"]


def __getattr__(name: str) -> object:
    # Lazy, so importing `processors.partition_views` does not pull in faust.
    if name == "create_app":
        from processors.views import create_app

        return create_app
    raise AttributeError(name)
