"""One runner: take a task, claim it from the store, run the agent under the Kafka tracer, report.

Per rollout a runner makes two small calls to the store (claim, finish) and one to resolve resources
when their id changes; spans stream to Kafka in batches and are flushed before the finish is reported,
so a rollout's spans are in the log (and in the store's view) before anyone sees it finished. A rollout
whose resources hold a ProxyLLM also makes one call per span, for its sequence id (see KafkaTracer).
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel

from agl_events.agent import LitAgent
from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.log.backpressure import BackpressureStats
from agl_events.log.writer import EventWriter
from agl_events.runner.agents import load_agent
from agl_events.runner.control import StopWatcher
from agl_events.runner.results import record_result
from agl_events.runner.tasks import Task, TaskQueue
from agl_events.server.client import StoreClient, StoreUnavailableError
from agl_events.tracer import KafkaTracer
from agl_events.types import AttemptedRollout, Claim, ProxyLLM, ResourcesUpdate

log = logging.getLogger(__name__)


#: How long a runner keeps trying to report a rollout's end while the store does not answer (`Runner._report`).
REPORT_PATIENCE_SECONDS = 60.0


class RunnerConfig(BaseModel):
    settings: Settings
    store_url: str
    agent: str
    runner_id: str = ""
    heartbeat_interval: float = 10.0
    poll_timeout: float = 0.1
    #: A rollout running longer than this makes the runner leave the task group until it is done, so the
    #: tasks its client fetched ahead go to idle runners (rejoining costs about a second).
    step_aside_after: float = 1.0
    max_rollouts: int | None = None

    def with_id(self) -> RunnerConfig:
        runner_id = self.runner_id or f"runner-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"
        return self.model_copy(update={"runner_id": runner_id})


def system_snapshot(span_backpressure: BackpressureStats) -> dict[str, Any]:
    """What a heartbeat says about the runner's machine (upstream sends psutil figures; we avoid the dep), and
    how often and how long its agent waited for room in the span producer's bounded queue (runners serve no
    `/metrics`: the store's workers API shows this)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"pid": os.getpid(), "host": socket.gethostname(), "loadavg": list(os.getloadavg()),
            "max_rss_kb": usage.ru_maxrss, "cpu_user_s": usage.ru_utime, "time": time.time(),
            "span_backpressure": span_backpressure.as_dict()}


class Runner:
    def __init__(self, config: RunnerConfig, agent: LitAgent[Any] | None = None) -> None:
        self.config = config.with_id()
        self.agent = agent if agent is not None else load_agent(config.agent)
        self.stop = threading.Event()
        self.completed = 0
        self._resources: dict[str, ResourcesUpdate] = {}

    async def run(self) -> int:
        """Run until stopped (stop event, SIGTERM or max_rollouts); returns how many rollouts ran."""
        cfg, settings = self.config, self.config.settings
        codec = AvroCodec.from_url(settings.schema_registry_url)
        writer = EventWriter(settings.bootstrap_servers, settings.experiment, codec, producer_id=cfg.runner_id,
                             **{"linger.ms": 50})
        tracer = KafkaTracer(writer)
        queue = TaskQueue(settings.bootstrap_servers, settings.experiment, codec, cfg.runner_id)
        StopWatcher(settings.bootstrap_servers, settings.experiment, codec, cfg.runner_id, self.stop)
        client = StoreClient(cfg.store_url, auth_token=settings.store_token)
        beating = asyncio.create_task(self._heartbeats(client, writer))
        try:
            while not self.stop.is_set():
                task = await asyncio.to_thread(queue.next_task, cfg.poll_timeout)
                if task is not None:
                    try:
                        await self._handle(task, queue, client, tracer)
                    except StoreUnavailableError as exc:  # e.g. resources not fetched: the watchdog retries it
                        log.error("task %s abandoned, the store is unreachable: %s", task.rollout_id, exc)
                if cfg.max_rollouts is not None and self.completed >= cfg.max_rollouts:
                    break
        finally:
            beating.cancel()
            await asyncio.gather(beating, return_exceptions=True)
            await asyncio.to_thread(queue.close)
            await asyncio.to_thread(writer.close)
            await client.close()
        return self.completed

    async def _heartbeats(self, client: StoreClient, writer: EventWriter) -> None:
        while True:
            try:
                await client.update_worker(self.config.runner_id, system_snapshot(writer.backpressure.stats))
            except (StoreUnavailableError, ValueError) as exc:
                log.warning("heartbeat failed: %s", exc)
            await asyncio.sleep(self.config.heartbeat_interval)

    async def _handle(self, task: Task, queue: TaskQueue, client: StoreClient, tracer: KafkaTracer) -> None:
        try:
            claimed = await client.claim(task.rollout_id, self.config.runner_id)
        except StoreUnavailableError as exc:
            log.warning("cannot claim %s: %s; giving the task back", task.rollout_id, exc)
            await asyncio.to_thread(queue.give_back, task)
            await asyncio.sleep(1.0)
            return
        await asyncio.to_thread(queue.done, task)
        log.info("task %s: %s", task.rollout_id, "claimed" if claimed else "already taken")
        if claimed is None:
            return  # taken over REST or by another runner, or cancelled: nothing to do
        loop = asyncio.get_running_loop()
        stepping: list[asyncio.Future[None]] = []
        step_aside = loop.call_later(self.config.step_aside_after,
                                     lambda: stepping.append(loop.run_in_executor(None, queue.step_aside)))
        try:
            await self._run_rollout(claimed, client, tracer)
        finally:
            step_aside.cancel()
            if stepping:  # only a long rollout stepped aside; most rollouts skip the thread hop
                await stepping[0]
                await asyncio.to_thread(queue.rejoin)

    async def _resolve(self, client: StoreClient, resources_id: str | None) -> ResourcesUpdate | None:
        """Resources by id, fetched once per id (the claim names them, so a runner fetches only on change)."""
        if resources_id is None:
            return None
        if resources_id not in self._resources:
            found = await client.get_resources(resources_id)
            if found is None:
                return None
            self._resources[resources_id] = found
        return self._resources[resources_id]

    async def _run_rollout(self, claimed: Claim, client: StoreClient, tracer: KafkaTracer) -> None:
        rollout = claimed.rollout
        rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
        resources = await self._resolve(client, claimed.resources_id)
        named = resources.resources if resources else {}
        # With a ProxyLLM the agent's LLM calls reach the log through the LLM proxy, which numbers them from the
        # store: the tracer then does too, so rewards and calls keep the order they happened in.
        proxied = any(isinstance(resource, ProxyLLM) for resource in named.values())
        reserve = client.sequence_reserver(rid, aid) if proxied else None
        status: Literal["succeeded", "failed"] = "succeeded"
        try:
            async with tracer.trace_context(rid, aid, claimed.next_sequence_id, reserve):  # flushes spans on exit
                result = await self._call_agent(rollout, named)
                record_result(tracer, result)
        except Exception as exc:  # the agent's failure is the attempt's outcome, not the runner's
            log.warning("rollout %s attempt %s failed: %r", rid, aid, exc)
            log.debug("traceback", exc_info=True)
            status = "failed"
        if proxied:  # the proxy's spans may lie past the tracer's: the store folds to where the partitions end
            finished = await self._report(rid, lambda: client.update_attempt(rid, aid, status=status))
        else:  # the store records the finish once its view has read the spans up to where the tracer says
            through = tracer.spans_through()
            finished = await self._report(rid, lambda: client.finish_attempt(rid, aid, status, through))
        self.completed += finished

    async def _report(self, rid: str, call: Callable[[], Awaitable[Any]]) -> bool:
        """Report a rollout's end, riding through a store restart (it catches up in seconds): retried with
        doubling waits for `REPORT_PATIENCE_SECONDS`. Reporting twice is harmless (the second sets the status it
        already has). Past that, or when asked to stop, the attempt is left to the store's watchdog, which
        declares it unresponsive and retries it as the rollout's config says; the runner goes on either way."""
        delay, deadline = 0.5, time.monotonic() + REPORT_PATIENCE_SECONDS
        while True:
            try:
                await call()
                return True
            except StoreUnavailableError as exc:
                if self.stop.is_set() or time.monotonic() + delay > deadline:
                    log.error("rollout %s: could not report its end (%s); the store's watchdog will retry it",
                              rid, exc)
                    return False
                log.warning("rollout %s: cannot report its end yet (%s); again in %.1f s", rid, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _call_agent(self, rollout: AttemptedRollout, resources: dict[str, Any]) -> Any:
        """Async agents run on the runner's loop; sync ones on a thread, so heartbeats and stop keep working."""
        if self.agent.is_async():
            return await self.agent.execute(rollout.input, resources, rollout)
        return await asyncio.to_thread(self.agent.execute_sync, rollout.input, resources, rollout)


def run_runner(config: RunnerConfig, agent: LitAgent[Any] | None = None) -> int:
    """Process entry point: SIGTERM and SIGINT ask for a cooperative stop after the current rollout."""
    logging.basicConfig(level=os.environ.get("AGL_LOG_LEVEL", "WARNING").upper(),
                        format=f"%(asctime)s {config.runner_id} %(name)s %(levelname)s %(message)s")
    runner = Runner(config, agent)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: runner.stop.set())
    return asyncio.run(runner.run())
