"""Kafka ACLs as plain data (`Grant`), written through the AdminClient.

What each of our processes may do on a secured cluster is listed as grants (`broker.secure.role_grants`, and
docs/security.md for operators); this module is where they meet confluent-kafka's `AclBinding`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

Resource = Literal["topic", "group", "transactional_id", "cluster"]
Operation = Literal["read", "write", "create", "delete", "alter", "describe", "describe_configs", "alter_configs"]

_RESOURCE_TYPES = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP,
                   "transactional_id": ResourceType.TRANSACTIONAL_ID, "cluster": ResourceType.BROKER}


@dataclass(frozen=True)
class Grant:
    """Allow `operations` on the `resource` named `name` (every name starting with it when `prefixed`)."""

    resource: Resource
    name: str
    operations: tuple[Operation, ...]
    prefixed: bool = True


def bindings(principal: str, grants: Iterable[Grant]) -> list[AclBinding]:
    """The ACL bindings that allow `principal` (`User:<name>`) `grants`, from any host."""
    found = []
    for grant in grants:
        name = "kafka-cluster" if grant.resource == "cluster" else grant.name
        pattern = ResourcePatternType.PREFIXED if grant.prefixed and grant.resource != "cluster" \
            else ResourcePatternType.LITERAL
        found += [AclBinding(_RESOURCE_TYPES[grant.resource], name, pattern, principal, "*",
                             AclOperation[operation.upper()], AclPermissionType.ALLOW)
                  for operation in grant.operations]
    return found


def create_acls(admin: AdminClient, principal: str, grants: Iterable[Grant], timeout: float = 30.0) -> int:
    """Write the ACLs allowing `principal` `grants`; returns how many bindings were written."""
    wanted = list(dict.fromkeys(bindings(principal, grants)))  # roles overlap (a trainer's is several)
    if wanted:
        for future in admin.create_acls(wanted, request_timeout=timeout).values():
            future.result()
    return len(wanted)
