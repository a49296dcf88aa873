"""What a chaos run must find when it is over, as a pure function of what the store answers.

- lost: a rollout whose enqueue was acknowledged is missing; a succeeded attempt has fewer spans than its agent
  wrote (a runner finishes an attempt only once its spans are acknowledged, and the store finishes it only once
  they are folded, so every span of a succeeded attempt was acknowledged);
- duplicated: a rollout, an attempt id or attempt sequence id, a span id (per attempt) or a span sequence id (per
  rollout) that appears twice, or a succeeded attempt with more spans than its agent wrote;
- non_terminal: a rollout not succeeded, failed or cancelled once the run has waited for them all;
- gaps: attempt sequence ids other than 1..n, or a succeeded attempt whose span sequence ids are not consecutive.

A killed attempt may leave any prefix of its spans, and sequence ids it reserved but never used: neither is
an error, so those are only checked for duplicates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from agl_events.types import Attempt, Rollout, Span

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})


@dataclass
class Findings:
    """Each problem found, by kind, as one line that names the rollout."""

    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    non_terminal: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.non_terminal or self.gaps)


def _repeated(values: Sequence[object]) -> list[object]:
    return [value for value, n in Counter(values).items() if n > 1]


def check(enqueued: Collection[str], rollouts: Sequence[Rollout], attempts: Mapping[str, Sequence[Attempt]],
          spans: Mapping[str, Sequence[Span]], spans_per_attempt: int) -> Findings:
    """The findings over the store's rollouts, their attempts and spans (by rollout id)."""
    found = Findings()
    ids = [r.rollout_id for r in rollouts]
    found.duplicated += [f"rollout {rid} listed twice" for rid in _repeated(ids)]
    found.lost += [f"rollout {rid} was enqueued (acknowledged) but is missing"
                   for rid in sorted(set(enqueued) - set(ids))]
    found.non_terminal += [f"rollout {r.rollout_id} is {r.status}" for r in rollouts if r.status not in TERMINAL]
    for rid in ids:
        tries, traces = attempts.get(rid, []), spans.get(rid, [])
        found.duplicated += [f"rollout {rid}: attempt {a} twice" for a in _repeated([a.attempt_id for a in tries])]
        if sorted(a.sequence_id for a in tries) != list(range(1, len(tries) + 1)):
            found.gaps.append(f"rollout {rid}: attempt sequence ids {sorted(a.sequence_id for a in tries)}")
        found.duplicated += [f"rollout {rid}: span {s} twice" for s in _repeated([(s.attempt_id, s.span_id)
                                                                                   for s in traces])]
        found.duplicated += [f"rollout {rid}: span sequence id {n} twice"
                             for n in _repeated([s.sequence_id for s in traces])]
        for attempt in tries:
            if attempt.status != "succeeded":
                continue
            mine = sorted(s.sequence_id for s in traces if s.attempt_id == attempt.attempt_id)
            where = (f"rollout {rid}: succeeded attempt {attempt.attempt_id} has {len(mine)} of {spans_per_attempt} "
                     "spans")
            if len(mine) < spans_per_attempt:
                found.lost.append(where)
            elif len(mine) > spans_per_attempt:
                found.duplicated.append(where)
            if mine and mine != list(range(mine[0], mine[0] + len(mine))):
                found.gaps.append(f"rollout {rid}: attempt {attempt.attempt_id} span sequence ids {mine}")
    return found
