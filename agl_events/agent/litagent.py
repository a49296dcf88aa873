"""LitAgent: what a user subclasses to run rollouts, shaped like agentlightning 0.3.0's.

Differences from upstream, on purpose: `rollout` (and the training/validation hooks) may be plain
or `async def`, and `execute` runs whichever was written, so a runner needs one call for both kinds.
Upstream's `rollout_async` family is still honoured for agents ported from it.
"""

from __future__ import annotations

import asyncio
import inspect
import warnings
import weakref
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from agl_events.types import Rollout

T = TypeVar("T")

#: What a rollout may return: None (the tracer saw everything), a float reward, or a list of spans
#: (our Span, OpenTelemetry ReadableSpan, or SpanCoreFields).
RolloutRawResult = None | float | list[Any]

_ASYNC_HOOKS = ("rollout_async", "training_rollout_async", "validation_rollout_async")


class LitAgent(Generic[T]):
    """Subclass and implement `rollout(task, resources, rollout)` (sync or async).

    Override `training_rollout` / `validation_rollout` when training and validation differ; by default
    both call `rollout`. `execute` picks the hook by the rollout's mode ("val" and "test" validate).
    """

    def __init__(self, *, trained_agents: str | None = None) -> None:
        if trained_agents is not None:
            warnings.warn("`trained_agents` is deprecated. Configure `agent_match` in adapter instead.",
                          DeprecationWarning, stacklevel=2)
        self.trained_agents = trained_agents
        self._trainer_ref: weakref.ReferenceType[Any] | None = None
        self._runner_ref: weakref.ReferenceType[Any] | None = None

    # -- the rollout hooks -------------------------------------------------------------------------
    def rollout(self, task: T, resources: Mapping[str, Any], rollout: Rollout) -> Any:
        """One rollout of `task`; return None, a float reward, or a list of spans. May be `async def`."""
        raise NotImplementedError("Agents must implement the `rollout` method.")

    def training_rollout(self, task: T, resources: Mapping[str, Any], rollout: Rollout) -> Any:
        return self.rollout(task, resources, rollout)

    def validation_rollout(self, task: T, resources: Mapping[str, Any], rollout: Rollout) -> Any:
        return self.rollout(task, resources, rollout)

    async def rollout_async(self, task: T, resources: Mapping[str, Any], rollout: Rollout) -> Any:
        """Upstream's async entry point; by default whatever `rollout` gives, awaited if needed."""
        return await _settle(self.rollout(task, resources, rollout))

    async def training_rollout_async(self, task: T, resources: Mapping[str, Any], rollout: Rollout) -> Any:
        return await self.rollout_async(task, resources, rollout)

    async def validation_rollout_async(self, task: T, resources: Mapping[str, Any], rollout: Rollout) -> Any:
        return await self.rollout_async(task, resources, rollout)

    # -- running -----------------------------------------------------------------------------------
    def uses_async_api(self) -> bool:
        """True when the subclass wrote upstream's `*_async` methods, which then take precedence."""
        return any(getattr(type(self), name) is not getattr(LitAgent, name) for name in _ASYNC_HOOKS)

    def is_async(self) -> bool:
        """True when running this agent needs an event loop (any hook is a coroutine function)."""
        return self.uses_async_api() or any(
            inspect.iscoroutinefunction(getattr(self, name))
            for name in ("rollout", "training_rollout", "validation_rollout"))

    async def execute(self, task: T, resources: Mapping[str, Any], rollout: Rollout) -> Any:
        """Run the hook for the rollout's mode, sync or async. A sync agent runs on the calling thread,
        as upstream's runner does; wrap it in `asyncio.to_thread` to keep a loop responsive."""
        if self.uses_async_api():
            validating = getattr(rollout, "mode", None) in ("val", "test")
            hook = self.validation_rollout_async if validating else self.training_rollout_async
            return await hook(task, resources, rollout)
        return await _settle(self._call_plain(task, resources, rollout))

    def _call_plain(self, task: T, resources: Mapping[str, Any], rollout: Rollout) -> Any:
        validating = getattr(rollout, "mode", None) in ("val", "test")
        hook = self.validation_rollout if validating else self.training_rollout
        return hook(task, resources, rollout)

    def execute_sync(self, task: T, resources: Mapping[str, Any], rollout: Rollout) -> Any:
        """`execute` for code without an event loop: sync agents run directly, async ones on a private loop."""
        if not self.is_async():
            return self._call_plain(task, resources, rollout)
        return asyncio.run(self.execute(task, resources, rollout))

    # -- the trainer and runner that drive the agent -----------------------------------------------
    def set_trainer(self, trainer: Any) -> None:
        self._trainer_ref = weakref.ref(trainer)

    def get_trainer(self) -> Any:
        return _deref(self._trainer_ref, "Trainer")

    @property
    def trainer(self) -> Any:
        return self.get_trainer()

    def set_runner(self, runner: Any) -> None:
        self._runner_ref = weakref.ref(runner)

    def get_runner(self) -> Any:
        return _deref(self._runner_ref, "Runner")

    @property
    def runner(self) -> Any:
        return self.get_runner()

    def get_tracer(self) -> Any:
        """The runner's tracer, else the trainer's."""
        if self._runner_ref is not None and hasattr(self.runner, "tracer"):
            return self.runner.tracer
        return self.trainer.tracer

    @property
    def tracer(self) -> Any:
        return self.get_tracer()

    def on_rollout_start(self, task: Any, runner: Any, tracer: Any) -> None:
        """Deprecated upstream hook, kept as a no-op for ported agents."""

    def on_rollout_end(self, task: Any, rollout: Rollout, runner: Any, tracer: Any) -> None:
        """Deprecated upstream hook, kept as a no-op for ported agents."""


async def _settle(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def _deref(ref: weakref.ReferenceType[Any] | None, what: str) -> Any:
    if ref is None:
        raise ValueError(f"{what} has not been set for this agent.")
    target = ref()
    if target is None:
        raise ValueError(f"{what} reference is no longer valid (object has been garbage collected).")
    return target


__all__ = ["LitAgent", "RolloutRawResult"]
