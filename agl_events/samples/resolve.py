"""Which adapter the samples processor runs, from the `--adapter` spec of its command line.

The one place a spec becomes an adapter: `module:attr` or `module.attr`, naming a class (instantiated
with no arguments), an instance or a function. `agl_events.adapter.build_component` is to take this
over when it lands.
"""

from __future__ import annotations

import importlib

from agl_events.samples.build import Adapter

DEFAULT_ADAPTER = "agl_events.adapter.TracerTraceToTriplet"


def resolve_adapter(spec: str) -> Adapter:
    """The adapter `spec` names; ValueError saying why when it names nothing usable."""
    module_name, sep, attr = spec.partition(":")
    if not sep:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"adapter {spec!r}: expected module:name or module.name")
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"adapter {spec!r} not found: {exc}") from exc
    adapter = found() if isinstance(found, type) else found
    if not callable(adapter):
        raise ValueError(f"adapter {spec!r} is a {type(adapter).__name__}, not callable on a list of spans")
    return adapter
