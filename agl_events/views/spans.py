"""A rollout's spans as the view keeps them, decoded only when read.

A span folded from the log is kept as its SpanAdded record's bytes (`reducers.spans.span_logged`, single-object
framing, so no registry is needed to read it back); a view written before that holds the span model itself.
Queries turn either into the span model here, and only the spans they look at: the store's reward figure reads
a finished attempt's last span, not its thousand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, overload

from agl_events.events.codec import AvroCodec
from agl_events.events.typed import span_model
from agl_events.reducers import keys

T = TypeVar("T")
U = TypeVar("U")


class StoredSpans(Sequence[T]):
    """Stored span values in sequence order, each decoded (`decode`) when it is read, every time it is read."""

    def __init__(self, stored: list[Any], decode: Callable[[Any], T]) -> None:
        self._stored = stored
        self._decode = decode

    def __len__(self) -> int:
        return len(self._stored)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self._decode(s) for s in self._stored[index]]
        return self._decode(self._stored[index])

    def __iter__(self) -> Iterator[T]:
        return map(self._decode, self._stored)

    def map(self, then: Callable[[T], U]) -> StoredSpans[U]:
        """These spans, each read as `then` of its decoding (still decoded only when read)."""
        decode = self._decode
        return StoredSpans(self._stored, lambda stored: then(decode(stored)))


def stored_spans(scan: Iterator[tuple[str, Any]], rollout_id: str, attempt_id: str | None) -> list[Any]:
    """The stored values of a scan of `keys.spans_of(rollout_id)`, of `attempt_id`'s spans only when given:
    the attempt is read from the key (`keys.span`), so other attempts' spans are not decoded."""
    if attempt_id is None:
        return [value for _, value in scan]
    skip = len(keys.spans_of(rollout_id)) + 17  # the 16-digit sequence id and its slash
    wanted = f"{attempt_id}/"
    return [value for key, value in scan if key.startswith(wanted, skip)]


def span_decoder(codec: AvroCodec) -> Callable[[Any], dict[str, Any]]:
    """The store's span model of a stored span value: bytes decoded with `codec`, a model as it is."""
    def decode(stored: Any) -> dict[str, Any]:
        return stored if isinstance(stored, dict) else span_model(codec.decode(stored).record["span"])

    return decode
