"""Adapter specs resolved as upstream's Trainer resolves them: instance, class, factory, import string, dict."""

from __future__ import annotations

from typing import Any

import pytest

from agl_events.adapter import (
    LlmProxyTraceToTriplet,
    RewardMatchPolicy,
    TraceAdapter,
    TracerTraceToTriplet,
    TraceToMessages,
    build_adapter,
    build_component,
)


class NotAnAdapter:
    pass


def test_none_is_the_default_adapter() -> None:
    adapter = build_adapter(None)
    assert type(adapter) is TracerTraceToTriplet and adapter.reward_match is RewardMatchPolicy.FIRST_OCCURRENCE


def test_an_instance_is_used_as_is() -> None:
    adapter = TraceToMessages()
    assert build_adapter(adapter) is adapter


def test_a_class_and_a_factory_are_called() -> None:
    assert type(build_adapter(LlmProxyTraceToTriplet)) is LlmProxyTraceToTriplet
    adapter = build_adapter(lambda: TracerTraceToTriplet(agent_match="solver"))
    assert isinstance(adapter, TracerTraceToTriplet) and adapter.agent_match == "solver"


@pytest.mark.parametrize("spec", ["agl_events.adapter.TraceToMessages", "agl_events.adapter:TraceToMessages",
                                  "agl_events.adapter.messages.TraceToMessages", "TraceToMessages"])
def test_import_strings_and_short_names(spec: str) -> None:
    assert type(build_adapter(spec)) is TraceToMessages


@pytest.mark.parametrize(("spec", "agent_match"), [
    ({"type": "agl_events.adapter.TracerTraceToTriplet", "agent_match": "solver"}, "solver"),
    ({"type": "TracerTraceToTriplet", "agent_match": "planner"}, "planner"),
    ({"name": "TracerTraceToTriplet", "agent_match": "x"}, "x"),
    ({"agent_match": "y", "reward_match": "first_sibling"}, "y"),  # no type: TracerTraceToTriplet's kwargs
])
def test_dicts_are_constructor_kwargs(spec: dict[str, Any], agent_match: str) -> None:
    adapter = build_adapter(spec)
    assert isinstance(adapter, TracerTraceToTriplet) and adapter.agent_match == agent_match


@pytest.mark.parametrize(("spec", "error", "message"), [
    (42, ValueError, "Invalid adapter type: <class 'int'>. Expected TraceAdapter, dict, or None."),
    (NotAnAdapter, ValueError, "Invalid adapter type: <class 'type'>. Expected TraceAdapter, dict, or None."),
    ("tests.adapter.test_build.NotAnAdapter", TypeError,
     "Adapter factory returned <class 'tests.adapter.test_build.NotAnAdapter'>, which is not a TraceAdapter subclass."),
    (lambda: 1, TypeError, "Adapter factory returned <class 'int'>, which is not a TraceAdapter subclass."),
    ("NoSuchAdapter", ValueError, "adapter import path must look like"),
    ("agl_events.adapter.NoSuchAdapter", ImportError, "has no attribute 'NoSuchAdapter'"),
    ("agl_events.no_such_module:X", ModuleNotFoundError, "agl_events.no_such_module"),
    ({"type": "TracerTraceToTriplet", "bogus": 1}, TypeError, "unexpected keyword argument 'bogus'"),
])
def test_bad_specs_fail_clearly(spec: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as caught:
        build_adapter(spec)
    assert message in str(caught.value)


def test_generic_form_as_upstream() -> None:
    """Without the adapter's defaults: None is refused, a dict needs its type, messages name the spec."""
    with pytest.raises(ValueError, match=r"^thing cannot be None\.$"):
        build_component(None, expected_type=TraceAdapter, spec_name="thing")
    assert build_component(None, expected_type=TraceAdapter, spec_name="thing", allow_none=True) is None
    with pytest.raises(ValueError, match=r"^thing dict must have a 'type' key with the class full name$"):
        build_component({"agent_match": "x"}, expected_type=TraceAdapter, spec_name="thing")
    with pytest.raises(ValueError, match=r"^Invalid thing type: <class 'float'>\. Expected TraceAdapter, str, dict"):
        build_component(1.5, expected_type=TraceAdapter, spec_name="thing")


def test_trainer_resolves_its_adapter_spec() -> None:
    from agl_events import Trainer

    assert type(Trainer().adapter) is TracerTraceToTriplet  # upstream's default
    assert type(Trainer(adapter="TraceToMessages").adapter) is TraceToMessages
    assert Trainer(adapter={"agent_match": "solver"}).adapter.agent_match == "solver"  # type: ignore[attr-defined]
