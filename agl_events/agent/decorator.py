"""`@rollout`: a plain function as a LitAgent, resources injected by parameter name (upstream 0.3.0 style).

The first parameter receives the task. Others are filled by name: `llm` (the first LLM resource,
a ProxyLLM resolved to this attempt's endpoint), `prompt_template` (the first PromptTemplate),
`resources` (all of them) and `rollout` (the rollout). Upstream accepts only `(task, llm[, rollout])`
and `(task, prompt_template[, rollout])`; the `resources` form and a bare `(task)` are ours.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

from agl_events.agent.litagent import LitAgent
from agl_events.types import LLM, AttemptedRollout, PromptTemplate, ProxyLLM, Rollout

log = logging.getLogger(__name__)

T = TypeVar("T")

INJECTED = ("llm", "prompt_template", "resources", "rollout")


class FunctionalLitAgent(LitAgent[T]):
    """A LitAgent around a function; still callable as that function."""

    def __init__(self, rollout_func: Callable[..., Any], *, strip_proxy: bool = True) -> None:
        super().__init__()
        self._rollout_func = rollout_func
        self._strip_proxy = strip_proxy
        self._sig = inspect.signature(rollout_func)
        _validate(rollout_func, self._sig)
        functools.update_wrapper(self, rollout_func)  # type: ignore[arg-type]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._rollout_func(*args, **kwargs)

    def __reduce__(self) -> Any:
        """Pickle a decorated module-level function by name, so runner processes can receive it.

        The module attribute is this agent, not the function, so the function itself cannot be pickled
        by reference; importing the agent by name in the child gives the same agent back.
        """
        module, qualname = self._rollout_func.__module__, self._rollout_func.__qualname__
        if _import_attribute(module, qualname) is self:
            return _import_attribute, (module, qualname)
        return super().__reduce__()

    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self._rollout_func)

    def rollout(self, task: T, resources: Mapping[str, Any], rollout: Rollout) -> Any:
        """Call the function with what its signature asks for."""
        return self._rollout_func(task, **self._kwargs(resources, rollout))

    def _kwargs(self, resources: Mapping[str, Any], rollout: Rollout) -> dict[str, Any]:
        params = self._sig.parameters
        kwargs: dict[str, Any] = {}
        if "rollout" in params:
            kwargs["rollout"] = rollout
        if "resources" in params:
            kwargs["resources"] = resources
        if "llm" in params:
            kwargs["llm"] = self._llm(resources, rollout)
        if "prompt_template" in params:
            kwargs["prompt_template"] = _first(resources, PromptTemplate, "prompt template")
        return kwargs

    def _llm(self, resources: Mapping[str, Any], rollout: Rollout) -> LLM:
        llm = _first(resources, LLM, "LLM")
        if self._strip_proxy and isinstance(llm, ProxyLLM):
            if not isinstance(rollout, AttemptedRollout):
                raise ValueError("Rollout is not an AttemptedRollout.")
            return llm.with_attempted_rollout(rollout)
        return llm


class AsyncFunctionalLitAgent(FunctionalLitAgent[T]):
    """The same around an `async def`: `rollout` is itself a coroutine function, so callers that inspect
    `agent.rollout` (rather than calling `execute`) see that it must be awaited."""

    async def rollout(self, task: T, resources: Mapping[str, Any], rollout: Rollout) -> Any:
        return await self._rollout_func(task, **self._kwargs(resources, rollout))


def _import_attribute(module: str, qualname: str) -> Any:
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return target


def _functional(func: Callable[..., Any], strip_proxy: bool) -> FunctionalLitAgent[Any]:
    kind = AsyncFunctionalLitAgent if inspect.iscoroutinefunction(func) else FunctionalLitAgent
    return kind(func, strip_proxy=strip_proxy)


def _first(resources: Mapping[str, Any], kind: type[Any], label: str) -> Any:
    """The first resource of `kind` (by insertion order), warning when there are several, as upstream."""
    found = [(name, r) for name, r in resources.items() if isinstance(r, kind)]
    if not found:
        raise ValueError(f"No {label} resource found in the provided resources.")
    if len(found) > 1:
        log.warning("Multiple %s resources found in resources. Using the first one: '%s'.", label, found[0][0])
    return found[0][1]


def _validate(func: Callable[..., Any], sig: inspect.Signature) -> None:
    """Fail at decoration time, not mid-training, when a parameter could never be filled."""
    params = list(sig.parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not params or params[0].kind not in positional:
        raise ValueError(f"Function {func} must take the task as its first positional parameter.")
    for p in params[1:]:
        if p.name in INJECTED and p.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ValueError(f"Parameter '{p.name}' of {func} must accept a keyword argument.")
        if p.name not in INJECTED and p.default is inspect.Parameter.empty and p.kind in (
                *positional, inspect.Parameter.KEYWORD_ONLY):
            raise NotImplementedError(
                f"Function signature {sig} does not match any known agent patterns: cannot fill '{p.name}'. "
                f"Parameters after the task may be {', '.join(INJECTED)}. Functions can be sync or async.")


@overload
def rollout(func: Callable[..., Any]) -> FunctionalLitAgent[Any]: ...


@overload
def rollout(*, strip_proxy: bool = True) -> Callable[[Callable[..., Any]], FunctionalLitAgent[Any]]: ...


def rollout(func: Callable[..., Any] | None = None, *, strip_proxy: bool = True
            ) -> FunctionalLitAgent[Any] | Callable[[Callable[..., Any]], FunctionalLitAgent[Any]]:
    """`@rollout` or `@rollout(strip_proxy=False)` on `[async] (task, [llm|prompt_template|resources], [rollout])`."""
    def wrap(f: Callable[..., Any]) -> FunctionalLitAgent[Any]:
        return _functional(f, strip_proxy)

    return wrap if func is None else wrap(func)


def _requiring(name: str) -> Callable[..., Any]:
    def decorator(func: Callable[..., Any] | None = None, *, strip_proxy: bool = True) -> Any:
        def wrap(f: Callable[..., Any]) -> FunctionalLitAgent[Any]:
            params = list(inspect.signature(f).parameters)
            if len(params) < 2 or params[0] != "task" or name not in params:
                raise ValueError(f"Function {f} must have parameters 'task' and '{name}'.")
            return _functional(f, strip_proxy)

        return wrap if func is None else wrap(func)

    return decorator


llm_rollout = _requiring("llm")
"""Upstream's `llm_rollout`: like `rollout`, but insists on `(task, llm[, rollout])`."""

prompt_rollout = _requiring("prompt_template")
"""Upstream's `prompt_rollout`: like `rollout`, but insists on `(task, prompt_template[, rollout])`."""
