"""How many bytes each partition takes on the brokers: Kafka's DescribeLogDirs request (API key 35, KIP-113).

confluent-kafka 2.16 has no `describe_log_dirs` (librdkafka's DescribeLogDirs is a pull request not merged as of
mid-2026), so the request is sent with aiokafka's protocol layer: aiokafka is installed with faust-streaming and
already reads our topics there. Version 1 of the request, the oldest a Kafka 4 broker still answers, has the
fields needed (partition size in bytes); aiokafka picks it only if the broker supports it. Any failure (an older
or newer protocol range, no permission, a broker down) means "size unknown", never an error: sizes are a figure
shown to people, nothing decides on them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaError
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import Array, Boolean, Int16, Int32, Int64, Schema, String

from agl_events.log.kafka_config import aiokafka_security, connection_config
from agl_events.log.records import Position

log = logging.getLogger(__name__)


class _DescribeLogDirsResponse_v1(Response):
    API_KEY = 35
    API_VERSION = 1
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("log_dirs", Array(
            ("error_code", Int16),
            ("log_dir", String("utf-8")),
            ("topics", Array(
                ("name", String("utf-8")),
                ("partitions", Array(
                    ("partition_index", Int32),
                    ("partition_size", Int64),
                    ("offset_lag", Int64),
                    ("is_future_key", Boolean),
                )),
            )),
        )),
    )


class _DescribeLogDirsRequest_v1(RequestStruct):
    API_KEY = 35
    API_VERSION = 1
    RESPONSE_TYPE = _DescribeLogDirsResponse_v1
    SCHEMA = Schema(("topics", Array(("topic", String("utf-8")), ("partitions", Array(Int32)))))


class _DescribeLogDirs(Request[_DescribeLogDirsRequest_v1]):
    API_KEY = 35

    def __init__(self, topics: list[tuple[str, list[int]]]) -> None:
        self.topics = topics

    def build(self, request_struct_class: type[_DescribeLogDirsRequest_v1]) -> _DescribeLogDirsRequest_v1:
        return request_struct_class(self.topics)


def partition_sizes(bootstrap: str, partitions: Iterable[Position], timeout: float = 10.0) -> dict[Position, int]:
    """Bytes of each of `partitions` in the brokers' log directories (segments, not indexes), or {} when the
    cluster does not say. A replicated partition counts once: its largest replica (replication multiplies what
    the disks hold). Blocking: runs its own event loop."""
    wanted: dict[str, list[int]] = {}
    for topic, partition in partitions:
        wanted.setdefault(topic, []).append(partition)
    if not wanted:
        return {}
    try:
        return asyncio.run(asyncio.wait_for(_ask_every_broker(bootstrap, sorted(wanted.items()), timeout), timeout))
    except (KafkaError, OSError, TimeoutError, NotImplementedError) as exc:  # NotImplementedError: no usable version
        log.warning("partition sizes unknown: DescribeLogDirs failed on %s: %r", bootstrap, exc)
        return {}


async def _ask_every_broker(bootstrap: str, topics: list[tuple[str, list[int]]], timeout: float
                            ) -> dict[Position, int]:
    """Each broker reports the replicas it holds; a partition's size is its largest replica's."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000),
                            **aiokafka_security(connection_config()))
    try:
        await client.bootstrap()
        sizes: dict[Position, int] = {}
        for broker in client.cluster.brokers():
            response = await client.send(broker.nodeId, _DescribeLogDirs(topics))
            for position, size in _replica_sizes(response.to_object()):
                sizes[position] = max(size, sizes.get(position, 0))
        return sizes
    finally:
        await client.close()


def _replica_sizes(response: dict[str, Any]) -> list[tuple[Position, int]]:
    """(partition, bytes) of every current replica in a response; a log dir that reports an error (offline)
    holds nothing readable, and a future replica (being moved between dirs) is a copy, not more data."""
    return [((topic["name"], part["partition_index"]), part["partition_size"])
            for log_dir in response["log_dirs"] if log_dir["error_code"] == 0
            for topic in log_dir["topics"]
            for part in topic["partitions"] if not part["is_future_key"]]
