"""The codec of a deployment: single-object encoding, or schema ids from Confluent Schema Registry.

The codec itself (`events.codec`) knows nothing of Kafka's clients; the registry client is made here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from agl_events.events.codec import AvroCodec

#: Confluent's compatibility levels that `log.subjects` can also judge with our own check (`events.compat`).
COMPATIBILITY_LEVELS = ("BACKWARD", "FORWARD", "FULL", "NONE")
_NOT_FOUND = 404


class RegistryRequestError(RuntimeError):
    """A request to the registry failed (unreachable, refused, an error answer); the message names the registry."""


class ConfluentRegistry:
    """`events.codec.SchemaRegistry` over confluent-kafka's client (it caches ids and schemas itself), plus what
    `agl-events schemas register` asks of a registry. Imported when a registry is configured: the client's
    module pulls in an HTTP stack nothing else needs."""

    def __init__(self, url: str) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.url = url
        # A latest version is read anew each time (the client would otherwise keep the first it read forever).
        self._client = SchemaRegistryClient({"url": url, "cache.latest.ttl.sec": 0})

    @contextlib.contextmanager
    def _request(self, what: str) -> Iterator[None]:
        """Any failure of the client (an HTTP error, a connection refused) as one RegistryRequestError."""
        try:
            yield
        except Exception as exc:
            raise RegistryRequestError(f"schema registry {self.url}: {what} failed: {exc}") from exc

    def register_schema(self, subject_name: str, schema: str) -> int:
        from confluent_kafka.schema_registry import Schema

        with self._request(f"registering a schema under {subject_name}"):
            return self._client.register_schema(subject_name, Schema(schema, "AVRO"))

    def get_schema(self, schema_id: int) -> str:
        with self._request(f"reading schema id {schema_id}"):
            return self._client.get_schema(schema_id).schema_str

    def latest(self, subject_name: str) -> tuple[int, str] | None:
        """(id, schema) of the subject's latest version; None for a subject with none."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        with self._request(f"reading the latest version of {subject_name}"):
            try:
                registered = self._client.get_latest_version(subject_name)
            except SchemaRegistryError as exc:
                if exc.http_status_code == _NOT_FOUND:
                    return None
                raise
            return registered.schema_id, registered.schema.schema_str

    def set_compatibility(self, subject_name: str, level: str) -> None:
        """The subject's compatibility level (one of `COMPATIBILITY_LEVELS`), set before its first version too."""
        from confluent_kafka.schema_registry import ConfigCompatibilityLevel, ServerConfig

        with self._request(f"setting {subject_name}'s compatibility"):
            self._client.set_config(subject_name, ServerConfig(compatibility=ConfigCompatibilityLevel(level)))

    def is_compatible(self, subject_name: str, schema: str) -> bool:
        """The registry's verdict on `schema` as the subject's next version, under the subject's level."""
        from confluent_kafka.schema_registry import Schema

        with self._request(f"testing a schema's compatibility under {subject_name}"):
            return bool(self._client.test_compatibility(subject_name, Schema(schema, "AVRO")))

    def subjects(self) -> list[str]:
        with self._request("listing subjects"):
            return list(self._client.get_subjects())


def codec_for(registry_url: str | None) -> AvroCodec:
    """The codec for a deployment: single-object encoding, or the registry at `registry_url`."""
    return AvroCodec(registry=ConfluentRegistry(registry_url)) if registry_url else AvroCodec()
