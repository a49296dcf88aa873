"""Fresh ids for rollouts, attempts and resources: random, so no two deciders can draw the same one."""

from __future__ import annotations

import hashlib
import uuid


def _hex_id(length: int) -> str:
    return hashlib.sha1(uuid.uuid4().bytes).hexdigest()[:length]


def new_rollout_id() -> str:
    return f"ro-{_hex_id(12)}"


def new_attempt_id() -> str:
    return f"at-{_hex_id(8)}"


def new_resources_id() -> str:
    return f"rs-{_hex_id(12)}"
