"""The two test tiers: a test that reaches the broker carries the `kafka` marker, so `-m "not kafka"` needs none.

The rule is read from each test's fixture closure: `bootstrap` is the one fixture that finds (or starts) the
broker, and every broker fixture (`experiment`, `settings`, the Kafka stores and servers) depends on it, so a
test reaches the broker through a fixture exactly when `bootstrap` is in its closure. A fixture that picks a
broker fixture at run time (`request.getfixturevalue("settings")`, as the `store` fixture's kafka param does)
is not in the closure: such params carry the marker themselves, and the `experiment` fixture checks the
running test's marker (`require_kafka_marker`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest

#: The fixture every broker fixture depends on.
BROKER_FIXTURE = "bootstrap"
MARKER = "kafka"


def needs_marker(fixturenames: Iterable[str], marked: bool) -> bool:
    """Whether a test with this fixture closure is missing the `kafka` marker."""
    return BROKER_FIXTURE in fixturenames and not marked


def unmarked_broker_tests(items: Sequence[pytest.Item]) -> list[str]:
    """Node ids of the collected tests that reach the broker through a fixture but lack the `kafka` marker."""
    return [item.nodeid for item in items
            if needs_marker(item.fixturenames if isinstance(item, pytest.Function) else (),
                            item.get_closest_marker(MARKER) is not None)]


def check_markers(items: Sequence[pytest.Item]) -> None:
    """Refuse the collection, naming the tests, when a broker test is not marked `kafka`."""
    unmarked = unmarked_broker_tests(items)
    if unmarked:
        raise pytest.UsageError(
            f"{len(unmarked)} test(s) use the broker (fixture `{BROKER_FIXTURE}`) without the `{MARKER}` marker; "
            "mark them (`pytestmark = pytest.mark.kafka`, `@pytest.mark.kafka` or "
            "`pytest.param(..., marks=pytest.mark.kafka)`):\n  " + "\n  ".join(unmarked))


def require_kafka_marker(item: pytest.Item) -> None:
    """Fail a running test that reached a broker fixture at run time without the `kafka` marker."""
    if item.get_closest_marker(MARKER) is None:
        pytest.fail(f"{item.nodeid} reaches the broker without the `{MARKER}` marker", pytrace=False)
