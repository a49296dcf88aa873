"""Between the store's models (JSON-shaped dicts) and the Avro records of the contract, record by record.

The conversions themselves live with the typed records (`events.typed`: `Rollout.of`, `span_model`, ...);
these functions are their dict-in, dict-out form, for readers of decoded records outside the reducers (the
samples worker, replay export) and for tests that write records by hand.
"""

from __future__ import annotations

from typing import Any

from agl_events.events.jsontext import dumps, loads_optional
from agl_events.events.typed import Attempt, ResourcesSnapshot, Rollout, span_model, span_of


def rollout_record(rollout: dict[str, Any]) -> dict[str, Any]:
    return Rollout.of(rollout).to_record()


def rollout_from_record(record: dict[str, Any]) -> dict[str, Any]:
    return Rollout.from_record(record).to_model()


def attempt_record(attempt: dict[str, Any]) -> dict[str, Any]:
    return Attempt.of(attempt).to_record()


def attempt_from_record(record: dict[str, Any]) -> dict[str, Any]:
    return Attempt.from_record(record).to_model()


span_record = span_of
span_from_record = span_model


def resources_record(snapshot: dict[str, Any]) -> dict[str, Any]:
    return ResourcesSnapshot.of(snapshot).to_record()


def resources_from_record(record: dict[str, Any]) -> dict[str, Any]:
    return ResourcesSnapshot.from_record(record).to_model()


__all__ = ["attempt_from_record", "attempt_record", "dumps", "loads_optional", "resources_from_record",
           "resources_record", "rollout_from_record", "rollout_record", "span_from_record", "span_record"]
