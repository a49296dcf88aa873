"""An agent module that sets OpenTelemetry's global TracerProvider itself when imported (as code exporting its
spans elsewhere does). Imported only by runner processes (named by `module:object`), never by the tests'
process, whose global provider must stay unset."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from agl_events import rollout
from tests.runner.llm_agents import ask_async

trace.set_tracer_provider(TracerProvider())

agent = rollout(ask_async)
