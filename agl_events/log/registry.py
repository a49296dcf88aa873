"""The codec of a deployment: single-object encoding, or schema ids from Confluent Schema Registry.

The codec itself (`events.codec`) knows nothing of Kafka's clients; the registry client is made here.
"""

from __future__ import annotations

from agl_events.events.codec import AvroCodec


class ConfluentRegistry:
    """`events.codec.SchemaRegistry` over confluent-kafka's client (it caches ids and schemas itself). Imported
    when a registry is configured: the client's module pulls in an HTTP stack nothing else needs."""

    def __init__(self, url: str) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self._client = SchemaRegistryClient({"url": url})

    def register_schema(self, subject_name: str, schema: str) -> int:
        from confluent_kafka.schema_registry import Schema

        return self._client.register_schema(subject_name, Schema(schema, "AVRO"))

    def get_schema(self, schema_id: int) -> str:
        return self._client.get_schema(schema_id).schema_str


def codec_for(registry_url: str | None) -> AvroCodec:
    """The codec for a deployment: single-object encoding, or the registry at `registry_url`."""
    return AvroCodec(registry=ConfluentRegistry(registry_url)) if registry_url else AvroCodec()
