"""Loading the agent a runner runs: `module:object`, where object is a LitAgent, its class, or a function."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from agl_events.agent import LitAgent, rollout


def load_agent(spec: str) -> LitAgent[Any]:
    """Import `module:object` and make a LitAgent of it, with a message that says what was wrong."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"agent must be given as module:object, got {spec!r}")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r} for agent {spec!r}: {exc}") from exc
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ValueError(f"{module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if isinstance(target, LitAgent):
        return target
    if inspect.isclass(target) and issubclass(target, LitAgent):
        return target()
    if callable(target):
        return rollout(target)
    raise ValueError(f"{spec!r} is neither a LitAgent, a LitAgent class, nor a function")
