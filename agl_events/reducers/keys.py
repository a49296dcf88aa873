"""The key space of the store's view. One flat, ordered key-value space (RocksDB or a dict).

Keys sort so that prefix scans return what queries need in order: a rollout's attempts by sequence
id, its spans by span sequence id, the queue by queue position.
"""

from __future__ import annotations


def rollout(rid: str) -> str:
    return f"r/{rid}"


def attempt(rid: str, seq: int) -> str:
    return f"a/{rid}/{seq:010d}"


def attempts_of(rid: str) -> str:
    return f"a/{rid}/"


def attempt_index(rid: str, aid: str) -> str:
    return f"ai/{rid}/{aid}"


def span(rid: str, seq: int, aid: str, sid: str) -> str:
    return f"s/{rid}/{seq:016d}/{aid}/{sid}"


def spans_of(rid: str) -> str:
    return f"s/{rid}/"


def span_seen(rid: str, aid: str, sid: str) -> str:
    return f"sd/{rid}/{aid}/{sid}"


def span_counter(rid: str) -> str:
    return f"sc/{rid}"


def queue_entry(queue_seq: int) -> str:
    return f"q/{queue_seq:016d}"


def queued(rid: str) -> str:
    return f"qm/{rid}"


def active(rid: str) -> str:
    """Present while the rollout is preparing or running: what the watchdog has to look at."""
    return f"x/{rid}"


def task_key(key: str) -> str:
    """An ingested task request's idempotency key -> the rollout it became."""
    return f"tk/{key}"


def resources(resources_id: str) -> str:
    return f"res/{resources_id}"


def prompt_candidate(run_id: str, candidate_id: str) -> str:
    """One candidate of a prompt optimization run (APO)."""
    return f"pc/{run_id}/{candidate_id}"


def worker(wid: str) -> str:
    return f"w/{wid}"


def count(entity: str) -> str:
    return f"n/{entity}"


def partition_count(entity: str, topic: str, partition: int) -> str:
    """How many of `entity` the events of one log partition created (a store group sums its owners')."""
    return f"{PARTITION_COUNTS}{entity}/{topic}/{partition}"


PARTITION_COUNTS = "np/"


ROLLOUTS = "r/"
SPANS = "s/"
ACTIVE = "x/"
QUEUE = "q/"
RESOURCES = "res/"
PROMPT_CANDIDATES = "pc/"
WORKERS = "w/"
LATEST_RESOURCES = "meta/latest_resources"
QUEUE_SEQ = "meta/queue_seq"
POSITIONS = "meta/pos/"
#: What a replayed view is a fold of (experiment, cut, snapshot): written by `agl_events.replay.rebuild`.
REPLAY = "meta/replay"
