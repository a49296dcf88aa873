"""Stream processors of agl-events: faust-streaming workers that fold the log into partition-local state.

`agl_events.processors.views` folds the view topics into per-partition views (`agl-events processor`);
`agl_events.processors.samples` turns finished rollouts into training samples (`agl-events samples`). Both keep
their state per partition in RocksDB, derived and disposable: rebuildable from offset 0.
"""

from __future__ import annotations

__all__ = ["create_app"]


def __getattr__(name: str) -> object:
    # Lazy, so importing `agl_events.processors.partition_views` does not pull in faust.
    if name == "create_app":
        from agl_events.processors.views import create_app

        return create_app
    raise AttributeError(name)
