"""Pure parts of a cut: the time and duration values the replay commands take."""

from __future__ import annotations

import pytest

from agl_events.replay.cut import Cut, parse_duration, parse_time


@pytest.mark.parametrize(("text", "seconds"), [("3600", 3600), ("90s", 90), ("30m", 1800), ("12h", 43200),
                                               ("7d", 604800), ("2w", 1209600), ("0.5h", 1800)])
def test_durations_are_seconds_or_a_number_with_a_unit(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "a week", "7y", "d", "-1h"])
def test_a_bad_duration_says_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match=r"not a duration|is negative"):
        parse_duration(text)


def test_times_are_epoch_seconds_or_iso_8601_in_utc_unless_it_says() -> None:
    assert parse_time("1700000000.5") == 1700000000.5
    assert parse_time("2026-12-05T10:30:00") == parse_time("2026-12-05T11:30:00+01:00") == 1796466600.0
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_time("yesterday")


def test_a_cut_keeps_topic_names_with_dots_and_slashes_apart_from_the_partition() -> None:
    cut = Cut.of({("agl.exp.spans", 5): 7, ("agl.a/b.rollouts", 0): 3}, "given")
    assert cut.positions == {("agl.exp.spans", 5): 7, ("agl.a/b.rollouts", 0): 3}
    assert cut.total == 10
