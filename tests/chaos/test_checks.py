"""The chaos run's checks on hand-made store contents: each kind of problem is found, a clean history passes."""

from __future__ import annotations

from typing import Any

from agl_events.chaos.checks import check
from agl_events.types import Attempt, Rollout, Span
from tests.store import make_span

K = 3  # spans per finished attempt


def _rollout(rid: str, status: str = "succeeded") -> Rollout:
    return Rollout(rollout_id=rid, input={}, start_time=1.0, status=status)


def _attempt(rid: str, n: int, status: str = "succeeded") -> Attempt:
    return Attempt(rollout_id=rid, attempt_id=f"{rid}-a{n}", sequence_id=n, start_time=1.0, status=status)


def _spans(rid: str, n: int, sequence_ids: list[int]) -> list[Span]:
    return [make_span(rid, f"{rid}-a{n}", seq) for seq in sequence_ids]


def _clean() -> dict[str, Any]:
    """Two rollouts: one straight through, one whose first attempt was killed after one span."""
    return {"enqueued": ["r1", "r2"], "rollouts": [_rollout("r1"), _rollout("r2")],
            "attempts": {"r1": [_attempt("r1", 1)], "r2": [_attempt("r2", 1, "unresponsive"), _attempt("r2", 2)]},
            "spans": {"r1": _spans("r1", 1, [1, 2, 3]), "r2": _spans("r2", 1, [1]) + _spans("r2", 2, [3, 4, 5])}}


def _check(history: dict[str, Any]) -> Any:
    return check(history["enqueued"], history["rollouts"], history["attempts"], history["spans"], K)


def test_a_clean_history_with_a_killed_attempt_passes() -> None:
    assert _check(_clean()).ok


def test_a_missing_rollout_or_span_of_a_succeeded_attempt_is_lost() -> None:
    history = _clean()
    history["enqueued"].append("r3")
    history["spans"]["r1"] = history["spans"]["r1"][:2]
    found = _check(history)
    assert len(found.lost) == 2 and "r3" in found.lost[0] and "2 of 3" in found.lost[1]


def test_twice_anything_is_duplicated() -> None:
    history = _clean()
    history["rollouts"].append(_rollout("r1"))
    history["attempts"]["r2"].append(_attempt("r2", 2))
    history["spans"]["r1"].append(history["spans"]["r1"][0])
    found = _check(history)
    assert any("r1 listed twice" in d for d in found.duplicated)
    assert any("attempt r2-a2 twice" in d for d in found.duplicated)
    assert any("span sequence id 1 twice" in d for d in found.duplicated)
    assert any("4 of 3" in d for d in found.duplicated)


def test_unfinished_rollouts_and_gaps_are_reported() -> None:
    history = _clean()
    history["rollouts"][0] = _rollout("r1", "running")
    history["spans"]["r2"] = _spans("r2", 1, [1]) + _spans("r2", 2, [3, 4, 6])
    history["attempts"]["r1"] = [_attempt("r1", 2)]
    found = _check(history)
    assert found.non_terminal == ["rollout r1 is running"]
    assert any("span sequence ids [3, 4, 6]" in g for g in found.gaps)
    assert any("attempt sequence ids [2]" in g for g in found.gaps)
