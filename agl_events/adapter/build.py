"""Components from a spec: an instance, a class, a factory, an import string or a dict of constructor kwargs.

Upstream's Trainer (agentlightning 0.3.0 `trainer/init_utils.py`) resolves `adapter=` this way, so configs
written for it (`adapter={"agent_match": "solver"}`, `adapter="pkg.mod.MyAdapter"`) work here. Import
strings may also use the `pkg.mod:Name` form our CLI uses for agents, and a registry maps short names.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from agl_events.adapter.base import TraceAdapter
from agl_events.adapter.final_reward import FinalRewardTriplets
from agl_events.adapter.messages import TraceToMessages
from agl_events.adapter.proxy import LlmProxyTraceToTriplet
from agl_events.adapter.triplet import TracerTraceToTriplet

T = TypeVar("T")

#: Short names an adapter spec may use instead of an import path.
ADAPTERS: dict[str, str] = {cls.__name__: f"{cls.__module__}.{cls.__name__}"
                            for cls in (TracerTraceToTriplet, LlmProxyTraceToTriplet, TraceToMessages,
                                        FinalRewardTriplets)}


def load_class(path: str, spec_name: str) -> Any:
    """`pkg.mod.Name` or `pkg.mod:Name` imported."""
    module_name, sep, attribute = path.partition(":") if ":" in path else path.rpartition(".")
    if not (module_name and sep and attribute):
        raise ValueError(f"{spec_name} import path must look like 'package.module.Name' or "
                         f"'package.module:Name', got {path!r}")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attribute)
    except AttributeError as exc:
        raise ImportError(f"{spec_name}: module {module_name!r} has no attribute {attribute!r}") from exc


def _checked(instance: Any, expected_type: type[T], spec_name: str, type_error_fmt: str | None) -> T:
    if not isinstance(instance, expected_type):
        type_name = str(type(instance))
        if type_error_fmt:
            raise TypeError(type_error_fmt.format(type_name=type_name, expected_type=expected_type.__name__))
        raise TypeError(f"{spec_name} factory returned {type_name}, which is not a {expected_type.__name__} subclass.")
    return instance


def _from_spec(spec: str | Mapping[str, Any], spec_name: str, dict_default_cls: type[Any] | None,
               registry: Mapping[str, str]) -> Any:
    """A string names the class (no kwargs); a dict's `type` (or, via the registry, `name`) names it, the
    other keys are its constructor kwargs."""
    if isinstance(spec, str):
        return load_class(registry.get(spec, spec), spec_name)()
    kwargs = dict(spec)
    type_path = kwargs.pop("type", None)
    if type_path is None and "name" in kwargs and registry:
        type_path = registry.get(kwargs.pop("name"))
    elif type_path is not None:
        type_path = registry.get(type_path, type_path)
    if type_path is not None:
        return load_class(type_path, spec_name)(**kwargs)
    if dict_default_cls is None:
        raise ValueError(f"{spec_name} dict must have a 'type' key with the class full name")
    return dict_default_cls(**kwargs)


def build_component(spec: T | type[T] | Callable[[], T] | str | Mapping[str, Any] | None, *,
                    expected_type: type[T], spec_name: str, default_factory: Callable[[], T] | None = None,
                    allow_none: bool = False, dict_default_cls: type[T] | None = None,
                    type_error_fmt: str | None = None, invalid_spec_error_fmt: str | None = None,
                    registry: Mapping[str, str] | None = None) -> T | None:
    """Resolve `spec` to an instance of `expected_type`, in upstream's order.

    - an instance of `expected_type`: returned as is;
    - None: `default_factory()`, else None if `allow_none`, else ValueError;
    - a subclass of `expected_type`: instantiated without arguments;
    - any other callable but a class: a factory, called without arguments;
    - a string: an import path (or registry name) of a class, instantiated without arguments;
    - a dict: `type` names the class (without it, `dict_default_cls` or ValueError), the rest are kwargs.

    TypeError when what was built is not an `expected_type`; ValueError for any other kind of spec.
    """
    if isinstance(spec, expected_type):
        return spec
    if spec is None:
        if default_factory is not None:
            return _checked(default_factory(), expected_type, spec_name, type_error_fmt)
        if allow_none:
            return None
        raise ValueError(invalid_spec_error_fmt.format(actual_type=type(spec), expected_type=expected_type.__name__)
                         if invalid_spec_error_fmt else f"{spec_name} cannot be None.")
    if isinstance(spec, type) and issubclass(spec, expected_type):
        return _checked(spec(), expected_type, spec_name, type_error_fmt)
    if callable(spec) and not isinstance(spec, type):
        return _checked(spec(), expected_type, spec_name, type_error_fmt)
    if isinstance(spec, str | Mapping):
        built = _from_spec(cast(str | Mapping[str, Any], spec), spec_name, dict_default_cls, registry or {})
        return _checked(built, expected_type, spec_name, type_error_fmt)
    if invalid_spec_error_fmt:
        raise ValueError(invalid_spec_error_fmt.format(actual_type=type(spec), expected_type=expected_type.__name__))
    raise ValueError(f"Invalid {spec_name} type: {type(spec)}. Expected {expected_type.__name__}, str, dict, or None.")


#: What `Trainer(adapter=...)` takes (upstream's `ComponentSpec[TraceAdapter]`).
AdapterSpec = (TraceAdapter[Any] | type[TraceAdapter[Any]] | Callable[[], TraceAdapter[Any]] | str | Mapping[str, Any]
               | None)


def build_adapter(spec: AdapterSpec = None) -> TraceAdapter[Any]:
    """The Trainer's `adapter=`: TracerTraceToTriplet by default, a dict without `type` is its kwargs."""
    adapter = build_component(
        spec, expected_type=TraceAdapter, spec_name="adapter", default_factory=TracerTraceToTriplet,
        dict_default_cls=TracerTraceToTriplet, registry=ADAPTERS,
        invalid_spec_error_fmt="Invalid adapter type: {actual_type}. Expected TraceAdapter, dict, or None.",
        type_error_fmt="Adapter factory returned {type_name}, which is not a TraceAdapter subclass.")
    assert adapter is not None  # a default_factory never yields None
    return adapter


#: What a samples worker runs unless told (`--adapter`): upstream's default adapter.
DEFAULT_ADAPTER = "TracerTraceToTriplet"


def adapter_from_spec(spec: str) -> TraceAdapter[Any]:
    """A command line's `--adapter`: a short name, an import path, or a JSON object (a dict spec), with one
    ValueError for every way it can be wrong, so the CLI reports it as a usage error."""
    try:
        return build_adapter(json.loads(spec) if spec.lstrip().startswith("{") else spec)
    except (ImportError, TypeError, ValueError) as exc:
        raise ValueError(f"adapter {spec!r}: {exc}") from exc


def spec_string(spec: AdapterSpec, built: TraceAdapter[Any]) -> str:
    """`spec` as `adapter_from_spec` reads it, for a worker in another process: strings as they are, dicts
    as JSON, anything else as its class's import path (an instance's constructor arguments do not travel:
    give a dict to keep them)."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Mapping):
        return json.dumps(dict(spec))
    cls = type(built)
    return f"{cls.__module__}:{cls.__qualname__}"
