"""The LLM proxy: an OpenAI-compatible endpoint per rollout attempt that records every call as spans on Kafka."""

from agl_events.llm.proxy import LLMProxy

__all__ = ["LLMProxy"]
