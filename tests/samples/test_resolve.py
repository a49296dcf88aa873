"""resolve_adapter: the `--adapter` spec of the samples processor to a callable on a list of spans."""

from __future__ import annotations

import pytest

from agl_events.samples.resolve import resolve_adapter
from tests.samples import token_triplets


class CountingAdapter:
    """A class spec is instantiated with no arguments."""

    def __call__(self, spans: list) -> list:
        return []


def test_specs_name_functions_classes_and_instances() -> None:
    assert resolve_adapter("tests.samples:token_triplets") is token_triplets
    assert resolve_adapter("tests.samples.token_triplets") is token_triplets
    assert isinstance(resolve_adapter("tests.samples.test_resolve:CountingAdapter"), CountingAdapter)


@pytest.mark.parametrize(("spec", "why"), [
    ("token_triplets", "expected module:name"),
    ("tests.no_such_module:thing", "not found"),
    ("tests.samples:no_such_thing", "not found"),
    ("tests.samples:TOPIC", "not callable"),
])
def test_bad_specs_say_why(spec: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        resolve_adapter(spec)
