"""A share-group (KIP-932) member: records handed to one member at a time, each settled by the member.

A share group lets any number of members read one partition, so an idle member gets the next record while
another holds a slow one (the runners' task queue, `runner.tasks`). A record is locked to the member that
fetched it until the member settles it (`Outcome`) or the lock expires; `configure_share_group` sets where a
new group starts, how long a lock lasts and how many times a record may be handed out: every acquisition counts,
whether the record is then accepted, released or its lock expires, and past the limit the broker archives it for
good (an application that must not lose a record has to notice and write it again, as the store does for tasks).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import Enum

from confluent_kafka import AcknowledgeType, KafkaException, Message
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from agl_events.log.clients import make_admin, make_share_consumer
from agl_events.log.consumer import raw_of
from agl_events.log.records import RawRecord

log = logging.getLogger(__name__)


class Outcome(Enum):
    """How a member settles a record it was handed."""

    ACCEPT = AcknowledgeType.ACCEPT  # done with: nobody gets it again
    RELEASE = AcknowledgeType.RELEASE  # not taken: another member may have it now
    REJECT = AcknowledgeType.REJECT  # unusable: nobody gets it again, and it counts as failed


@dataclass(frozen=True)
class Acquired:
    """A record this member holds the lock of, until it settles it."""

    record: RawRecord
    #: The client's message, which settling it names; nothing to read from outside this module.
    handle: Message = field(repr=False, compare=False)


def configure_share_group(bootstrap: str, group: str, lock_ms: int, delivery_limit: int) -> None:
    """Start `group` at the log's beginning (a share group starts at its end by default: records written before
    the first member must count), lock fetched records for `lock_ms` and hand a record out at most
    `delivery_limit` times where the broker allows it (it refuses values outside
    `group.share.{min,max}.record.lock.duration.ms` and `group.share.{min,max}.delivery.count.limit`; the group
    then keeps the broker's default)."""
    admin = make_admin(bootstrap)

    def set_config(name: str, value: str) -> None:
        entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result()

    set_config("share.auto.offset.reset", "earliest")
    for name, value in (("share.record.lock.duration.ms", lock_ms), ("share.delivery.count.limit", delivery_limit)):
        try:
            set_config(name, str(value))
        except KafkaException as exc:
            log.warning("keeping the broker's %s for %s: %s", name, group, exc)


class ShareMember:
    """One member of share group `group`, settling records explicitly. `max_records`: the most one poll hands
    out. Thread-safe as confluent-kafka's share consumer is: one thread polls, settles and closes."""

    def __init__(self, bootstrap: str, group: str, max_records: int = 1, **overrides: object) -> None:
        self._consumer = make_share_consumer(bootstrap, group, **{
            "share.acknowledgement.mode": "explicit", "max.poll.records": max_records,
            "log_level": 3,  # the client warns that share consumers are a preview on every start
            **overrides})

    def subscribe(self, topic: str) -> None:
        self._consumer.subscribe([topic])

    def unsubscribe(self) -> None:
        """Leave the group: records this member fetched ahead go back to the others at once. The outcomes not
        sent yet are sent first: leaving drops them, and a record accepted here would be handed out again
        (one more delivery of a record already done with)."""
        self._consumer.commit_sync()
        self._consumer.unsubscribe()

    def poll(self, timeout: float) -> list[Acquired]:
        """The records handed to this member within `timeout` (errors are logged and skipped)."""
        acquired = []
        for msg in self._consumer.poll(timeout):
            if msg.error() is not None:
                log.warning("share group consumer error: %s", msg.error())
                continue
            acquired.append(Acquired(raw_of(msg), msg))
        return acquired

    def settle(self, acquired: Acquired, outcome: Outcome) -> bool:
        """Record the outcome; it reaches the broker with the next poll (a separate commit costs a round trip).
        False when the broker will not take it (the lock expired and the record went to another member)."""
        try:
            self._consumer.acknowledge(acquired.handle, outcome.value)
        except KafkaException as exc:
            log.info("acknowledgement refused (lock expired?): %s", exc)
            return False
        return True

    def close(self) -> None:
        """Send the outcomes not sent yet, then leave the group. The consumer is closed even when the broker
        refuses or cannot take the outcomes (they go back to others as the records' locks expire), so a runner
        shutting down beside a restarting broker still releases its connections and the rest of its cleanup."""
        try:
            self._consumer.commit_sync()
        finally:
            self._consumer.close()
