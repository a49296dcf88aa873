"""The adapter contract: an object turning one rollout's spans into training data, callable like a function.

Upstream (agentlightning 0.3.0 `adapter/base.py`) makes adapters objects with `adapt` and lets `__call__`
delegate to it, so an algorithm can hold either a configured adapter or a plain callable. Keeping the same
two names lets upstream-style code (`adapter.adapt(spans)`, `adapter(spans)`) run unchanged on ours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from agl_events.types import Span, Triplet

T_to = TypeVar("T_to")


class TraceAdapter(Generic[T_to]):
    """Converts the spans of one rollout attempt (in sequence-id order) into `T_to`; subclasses override `adapt`."""

    def __call__(self, source: Sequence[Span], /) -> T_to:
        return self.adapt(source)

    def adapt(self, source: Sequence[Span], /) -> T_to:
        raise NotImplementedError(f"{type(self).__name__}.adapt() is not implemented")


class TraceToTripletBase(TraceAdapter[list[Triplet]]):
    """Adapters whose output is a trajectory of triplets (what RL trainers consume), as upstream's base."""
