"""A transactional producer for consume-transform-produce: records and a consumer group's offsets, one unit.

What a trainer needs to make a training step exactly-once (`samples.step_log`): the step's record and the
sample stream's consumer offsets become visible together or not at all. Kafka's transactions give that:
records produced inside one and the offsets sent with `send_offsets_to_transaction` are committed by one
`commit_transaction`; readers with `isolation.level=read_committed` (every consumer of ours,
`log.clients.consumer_config`) never see an aborted or still-open one, and the group's committed offsets
move only with the commit.

Fencing: one `transactional.id` per trainer role. `init_transactions` on a new producer with that id bumps
its epoch: a previous incarnation (a SIGKILLed trainer, or one that only looks dead) can no longer commit,
and the transaction it left open is aborted before `init_transactions` returns. Offsets are sent with the
consumer's group metadata (KIP-447), so the coordinator also refuses them from a consumer that left the
group's current generation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import TopicPartition

from agl_events.log.clients import LogError, error_text, make_producer
from agl_events.log.consumer import GroupConsumer
from agl_events.log.records import Position

log = logging.getLogger(__name__)

#: How long the broker keeps a transaction open before aborting it itself: a trainer that died mid-commit
#: and is not restarted blocks read_committed readers of the steps topic at most this long.
TRANSACTION_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class OutRecord:
    """A record to produce inside a transaction (already encoded)."""

    topic: str
    key: bytes
    value: bytes


class TransactionFailed(RuntimeError):
    """The transaction was aborted (or could not be): nothing of it is visible, the offsets did not move."""


class TransactionalWriter:
    """One transactional producer (`transactional_id`), initialised (and its predecessors fenced) at once."""

    def __init__(self, bootstrap: str, transactional_id: str, timeout: float = 30.0) -> None:
        self.transactional_id = transactional_id
        self._timeout = timeout
        self._producer = make_producer(bootstrap, transactional_id, **{
            "transactional.id": transactional_id, "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            "linger.ms": 0})
        self._producer.init_transactions(timeout)

    def commit(self, records: Sequence[OutRecord], offsets: Mapping[Position, int], consumer: GroupConsumer,
               before_commit: Callable[[], None] | None = None) -> None:
        """`records` produced and `consumer`'s group offsets (partition -> next offset) committed atomically.

        Raises `TransactionFailed` once the transaction is aborted; a fatal error (this producer fenced by a
        newer one) is raised as the log error it is. `before_commit` runs with everything sent but not yet
        committed (a test's crash point)."""
        producer = self._producer
        try:
            producer.begin_transaction()
            for record in records:
                producer.produce(record.topic, record.value, record.key)
            producer.send_offsets_to_transaction([TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                                                 consumer.group_metadata(), self._timeout)
            if before_commit is not None:
                before_commit()
            producer.commit_transaction(self._timeout)
        except LogError as exc:
            error = exc.args[0]
            if error.fatal() or not error.txn_requires_abort():
                raise
            log.warning("transaction of %s aborted: %s", self.transactional_id, error_text(exc))
            producer.abort_transaction(self._timeout)
            raise TransactionFailed(error_text(exc)) from exc

    def close(self) -> None:
        self._producer.flush(self._timeout)
