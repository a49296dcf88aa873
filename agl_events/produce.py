"""Producing tasks in bulk: JSON lines in, rollouts enqueued through the store, bad lines reported.

Each line is one object shaped as Agent Lightning's enqueue request: `input`, and optionally `mode`,
`resources_id`, `config` (a RolloutConfig) and `metadata`. Valid lines are enqueued in batches (one
store call and one Kafka append per batch); a bad line never stops the good ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from agl_events.events.task_request import InvalidTaskRequest, TaskRequest, parse_json
from agl_events.server.client import StoreClient
from agl_events.types import EnqueueRolloutRequest, Rollout


@dataclass
class ProduceReport:
    lines: int = 0
    enqueued: list[Rollout] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)


def parse_lines(lines: Iterable[str]) -> Iterator[tuple[int, TaskRequest | str]]:
    """(line number, request) for each non-blank line, or (line number, why it was rejected)."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, parse_json(line)
        except InvalidTaskRequest as exc:
            yield number, str(exc)


async def produce_tasks(client: StoreClient, lines: Iterable[str], batch_size: int = 500,
                        on_progress: Callable[[int, int], None] | None = None) -> ProduceReport:
    """Enqueue every valid line, `batch_size` at a time; `on_progress(lines_done, enqueued)` after each batch."""
    report = ProduceReport()
    batch: list[EnqueueRolloutRequest] = []

    async def flush() -> None:
        if batch:
            report.enqueued.extend(await client.enqueue_many(batch))
            batch.clear()
        if on_progress is not None:
            on_progress(report.lines, len(report.enqueued))

    for number, parsed in parse_lines(lines):
        report.lines = number
        if isinstance(parsed, str):
            report.rejected.append((number, parsed))
            continue
        batch.append(EnqueueRolloutRequest.model_validate(parsed.model_dump()))
        if len(batch) >= batch_size:
            await flush()
    await flush()
    return report
