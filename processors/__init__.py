"""Stream processors of agl-events: faust-streaming workers that fold the log into partition-local views.

`processors.views.create_app` builds the app; `agl-events processor` (or `python -m processors.views`)
runs one worker of it. Views are read models: derived, disposable, rebuildable from offset 0.
"""

from __future__ import annotations

__all__ = ["create_app"]


def __getattr__(name: str) -> object:
    # Lazy, so importing `processors.partition_views` does not pull in faust.
    if name == "create_app":
        from processors.views import create_app

        return create_app
    raise AttributeError(name)
