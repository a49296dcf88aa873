"""Span events: spans in sequence order, first write wins per span id, and the rollout's sequence counter."""

from __future__ import annotations

from agl_events.events.typed import SpanAdded, SpanSequenceReserved
from agl_events.log.records import LoggedEvent
from agl_events.reducers import keys
from agl_events.types import Span
from tests.reducers import View, changes_of, fold, logged
from tests.store import make_span


def added(span: Span) -> LoggedEvent:
    return logged(SpanAdded.of(span.model_dump(mode="json")))


def reserved(rid: str, seq: int) -> LoggedEvent:
    return logged(SpanSequenceReserved(rollout_id=rid, attempt_id="at-1", sequence_id=seq))


def spans_of(view: View, rid: str) -> list[Span]:
    return [Span.model_validate(view[k]) for k in sorted(view) if k.startswith(keys.spans_of(rid))]


def test_an_added_span_is_stored_whole_indexed_counted_and_bumps_the_counter() -> None:
    span = make_span("ro-a", "at-1", 3, span_id="s1", custom_field=[1, 2])
    view = fold([added(span)])
    assert spans_of(view, "ro-a") == [span]  # every field, extra ones included, survives the fold
    assert view[keys.span_seen("ro-a", "at-1", "s1")] == keys.span("ro-a", 3, "at-1", "s1")
    assert view[keys.span_counter("ro-a")] == 3
    assert view[keys.count("spans")] == 1


def test_spans_scan_in_sequence_order_and_apart_from_other_rollouts() -> None:
    view = fold([added(make_span("ro-a", "at-1", seq, span_id=f"s{seq}")) for seq in (9, 10, 2)]
                + [added(make_span("ro-ab", "at-1", 1))])
    assert [s.sequence_id for s in spans_of(view, "ro-a")] == [2, 9, 10]


def test_the_first_span_with_an_id_wins_within_its_attempt() -> None:
    view = fold([added(make_span("ro-a", "at-1", 1, span_id="s1", name="first"))])
    again = added(make_span("ro-a", "at-1", 7, span_id="s1", name="second"))
    assert changes_of(view, again) == {}  # not stored, not counted, and the counter stays at 1
    view = fold([added(make_span("ro-a", "at-2", 2, span_id="s1", name="other attempt"))], view)
    assert [s.name for s in spans_of(view, "ro-a")] == ["first", "other attempt"]
    assert view[keys.count("spans")] == 2


def test_the_sequence_counter_only_goes_up() -> None:
    view = fold([reserved("ro-a", 10), added(make_span("ro-a", "at-1", 3)), reserved("ro-a", 4)])
    assert view[keys.span_counter("ro-a")] == 10
    view = fold([added(make_span("ro-a", "at-1", 12))], view)
    assert view[keys.span_counter("ro-a")] == 12


def test_a_reservation_alone_changes_only_the_counter() -> None:
    assert changes_of({}, reserved("ro-a", 5)) == {keys.span_counter("ro-a"): 5}
