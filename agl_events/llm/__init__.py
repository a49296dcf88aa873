"""The LLM proxy: an OpenAI-compatible endpoint per rollout attempt that records every call as spans on Kafka.

`LLMProxy` is imported on first access: it pulls in LiteLLM (seconds to import), which the fake backend
(`agl_events.llm.fake_backend`, used by tests and benchmarks) and the pure span helpers do not need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["LLMProxy"]

if TYPE_CHECKING:
    from agl_events.llm.proxy import LLMProxy as LLMProxy


def __getattr__(name: str) -> Any:
    if name != "LLMProxy":
        raise AttributeError(f"module 'agl_events.llm' has no attribute {name!r}")
    return importlib.import_module("agl_events.llm.proxy").LLMProxy
