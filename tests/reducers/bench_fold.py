"""Fold speed of span events: `python -m tests.reducers.bench_fold [N]` prints records/s (not a test).

The fold is the view's hot path (every span a runner or the proxy writes is folded by every store and
processor), so a change to how reducers read events is measured here: N SpanAdded records, decoded by the
real codec as a reader gets them, folded through `reduce_explained` into a dict as `StoreView._fold` does.
Also times the writing side: a span dict to the SpanAdded record the codec encodes, as the store and the
tracer build it (Avro encoding itself is not timed: typed events do not change it).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from agl_events.events.codec import AvroCodec
from agl_events.events.typed import SpanAdded
from agl_events.reducers import reduce_explained
from tests.store import make_span

ATTRIBUTES = {"gen_ai.system": "openai", "gen_ai.request.model": "qwen", "gen_ai.usage.prompt_tokens": 120,
              "gen_ai.usage.completion_tokens": 48, "agentlightning.operation.input": '{"a": 1}',
              "gen_ai.response.finish_reasons": ["stop"]}


def spans(n: int) -> list[dict[str, Any]]:
    return [{**make_span(f"ro-{i % 500}", f"at-{i % 500}", i // 500 + 1).model_dump(), "attributes": ATTRIBUTES}
            for i in range(n)]


def built(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [SpanAdded.of(span).stamp(1.0, "bench").to_record() for span in batch]


def fold(records: list[dict[str, Any]]) -> float:
    view: dict[str, Any] = {}

    def read(key: str) -> Any:
        return view.get(key)

    start = time.process_time()
    for record in records:
        view.update(reduce_explained(read, "SpanAdded", record).changes)
    return time.process_time() - start


def main(n: int) -> None:
    codec = AvroCodec()
    batch = spans(n)
    start = time.process_time()
    new = built(batch)
    build_s = time.process_time() - start
    records = [codec.decode(codec.encode("SpanAdded", record)).record for record in new]
    best = min(fold(records) for _ in range(5))
    print(f"fold: {n} SpanAdded records in {best:.3f}s = {n / best:,.0f} records/s (best of 5, CPU time)")
    print(f"build: {n} spans -> SpanAdded records in {build_s:.3f}s = {n / build_s:,.0f} spans/s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
