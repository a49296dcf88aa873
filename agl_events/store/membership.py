"""The store group: store processes of one experiment share the rollouts topic's partitions as a consumer group.

Kafka's group protocol is the arbiter (`store.ownership` says what owning means): each member's `client.id`
is the URL other stores reach it at, so describing the group tells every member who owns what. The member
reads nothing (its partitions stay paused); it is there for the assignment. The group uses Kafka 4's consumer
protocol (KIP-848, `group.protocol=consumer`): the coordinator assigns partitions in its answer to a member's
heartbeat, so a store alone in its group owns every partition one round trip after it joins (tens of
milliseconds), where the classic protocol first waits out the broker's `group.initial.rebalance.delay.ms`
(3 s by default) for more members, and a new experiment's first call waited with it. Hand-overs are
incremental and keep the rule that nothing is decided twice:
- on revoke (a store joins or leaves) the store stops deciding for the revoked partitions and waits until
  every command it took is durable (`release`); the coordinator gives them to another member only once this
  member has acknowledged the revocation (its next heartbeat after the callback returned);
- on assign the store catches its view up with the end of the log before it decides (`acquire`): whatever
  the previous owner wrote, drained or acknowledged before it died, is folded first, so nothing is decided
  twice or on stale state.
A killed store's partitions move once the broker's `group.consumer.session.timeout.ms` passes (45 s by default,
the local broker sets 6 s); members heartbeat every `group.consumer.heartbeat.interval.ms` (5 s by default,
1 s on the local broker), which bounds how long a join or a leave takes to move partitions.
The callbacks run on this module's poll thread and block it while the event loop does the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable

from agl_events.log.group_member import GroupMember
from agl_events.store.ownership import Ownership

log = logging.getLogger(__name__)

POLL_SECONDS = 0.2
#: How often members re-read who owns what, besides after every rebalance and whenever a forward failed.
DESCRIBE_SECONDS = 5.0
#: ... and this often while some partition has no owner in the last description: partitions move one member at
#: a time (revoked here, assigned there a heartbeat later), so a description made between the two is partial.
SETTLING_DESCRIBE_SECONDS = 0.5
#: A release waits for in-flight commits; an acquire for the catch-up (a long history can take minutes).
RELEASE_TIMEOUT_SECONDS = 60.0
ACQUIRE_TIMEOUT_SECONDS = 600.0
#: How long leaving the group may take on close (a release drains in-flight commits): a shutdown must end,
#: within the server's bound on closing a store (`server.experiments.CLOSE_TIMEOUT_SECONDS`).
LEAVE_TIMEOUT_SECONDS = 3.0

Handover = Callable[[set[int]], Awaitable[None]]


def group_id(experiment: str) -> str:
    return f"agl-events-store-owners.{experiment}"


class StoreGroup:
    """This store's membership in its experiment's store group, on a thread of its own."""

    def __init__(self, bootstrap: str, experiment: str, topic: str, ownership: Ownership,
                 acquire: Handover, release: Handover) -> None:
        self._member = GroupMember(bootstrap, group_id(experiment), ownership.own_url)
        self._topic = topic
        self._ownership = ownership
        self._acquire = acquire
        self._release = release
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._left: asyncio.Future[None] | None = None
        self._stopping = threading.Event()
        self._describe_now = threading.Event()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._left = self._loop.create_future()
        self._member.join(self._topic, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
        self._thread = threading.Thread(target=self._run, name="agl-store-group", daemon=True)
        self._thread.start()

    def refresh(self) -> None:
        """Describe the group again soon: a forward found its owner gone or not owning."""
        self._describe_now.set()

    def _run(self) -> None:
        try:
            next_describe = 0.0
            while not self._stopping.is_set():
                self._member.poll(POLL_SECONDS)
                if time.monotonic() >= next_describe or self._describe_now.is_set():
                    self._describe_now.clear()
                    settled = self._describe()
                    next_describe = time.monotonic() + (DESCRIBE_SECONDS if settled else SETTLING_DESCRIBE_SECONDS)
            self._member.leave()  # revokes (and releases) our partitions first
        finally:
            self._tell_loop(self._has_left)

    def _has_left(self) -> None:
        if self._left is not None and not self._left.done():
            self._left.set_result(None)

    def _describe(self) -> bool:
        """Learn who owns what; whether every partition has an owner."""
        try:
            owners = self._member.owners()
        except Exception as exc:  # the next describe tries again; forwards wait meanwhile
            log.warning("describing the store group failed: %s", exc)
            return False
        self._on_loop(self._learn(owners), 10.0)
        return len(owners) == self._ownership.partitions

    async def _learn(self, owners: dict[int, str]) -> None:
        self._ownership.learn(owners)

    def _on_assign(self, taken: set[int]) -> None:
        log.info("store %s takes partitions %s", self._ownership.own_url, sorted(taken))
        self._on_loop(self._acquire(taken), ACQUIRE_TIMEOUT_SECONDS)
        self._describe_now.set()

    def _on_revoke(self, given: set[int]) -> None:
        """Acknowledged (the partitions free for another member) only after this returns: drained first."""
        log.info("store %s hands over partitions %s", self._ownership.own_url, sorted(given))
        self._on_loop(self._release(given), RELEASE_TIMEOUT_SECONDS)
        self._describe_now.set()

    def _on_lost(self, lost: set[int]) -> None:
        """Fenced (our session expired): another member may own them already; stop deciding for them at once
        (the member calls `_on_revoke` next)."""
        log.warning("store %s lost partitions %s", self._ownership.own_url, sorted(lost))

    def _tell_loop(self, callback: Callable[[], None]) -> None:
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # a closed loop waits for nothing
            self._loop.call_soon_threadsafe(callback)

    def _on_loop(self, work: Awaitable[None], timeout: float) -> None:
        assert self._loop is not None
        if self._loop.is_closed():
            return
        future = asyncio.run_coroutine_threadsafe(work, self._loop)  # type: ignore[arg-type]
        try:
            future.result(timeout)
        except Exception:
            log.exception("store group handover failed")

    async def leave(self) -> None:
        """Leave the group: our partitions are released (drained) and revoked. Bounded by LEAVE_TIMEOUT_SECONDS,
        after which the store closes anyway: the thread is a daemon, and the group hands our partitions on
        once our session expires, as after a crash."""
        self._stopping.set()
        if self._left is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._left), LEAVE_TIMEOUT_SECONDS)
        except TimeoutError:
            log.warning("store %s did not leave its store group within %.0f s; closing anyway",
                        self._ownership.own_url, LEAVE_TIMEOUT_SECONDS)
