"""agl-events: Agent Lightning's LightningStore rebuilt on an Apache Kafka log.

Every change is an Avro event on a Kafka topic; views are folds of those events.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> module that defines it. Imported on first access, so `import agl_events` stays cheap
#: (the CLI and the processors need neither OpenTelemetry nor confluent-kafka's producer to start).
#: Add an entry here to export something new.
_LAZY: dict[str, str] = {
    "LitAgent": "agl_events.agent",
    "rollout": "agl_events.agent",
    "emit_reward": "agl_events.emitter",
    "emit_message": "agl_events.emitter",
    "emit_object": "agl_events.emitter",
    "emit_exception": "agl_events.emitter",
    "operation": "agl_events.emitter",
    "KafkaTracer": "agl_events.tracer",
    "Trainer": "agl_events.trainer",
    "Baseline": "agl_events.algorithm",
    "TraceAdapter": "agl_events.adapter",
    "TracerTraceToTriplet": "agl_events.adapter",
    "LlmProxyTraceToTriplet": "agl_events.adapter",
    "TraceToMessages": "agl_events.adapter",
    "KafkaLightningStore": "agl_events.store.kafka",
    "InMemoryLightningStore": "agl_events.store.memory",
    "LLMProxy": "agl_events.llm",
    "BatchPolicy": "agl_events.samples.batching",
    "SampleStream": "agl_events.samples.stream",
    "Sample": "agl_events.samples.model",
    "Triplet": "agl_events.types",
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:  # what type checkers see; the redundant aliases mark them as re-exports
    from agl_events.adapter import LlmProxyTraceToTriplet as LlmProxyTraceToTriplet
    from agl_events.adapter import TraceAdapter as TraceAdapter
    from agl_events.adapter import TracerTraceToTriplet as TracerTraceToTriplet
    from agl_events.adapter import TraceToMessages as TraceToMessages
    from agl_events.agent import LitAgent as LitAgent
    from agl_events.agent import rollout as rollout
    from agl_events.algorithm import Baseline as Baseline
    from agl_events.emitter import emit_exception as emit_exception
    from agl_events.emitter import emit_message as emit_message
    from agl_events.emitter import emit_object as emit_object
    from agl_events.emitter import emit_reward as emit_reward
    from agl_events.emitter import operation as operation
    from agl_events.llm import LLMProxy as LLMProxy
    from agl_events.samples.batching import BatchPolicy as BatchPolicy
    from agl_events.samples.model import Sample as Sample
    from agl_events.samples.stream import SampleStream as SampleStream
    from agl_events.store.kafka import KafkaLightningStore as KafkaLightningStore
    from agl_events.store.memory import InMemoryLightningStore as InMemoryLightningStore
    from agl_events.tracer import KafkaTracer as KafkaTracer
    from agl_events.trainer import Trainer as Trainer
    from agl_events.types import Triplet as Triplet


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agl_events' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
