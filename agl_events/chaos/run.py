"""A chaos run: a deployment on a broker (or a local cluster) of its own, a workload through it, SIGKILLs and a
broker restart along the way (on a cluster: SIGKILLs of the busiest partitions' leader and a rolling restart,
`chaos.cluster`), then the checks (`chaos.checks`), a rebuild from the log and the processor's views compared with
it.

The deployment is what `agl-events up` runs, under its supervisor: `agl-events store`, one `agl-events
processor` worker and `agl-events runner` commands, each started again after its backoff on the same folders
(a killed one as a crashed one), and a single-node broker of the run's own (stopped cleanly and started again
once: its ports and files are the run's, so the user's broker is never touched). Rollouts retry an attempt
that went unresponsive (its runner was killed) or failed (its store went away mid-call), up to `max_attempts`.

Kills and restarts are spread over the workload by progress, each fed rollouts of its own so that it lands
while rollouts run (`chaos.plan`).

On a cluster, a run without process kills must also show its clients nothing: no failed call of the run's own
(enqueue, progress), no attempt that did not succeed (an agent's or runner's error), as Kafka's replication
promises for the loss of a minority of its nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, Field, model_validator

from agl_events.broker.cluster import LocalCluster, free_cluster_ports
from agl_events.broker.local import local_cluster
from agl_events.chaos.agent import SPANS_PER_ATTEMPT
from agl_events.chaos.checks import TERMINAL, Findings, check
from agl_events.chaos.cluster import Failover, kill_busiest_leader, rolling_restart
from agl_events.chaos.deployment import Deployment
from agl_events.chaos.plan import Step, plan
from agl_events.config import Settings
from agl_events.log.admin import create_topics
from agl_events.log.clients import make_admin
from agl_events.processors.partition_views import summed_counts
from agl_events.reducers import keys
from agl_events.replay.digest import Digest, digest
from agl_events.replay.rebuild import rebuild
from agl_events.server.client import StoreClient
from agl_events.store.readonly import ReadOnlyStore
from agl_events.topics import LAYOUT
from agl_events.views.rocks import RocksKV

#: Seconds without a heartbeat or span after which the store's watchdog declares an attempt unresponsive: on one
#: broker short, so that an attempt whose runner was killed is retried soon ...
UNRESPONSIVE_SECONDS = 3.0
#: ... on a cluster longer than a leader's failover (10-16 s measured on a loaded 2-core machine), during which
#: live attempts' heartbeats and spans wait: with 3 s the 8,000-rollout run retried a rollout that was running.
CLUSTER_UNRESPONSIVE_SECONDS = 30.0
#: Rollouts per enqueue call.
ENQUEUE_BATCH = 50
Say = Callable[[str], None]


class ChaosConfig(BaseModel):
    """What a run does."""

    rollouts: int = Field(300, ge=1)
    runners: int = Field(3, ge=1)
    stores: int = Field(1, ge=1, description="store processes, one store group: a store kill SIGKILLs one member")
    kills: int = Field(5, ge=0)
    broker_restarts: int = Field(1, ge=0, le=1, description="stop and start the single broker once")
    brokers: int = Field(1, ge=1, description="nodes of the run's local cluster")
    leader_kills: int = Field(0, ge=0, description="SIGKILLs of the busiest partitions' leader (a cluster's)")
    rolling_restart: bool = Field(False, description="restart every node of the cluster in turn, once")
    step_seconds: float = Field(0.05, ge=0, description="seconds each of the agent's traced steps takes")
    max_attempts: int = Field(6, ge=1)
    seed: int = 0
    timeout: float = Field(900.0, gt=0, description="seconds to wait for every rollout to finish")
    home: Path = Field(description="the run's folder: broker files, views, logs (deleted at the start)")

    @model_validator(mode="after")
    def _fits_the_cluster(self) -> ChaosConfig:
        if self.brokers == 1 and (self.leader_kills or self.rolling_restart):
            raise ValueError("leader kills and a rolling restart need a cluster (brokers > 1)")
        if self.brokers > 1 and self.broker_restarts:
            raise ValueError("a cluster is restarted node by node (rolling_restart), not whole (broker_restarts)")
        return self

    @property
    def unresponsive_seconds(self) -> float:
        return CLUSTER_UNRESPONSIVE_SECONDS if self.brokers > 1 else UNRESPONSIVE_SECONDS

    @property
    def clients_must_see_nothing(self) -> bool:
        """On a cluster, with no process killed, nothing may surface to API callers or agents."""
        return self.brokers > 1 and self.kills == 0


class ChaosReport(BaseModel):
    """What a run did and found; the first fields, to `seconds`, are the JSON last line's."""

    rollouts: int
    stores: int
    kills: int
    broker_restarts: int
    brokers: int
    leader_kills: int
    rolling_restarts: int
    lost: int
    duplicated: int
    non_terminal: int
    gaps: int
    client_errors: int
    failover_max_seconds: float | None
    seconds: float
    failovers: list[Failover]
    rolling_restart_seconds: float | None
    api_errors: int
    attempts_not_succeeded: int
    clients_must_see_nothing: bool
    kills_by_target: dict[str, int]
    restarts_after_crash: dict[str, int]
    statuses: dict[str, int]
    attempts: int
    spans: int
    rebuild_equal: bool
    processor_equal: bool
    problems: list[str]

    @property
    def ok(self) -> bool:
        clients = self.client_errors == 0 or not self.clients_must_see_nothing
        return (self.lost, self.duplicated, self.non_terminal, self.gaps) == (0, 0, 0, 0) and self.rebuild_equal \
            and self.processor_equal and clients

    def summary(self) -> dict[str, Any]:
        names = list(ChaosReport.model_fields)
        return self.model_dump(include=set(names[:names.index("seconds") + 1]))


def _stamped(say: Say, started: float) -> Say:
    return lambda line: say(f"{time.monotonic() - started:6.1f} s  {line}")


def _finished(store_urls: Sequence[str]) -> int | None:
    """How many rollouts are terminal now, as the first store that answers counts them (any member's count is the
    group's: `query_rollouts` fans out), or None while none answers."""
    for url in store_urls:
        try:
            response = httpx.get(f"{url}/v1/agl/rollouts", timeout=10,
                                 params=[("status_in", s) for s in sorted(TERMINAL)] + [("limit", "1")])
            if response.status_code == 200:
                return int(response.json()["total"])
        except (httpx.HTTPError, ValueError, KeyError):
            continue
    return None


def enqueue(store_urls: Sequence[str], config: ChaosConfig, rollouts: range, into: list[str]) -> None:
    """Enqueue these rollouts of the workload in batches, adding each batch's ids to `into` once acknowledged.
    Batch k goes to store k mod N, the next one if that one refuses: a store creates rollouts in partitions it
    owns, so spreading the batches spreads the workload over the group's members."""
    rollout_config = {"unresponsive_seconds": config.unresponsive_seconds, "max_attempts": config.max_attempts,
                      "retry_condition": ["unresponsive", "timeout", "failed"]}
    for first in range(rollouts.start, rollouts.stop, ENQUEUE_BATCH):
        batch = [{"input": {"i": i, "step_seconds": config.step_seconds}, "config": rollout_config}
                 for i in range(first, min(first + ENQUEUE_BATCH, rollouts.stop))]
        into += _enqueue_batch(_rotated(store_urls, first // ENQUEUE_BATCH), batch)


def _rotated(items: Sequence[str], k: int) -> list[str]:
    """`items` starting from item k mod len(items), wrapping around."""
    start = k % len(items)
    return [*items[start:], *items[:start]]


def _enqueue_batch(store_urls: Sequence[str], batch: list[dict[str, Any]]) -> list[str]:
    """The batch's rollout ids as the first store that accepts it acknowledged them; the last one's refusal raised
    if every store refused."""
    *others, last = store_urls
    for url in others:
        with contextlib.suppress(httpx.HTTPError):
            return _post_batch(url, batch)
    return _post_batch(last, batch)


def _post_batch(store_url: str, batch: list[dict[str, Any]]) -> list[str]:
    response = httpx.post(f"{store_url}/v1/agl/queues/rollouts/enqueue", json={"rollouts": batch}, timeout=60)
    response.raise_for_status()
    return [r["rollout_id"] for r in response.json()]


def _feed(store_urls: Sequence[str], config: ChaosConfig, steps: list[Step], enqueued: list[str], say: Say) -> bool:
    """Enqueue the next step's rollouts; False if the stores refused, the step left due with what is left to feed."""
    fed = len(enqueued)
    try:
        enqueue(store_urls, config, steps[0].feed, enqueued)
        return True
    except httpx.HTTPError as exc:
        steps[0] = replace(steps[0], feed=steps[0].feed[len(enqueued) - fed:])
        say(f"enqueue before the {steps[0].action} step failed ({exc}); again")
        return False


async def _store_contents(url: str) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """Every rollout with its attempts and spans, read through one store (a group member fans the rollouts query
    out and sends each rollout's reads to its owner)."""
    client = StoreClient(url)
    try:
        rollouts = await client.query_rollouts()
        attempts = {r.rollout_id: await client.query_attempts(r.rollout_id) for r in rollouts}
        spans = {r.rollout_id: await client.query_spans(r.rollout_id) for r in rollouts}
        return rollouts, attempts, spans
    finally:
        await client.close()


async def _live_digests(urls: Sequence[str]) -> dict[str, Digest]:
    """The digest of the whole experiment as each store answers for it: in a group, every member's merged answers
    (its fan-out over the others' partitions, its forwarded reads), each to equal the rebuild from the log."""
    found = {}
    for url in urls:
        client = StoreClient(url)
        try:
            found[url] = await digest(client)
        finally:
            await client.close()
    return found


def _settled(found: Digest) -> Digest:
    """`found` with each worker's part reduced to its id: runners keep writing their worker's heartbeat (every 10 s)
    after the workload, so a live read and a rebuild taken seconds apart (one per store in a group, each over the
    whole experiment) differ there with nothing wrong; rollouts, attempts, spans and resources must not."""
    return Digest(parts={key: "" if key.startswith("worker/") else part for key, part in found.parts.items()},
                  counts=found.counts)


async def _rebuilt_digest(view: Path) -> Digest:
    store = ReadOnlyStore.open(view)
    try:
        return await digest(store)
    finally:
        await store.close()


def _processor_matches(deployment: Deployment, view: Path, rollout_ids: list[str], problems: list[str],
                       timeout: float = 120.0) -> bool:
    """Once the processor has folded the whole log: its counts and each rollout as the rebuilt view has them.
    It may still be restarting (it exits on a group left with no partitions): it is healed while waited for."""
    rebuilt = RocksKV(view)
    try:
        expected = {f"n/{name}": rebuilt.get(keys.count(name)) or 0
                    for name in ("rollouts", "attempts", "spans", "resources", "workers")}
        counts: dict[str, int] = {}

        def caught_up() -> bool:
            nonlocal counts
            try:
                counts = summed_counts(httpx.get(f"{deployment.processor_url}/views/stats",
                                                 timeout=10).json()["partitions"])
            except (httpx.HTTPError, ValueError, KeyError):
                counts = {}
            return all(counts.get(k, 0) == v for k, v in expected.items())

        try:
            deployment.heal_until(caught_up, timeout, "the processor did not catch up")
        except TimeoutError:
            problems.append(f"processor counts {counts} never reached the rebuilt view's {expected}")
            return False
        for rid in rollout_ids:
            held = httpx.get(f"{deployment.processor_url}/views/rollouts/{rid}", timeout=10)
            if held.status_code != 200 or held.json() != rebuilt.get(keys.rollout(rid)):
                problems.append(f"processor's rollout {rid} differs from the rebuilt view's")
                return False
        return True
    finally:
        rebuilt.close()


def _own_cluster(config: ChaosConfig) -> LocalCluster:
    """A broker of the run's own, in its folder and on free ports, so the user's broker is never touched."""
    port, controller_port = free_cluster_ports(config.brokers)
    return local_cluster(Settings(home=config.home, local_port=port, local_controller_port=controller_port,
                                  bootstrap=None), config.brokers)


def run_chaos(config: ChaosConfig, say: Say = print, cluster: LocalCluster | None = None) -> ChaosReport:
    """Run the workload under kills, then check; the deployment is stopped at the end, and so is the broker
    unless `cluster` was given (a local cluster of `config.brokers` nodes the caller started and stops: tests
    share one)."""
    started, rng = time.monotonic(), random.Random(config.seed)
    say = _stamped(say, started)
    shutil.rmtree(config.home, ignore_errors=True)
    config.home.mkdir(parents=True)
    broker = cluster or _own_cluster(config)
    if broker.brokers != config.brokers:
        raise ValueError(f"the run plans for {config.brokers} broker(s); the cluster given has {broker.brokers}")
    broker.start(timeout=120)
    settings = Settings(home=config.home, experiment="chaos", bootstrap=broker.bootstrap)
    create_topics(make_admin(settings.bootstrap_servers), settings.experiment)
    topics = [spec.name(settings.experiment) for spec in LAYOUT]
    deployment = Deployment(settings, config.runners, say, stores=config.stores)
    restarts, rolling, failovers, api_errors, problems = 0, None, [], 0, []
    try:
        deployment.start()
        planned = plan(config, rng)
        steps, deadline = list(planned.steps), time.monotonic() + config.timeout
        enqueued: list[str] = []
        enqueue(deployment.store_urls, config, planned.first, enqueued)
        say(f"enqueued {len(enqueued)} of {config.rollouts} rollouts on {config.runners} runners, "
            f"{config.stores} store(s), {config.brokers} broker(s); the rest one piece before each of {len(steps)} "
            "actions")
        while time.monotonic() < deadline:
            done = _finished(deployment.store_urls)
            api_errors += done is None
            if done is not None and steps and done >= steps[0].at:
                fed = _feed(deployment.store_urls, config, steps, enqueued, say)
                api_errors += not fed
                action = steps.pop(0).action if fed else None
                if action == "broker":
                    say(f"restarting the broker ({done} of {config.rollouts} rollouts finished)")
                    broker.stop()
                    broker.start(timeout=120)
                    restarts += 1
                elif action == "leader":
                    say(f"leader kill {len(failovers) + 1} ({done} of {len(enqueued)} enqueued rollouts finished)")
                    failovers.append(kill_busiest_leader(broker, topics, deployment.heal, say))
                elif action == "rolling":
                    say(f"rolling restart of {config.brokers} nodes ({done} of {len(enqueued)} enqueued finished)")
                    rolling = rolling_restart(broker, deployment.heal, say)
                elif action is not None:
                    deployment.kill(action, rng)
            if done is not None and done >= config.rollouts and not steps:
                break
            deployment.heal()
            time.sleep(0.25)
        say("checking")
        deployment.heal_until(deployment.stores_ready, 120.0, "the stores did not answer after the workload")
        rollouts, attempts, spans = asyncio.run(_store_contents(deployment.store_urls[0]))
        findings: Findings = check(enqueued, rollouts, attempts, spans, SPANS_PER_ATTEMPT)
        problems += findings.lost + findings.duplicated + findings.non_terminal + findings.gaps
        rebuilt = rebuild(settings, config.home / "rebuilt")
        expected = _settled(asyncio.run(_rebuilt_digest(rebuilt.path)))
        lives = {url: _settled(live) for url, live in asyncio.run(_live_digests(deployment.store_urls)).items()}
        differing = {url: live.first_difference(expected) for url, live in lives.items()
                     if live.value != expected.value}
        problems += [f"the live store {url}'s digest differs from a rebuild from offset 0 (first at {part})"
                     for url, part in differing.items()]
        rebuild_equal = not differing
        processor_equal = _processor_matches(deployment, rebuilt.path, enqueued, problems)
    finally:
        deployment.stop()
        if cluster is None:
            broker.stop()
    not_succeeded = sum(a.status != "succeeded" for tries in attempts.values() for a in tries)
    timed = [f.all_seconds for f in failovers if f.all_seconds is not None]
    return ChaosReport(rollouts=len(enqueued), stores=config.stores, kills=sum(deployment.kills.values()),
                       broker_restarts=restarts,
                       brokers=config.brokers, leader_kills=len(failovers), rolling_restarts=int(rolling is not None),
                       lost=len(findings.lost), duplicated=len(findings.duplicated),
                       non_terminal=len(findings.non_terminal), gaps=len(findings.gaps),
                       client_errors=api_errors + not_succeeded, failover_max_seconds=max(timed, default=None),
                       seconds=round(time.monotonic() - started, 1), failovers=failovers,
                       rolling_restart_seconds=rolling, api_errors=api_errors, attempts_not_succeeded=not_succeeded,
                       clients_must_see_nothing=config.clients_must_see_nothing, kills_by_target=dict(deployment.kills),
                       restarts_after_crash=dict(deployment.crash_restarts),
                       statuses=dict(Counter(r.status for r in rollouts)),
                       attempts=sum(len(a) for a in attempts.values()), spans=sum(len(s) for s in spans.values()),
                       rebuild_equal=rebuild_equal, processor_equal=processor_equal, problems=problems[:20])
