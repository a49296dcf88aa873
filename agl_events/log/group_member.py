"""A member of a consumer group that reads nothing: it is there for the partitions the group assigns it.

The store group (`store.membership`) is one: Kafka's group protocol decides which store owns which rollouts
partition, and describing the group tells every member who owns what. The member's partitions stay paused;
assignments are incremental (KIP-848, `group.protocol=consumer`).
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import TopicPartition

from agl_events.log.clients import Consumer, make_admin, make_consumer

#: Called with the partition numbers a rebalance moved, on the thread that called `poll`.
Moved = Callable[[set[int]], None]


class GroupMember:
    """Membership in `group` for one topic's partitions, under `client_id` (what describing the group shows).
    Not thread-safe: one thread polls it, and the callbacks run inside its polls."""

    def __init__(self, bootstrap: str, group: str, client_id: str) -> None:
        self._consumer = make_consumer(bootstrap, group, **{"client.id": client_id, "enable.partition.eof": False,
                                                            "group.protocol": "consumer"})
        self._admin = make_admin(bootstrap)
        self._group = group
        self._topic = ""

    def join(self, topic: str, on_assign: Moved, on_revoke: Moved, on_lost: Moved) -> None:
        """Ask for a share of `topic`'s partitions. `on_assign` runs once they are ours (paused); `on_revoke`
        before they are given up: the group moves them to another member only after it returns; `on_lost` when
        they were taken from us (our session expired), and then `on_revoke` too."""
        self._topic = topic

        def assigned(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            if not partitions:  # a heartbeat that moved nothing to us
                return
            consumer.incremental_assign(partitions)
            consumer.pause(partitions)
            on_assign({tp.partition for tp in partitions})

        def revoked(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            if not partitions:
                return
            on_revoke({tp.partition for tp in partitions})
            consumer.incremental_unassign(partitions)

        def lost(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            on_lost({tp.partition for tp in partitions})
            revoked(consumer, partitions)

        self._consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked, on_lost=lost)

    def poll(self, timeout: float) -> None:
        """Heartbeat and serve rebalances (the callbacks run here) for up to `timeout` seconds."""
        self._consumer.poll(timeout)

    def owners(self, timeout: float = 10.0) -> dict[int, str]:
        """Partition -> client id of the member that holds it, as the group coordinator describes it now.
        Raises what the admin client raises when the group cannot be described."""
        group = self._admin.describe_consumer_groups([self._group])[self._group].result(timeout)
        return {tp.partition: member.client_id for member in group.members
                for tp in (member.assignment.topic_partitions if member.assignment else [])
                if tp.topic == self._topic}

    def leave(self) -> None:
        """Leave the group (our partitions are revoked first, through `on_revoke`) and release the connection."""
        self._consumer.close()
