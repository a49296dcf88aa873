"""From a finished rollout and the spans of its attempt to a training sample, through an adapter.

Pure and deterministic (given a deterministic adapter): the samples processor may build the same sample
again after a crash, and it must come out the same, down to its id, for consumers' dedupe to hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from agl_events.emitter.reward import find_final_reward
from agl_events.events.convert import rollout_from_record
from agl_events.samples.model import Sample, group_id, group_size, sample_id
from agl_events.types import Span, Triplet

#: What the processor calls: a rollout attempt's spans, in sequence order, to its triplets (an
#: Agent Lightning adapter instance is such a callable).
Adapter = Callable[[Sequence[Span]], Sequence[Any]]


def adapter_name(adapter: Adapter) -> str:
    """How a sample names its adapter: a function's name, else the class name of the instance."""
    name = getattr(adapter, "__name__", None)
    return name if isinstance(name, str) else type(adapter).__name__


def build_sample(finished: Mapping[str, Any], spans: Sequence[Span], adapter: Adapter, adapter_name: str
                 ) -> Sample:
    """The sample of a RolloutFinished record (`finished`) whose attempt made `spans`.

    No spans (a rollout cancelled before it ran, an agent that traced nothing): no triplets, and the
    adapter is not called, as upstream's trainer daemon does, since upstream's adapters raise on an
    empty trace. Whatever the adapter raises propagates: the processor dead-letters the rollout.
    """
    rollout = rollout_from_record(finished["rollout"])
    attempt = finished["attempt"]
    attempt_id = None if attempt is None else attempt["attempt_id"]
    return Sample(
        sample_id=sample_id(rollout["rollout_id"], attempt_id),
        rollout_id=rollout["rollout_id"],
        attempt_id=attempt_id,
        group_id=group_id(rollout["input"], rollout["metadata"], rollout["resources_id"]),
        group_size=group_size(rollout["metadata"]),
        resources_id=rollout["resources_id"],
        resources_generation=finished["resources_generation"],
        mode=rollout["mode"],
        status=rollout["status"],
        final_reward=find_final_reward(spans),
        input=rollout["input"],
        adapter=adapter_name,
        triplets=triplets_of(adapter(spans)) if spans else [],
    )


def triplets_of(adapted: Any) -> list[Triplet]:
    """The adapter's result as our Triplets; upstream's Triplet objects (same fields) are accepted too."""
    if not isinstance(adapted, Sequence) or isinstance(adapted, str | bytes):
        raise TypeError(f"the adapter returned {type(adapted).__name__}, not a list of triplets")
    return [item if isinstance(item, Triplet)
            else Triplet.model_validate(item.model_dump() if isinstance(item, BaseModel) else item)
            for item in adapted]
