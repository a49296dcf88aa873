"""FinalRewardTriplets: TracerTraceToTriplet, with the rollout's final reward on every call's triplet.

An agent that calls its model several times and is rewarded once, at the end, is trained per transition:
each call is a triplet, and each earns what the whole rollout earned. Upstream's adapter hands a reward
only to the call just before it (the others get None) and leaves the crediting to the trainer (its VERL
daemon gives every turn the rollout's reward); writing it into the triplets here says it in the data,
so exports, `--min-reward` filters and any trainer that reads triplet rewards see every call of a rewarded
rollout. GRPO's advantage comes from the sample's final reward either way.
"""

from __future__ import annotations

from collections.abc import Sequence

from agl_events.adapter.triplet import TracerTraceToTriplet
from agl_events.emitter.reward import find_final_reward
from agl_events.types import Span, Triplet


class FinalRewardTriplets(TracerTraceToTriplet):
    """One triplet per LLM call, as TracerTraceToTriplet (same arguments), each rewarded with the last
    reward of the trace (None when the trace has none)."""

    def adapt(self, source: Sequence[Span], /) -> list[Triplet]:
        final = find_final_reward(sorted(source, key=lambda span: span.sequence_id))
        return [triplet.model_copy(update={"reward": final}) for triplet in super().adapt(source)]
