"""Producing tasks straight to the experiment's task-requests topic: no store needed.

The producer is the project's durable one (acks=all, idempotent), so a retried send never doubles a record;
the record key is the line's idempotency key, so even a file produced twice becomes each rollout once when the
store ingests it. Progress counts acknowledgements, not sends: a line counts once Kafka holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import orjson

from agl_events.log.clients import DeliveryReport, KafkaError, Message, Producer
from agl_events.produce.lines import ProduceReport, TaskLine, parse_lines

#: Report progress after this many lines, and while the last acknowledgements come in.
PROGRESS_EVERY = 500


def record_value(line: TaskLine) -> bytes:
    """The JSON record the store ingests: the request as validated, unset fields left out."""
    return orjson.dumps(line.request.model_dump(mode="json", exclude_none=True))


def produce_to_topic(producer: Producer, topic: str, lines: Iterable[str], key_field: str | None = None,
                     on_progress: Callable[[int, int], None] | None = None) -> ProduceReport:
    """Produce every valid line to `topic` and wait for each acknowledgement (or its final error).

    `on_progress(lines_read, acknowledged)` runs on this thread, as do the delivery callbacks (they are
    served by this function's poll and flush calls), so the report needs no lock.
    """
    report = ProduceReport()

    def delivered(number: int) -> DeliveryReport:
        def done(error: KafkaError | None, _: Message | None) -> None:
            if error is None:
                report.accepted += 1
            else:
                report.failed.append((number, error.str()))
        return done

    def progress() -> None:
        if on_progress is not None:
            on_progress(report.lines, report.accepted)

    for number, parsed in parse_lines(lines, key_field):
        report.lines = number
        if isinstance(parsed, str):
            report.rejected.append((number, parsed))
            continue
        while True:
            try:
                producer.produce(topic, value=record_value(parsed), key=parsed.key.encode(),
                                 on_delivery=delivered(number))
                break
            except BufferError:  # local queue full: let acknowledgements drain, then retry
                producer.poll(0.1)
        producer.poll(0)
        if number % PROGRESS_EVERY == 0:
            progress()
    while len(producer) > 0:  # every message ends acknowledged or failed (message.timeout.ms bounds it)
        producer.poll(0.1)
        progress()
    report.failed.sort()
    progress()
    return report
