"""Adapters: pure functions from a rollout's spans to training data (triplets, messages), as Agent Lightning 0.3.0's.

Pure on purpose: no Kafka, HTTP or storage here, so the same code runs in the Trainer's process, in a samples
processor, or on spans read from a file, and can be checked against upstream's adapters span for span.
"""

from agl_events.adapter.base import TraceAdapter, TraceToTripletBase
from agl_events.adapter.build import ADAPTERS, build_adapter, build_component
from agl_events.adapter.final_reward import FinalRewardTriplets
from agl_events.adapter.messages import OpenAIMessages, TraceToMessages
from agl_events.adapter.proxy import LlmProxyTraceToTriplet
from agl_events.adapter.tree import RewardMatchPolicy, TraceTree
from agl_events.adapter.triplet import TracerTraceToTriplet

__all__ = [
    "ADAPTERS",
    "FinalRewardTriplets",
    "LlmProxyTraceToTriplet",
    "OpenAIMessages",
    "RewardMatchPolicy",
    "TraceAdapter",
    "TraceToMessages",
    "TraceToTripletBase",
    "TraceTree",
    "TracerTraceToTriplet",
    "build_adapter",
    "build_component",
]
