"""Agents that call the LLM proxy, at module level so spawned runner processes can import them: the proxied
round-trips bench's agent (two calls on the attempt's own route, one traced, one streamed, then a reward), so
the tests and the bench's figures run the same rollout."""

from __future__ import annotations

from agl_events.bench.proxied import asking as asking_agent

__all__ = ["asking_agent"]
