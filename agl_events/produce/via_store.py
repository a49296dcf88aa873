"""Producing tasks through the store's HTTP API (`produce tasks --via-store`): one store call per batch.

The store decides and appends each batch at once, so the rollouts exist when the call returns; lines are not
keyed here (the enqueue API has no idempotency key), so producing a file twice enqueues it twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from agl_events.produce.lines import ProduceReport, parse_lines
from agl_events.server.client import StoreClient
from agl_events.types import EnqueueRolloutRequest


async def produce_via_store(client: StoreClient, lines: Iterable[str], batch_size: int = 500,
                            on_progress: Callable[[int, int], None] | None = None) -> ProduceReport:
    """Enqueue every valid line, `batch_size` at a time; `on_progress(lines_done, enqueued)` after each batch."""
    report = ProduceReport()
    batch: list[EnqueueRolloutRequest] = []

    async def flush() -> None:
        if batch:
            report.accepted += len(await client.enqueue_many(batch))
            batch.clear()
        if on_progress is not None:
            on_progress(report.lines, report.accepted)

    for number, parsed in parse_lines(lines):
        report.lines = number
        if isinstance(parsed, str):
            report.rejected.append((number, parsed))
            continue
        batch.append(EnqueueRolloutRequest.model_validate(parsed.request.model_dump()))
        if len(batch) >= batch_size:
            await flush()
    await flush()
    return report
