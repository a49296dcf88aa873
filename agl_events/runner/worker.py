"""One runner: take tasks, claim them from the store, run the agent under the Kafka tracer, report.

A runner runs up to `concurrency` rollouts at once (async agents as tasks on its loop, sync ones on its
own threads), one attempt per trace context. It claims the tasks one poll gave it in one call and
reports the ends that came close together in one call (`FinishBatcher`), plus one call to resolve
resources when their id changes; spans stream to Kafka in batches and are flushed before the finish is
reported, so a rollout's spans are in the log (and in the store's view) before anyone sees it finished.
A rollout whose resources hold a ProxyLLM also makes one call per span, for its sequence id (see
KafkaTracer); its end goes in the same batched call, asking the store to fold the span topic to its ends.

A runner process (`run_runner`: `agl-events runner`, `agl-events up`, the Trainer's runners) is the runner's
own, so it makes the tracer's provider OpenTelemetry's global one and instruments the openai client as
Agent Lightning's runners do: spans of instrumented libraries and of `opentelemetry.trace.get_tracer(...)`
reach the rollout. A `Runner` built in someone else's process leaves that process's global state alone
unless told (`owns_process`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import os
import resource
import signal
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from agl_events.agent import LitAgent
from agl_events.config import Settings
from agl_events.log.backpressure import BackpressureStats
from agl_events.log.registry import codec_for
from agl_events.log.writer import EventWriter
from agl_events.proc.parent import stop_when_orphaned
from agl_events.runner.agents import load_agent
from agl_events.runner.control import StopWatcher
from agl_events.runner.finishes import FinishBatcher
from agl_events.runner.results import record_result
from agl_events.runner.tasks import Task, TaskQueue
from agl_events.server.client import StoreClient, StoreUnavailableError
from agl_events.tracer import KafkaTracer, ReservedIds, TraceContext
from agl_events.tracer.instrument import instrument_openai
from agl_events.types import AttemptedRollout, AttemptFinish, Claim, ProxyLLM, ResourcesUpdate

log = logging.getLogger(__name__)


#: How long a runner keeps trying to report a rollout's end while the store does not answer (`Runner._report`).
REPORT_PATIENCE_SECONDS = 60.0


def _each(settle: Callable[[Task], None], tasks: list[Task]) -> None:
    """Settle several tasks in one thread hop (acknowledgements are local until the next poll)."""
    for task in tasks:
        settle(task)


class RunnerConfig(BaseModel):
    settings: Settings
    store_url: str
    agent: str
    runner_id: str = ""
    heartbeat_interval: float = 10.0
    poll_timeout: float = 0.1
    #: A runner busy in every slot for longer than this leaves the task group until a slot frees, so the
    #: tasks its client fetched ahead go to idle runners (rejoining costs about a second).
    step_aside_after: float = 1.0
    max_rollouts: int | None = None
    #: Rollouts run at once. Agents waiting on I/O (an LLM) gain the most; CPU-bound Python agents share the
    #: runner's one core, but the per-rollout calls to the store still come in batches.
    concurrency: int = Field(1, ge=1)

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
    def __init__(self, config: RunnerConfig, agent: LitAgent[Any] | None = None, *, owns_process: bool = False
                 ) -> None:
        """`owns_process`: the process is this runner's, whose tracer may take OpenTelemetry's global provider
        and instrument the openai client (see the module docstring)."""
        self.config = config.with_id()
        self.owns_process = owns_process
        self.agent = agent if agent is not None else load_agent(config.agent)
        self.stop = threading.Event()
        self.completed = 0
        self._resources: dict[str, ResourcesUpdate] = {}
        self._async_agent = self.agent.is_async()
        #: Sync agents' threads: one per slot (the loop's default pool has only cores + 4).
        self._agents = ThreadPoolExecutor(self.config.concurrency, thread_name_prefix=f"{self.config.runner_id}-agent")

    async def run(self) -> int:
        """Run until stopped (stop event, SIGTERM or max_rollouts); returns how many rollouts ran."""
        cfg, settings = self.config, self.config.settings
        codec = codec_for(settings.schema_registry_url)
        writer = EventWriter(settings.bootstrap_servers, settings.experiment, codec, producer_id=cfg.runner_id,
                             **{"linger.ms": 50})
        running: set[asyncio.Task[None]] = set()
        # Another rollout running: an attempt's last spans ride the linger with its spans, not a flush of their own.
        tracer = KafkaTracer(writer, more_coming=lambda: len(running) > 1)
        if self.owns_process:  # after loading the agent, whose module may have set a provider of its own
            instrument_openai(tracer.become_global() or tracer.provider)
        queue = TaskQueue(settings.bootstrap_servers, settings.experiment, codec, cfg.runner_id, cfg.concurrency)
        StopWatcher(settings.bootstrap_servers, settings.experiment, codec, cfg.runner_id, self.stop)
        client = StoreClient(cfg.store_url, auth_token=settings.store_token)
        finishes = FinishBatcher(client)
        beating = asyncio.create_task(self._heartbeats(client, writer))
        #: Tasks a poll gave beyond the free slots, claimed as slots free. They are few (a poll gives at most
        #: `concurrency`) and short-lived; handing them back instead cost a broker round trip each.
        backlog: list[Task] = []
        started = 0
        try:
            while not self.stop.is_set():
                if cfg.max_rollouts is not None and started >= cfg.max_rollouts:
                    break
                if len(running) >= cfg.concurrency:
                    await wait_for_a_slot(running, queue, backlog, cfg.step_aside_after)
                    continue
                free = cfg.concurrency - len(running)
                if cfg.max_rollouts is not None:
                    free = min(free, cfg.max_rollouts - started)
                if not backlog:
                    backlog = await asyncio.to_thread(queue.next_tasks, cfg.poll_timeout)
                tasks, backlog = backlog[:free], backlog[free:]
                for claimed in await self._claim(tasks, queue, client):
                    job = asyncio.create_task(self._run_rollout(claimed, client, tracer, finishes))
                    running.add(job)
                    job.add_done_callback(running.discard)
                    started += 1
            if backlog:  # stopping: someone else runs them
                await asyncio.to_thread(_each, queue.give_back, backlog)
            if running:
                await asyncio.gather(*running, return_exceptions=True)
        finally:
            for job in running:
                job.cancel()
            beating.cancel()
            await asyncio.gather(beating, *running, return_exceptions=True)
            await asyncio.to_thread(queue.close)
            await asyncio.to_thread(writer.close)
            await client.close()
            self._agents.shutdown(wait=False)
        return self.completed

    async def _heartbeats(self, client: StoreClient, writer: EventWriter) -> None:
        while True:
            try:
                await client.update_worker(self.config.runner_id, system_snapshot(writer.backpressure.stats))
            except (StoreUnavailableError, ValueError) as exc:
                log.warning("heartbeat failed: %s", exc)
            await asyncio.sleep(self.config.heartbeat_interval)

    async def _claim(self, tasks: list[Task], queue: TaskQueue, client: StoreClient) -> list[Claim]:
        """Claim the tasks in one call; the claims granted (None for tasks taken over REST, by another
        runner, or cancelled: nothing to do). A store out of reach gets the tasks back, for other runners."""
        if not tasks:
            return []
        try:
            claims = await client.claim_many([task.rollout_id for task in tasks], self.config.runner_id)
        except StoreUnavailableError as exc:
            log.warning("cannot claim %d tasks: %s; giving them back", len(tasks), exc)
            await asyncio.to_thread(_each, queue.give_back, tasks)
            await asyncio.sleep(1.0)
            return []
        await asyncio.to_thread(_each, queue.done, tasks)
        for task, claim in zip(tasks, claims, strict=True):
            log.info("task %s: %s", task.rollout_id, "claimed" if claim else "already taken")
        return [claim for claim in claims if claim is not None]

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

    async def _run_rollout(self, claimed: Claim, client: StoreClient, tracer: KafkaTracer,
                           finishes: FinishBatcher) -> None:
        rollout = claimed.rollout
        rid, aid = rollout.rollout_id, rollout.attempt.attempt_id
        try:
            resources = await self._resolve(client, claimed.resources_id)
        except StoreUnavailableError as exc:  # the watchdog retries the attempt
            log.error("task %s abandoned, the store is unreachable: %s", rid, exc)
            return
        named = resources.resources if resources else {}
        # With a ProxyLLM the agent's LLM calls reach the log through the LLM proxy, which numbers them from the
        # store: the tracer then does too, so rewards and calls keep the order they happened in.
        proxied = any(isinstance(resource, ProxyLLM) for resource in named.values())
        reserver = client.sequence_reserver(rid, aid)
        reserve = functools.partial(reserver, 1) if proxied else None
        reserved = ReservedIds(claimed.reserved_through, reserver)
        status: Literal["succeeded", "failed"] = "succeeded"
        context = tracer.trace_context(rid, aid, claimed.next_sequence_id, reserve, reserved)
        try:
            await self._traced(context, tracer, rollout, named)
        except Exception as exc:  # the agent's failure is the attempt's outcome, not the runner's
            log.warning("rollout %s attempt %s failed: %r", rid, aid, exc)
            log.debug("traceback", exc_info=True)
            status = "failed"
        # The store records the finish once its view has read the spans up to where the tracer says; the proxy's
        # may lie past the tracer's, so a proxied attempt's finish has it fold to where the partitions end.
        finish = AttemptFinish(rollout_id=rid, attempt_id=aid, status=status,
                               spans_through=None if proxied else context.spans_through())
        finished = await self._report(rid, lambda: self._finish(finishes, finish))
        self.completed += finished

    @staticmethod
    async def _finish(finishes: FinishBatcher, finish: AttemptFinish) -> None:
        outcome = await finishes.finish(finish)
        if outcome.error is not None:  # e.g. the attempt timed out and was retried meanwhile: nothing to redo
            log.warning("rollout %s: the store did not take its end: %s", finish.rollout_id, outcome.error)

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

    async def _traced(self, context: TraceContext, tracer: KafkaTracer, rollout: AttemptedRollout,
                      resources: dict[str, Any]) -> None:
        """The attempt under its trace context, which flushes its spans on exit. Async agents run on the runner's
        loop. A sync one runs on its slot's thread, and so do its result's spans (the final reward) and the flush:
        one thread hop per rollout where there were two (the agent's, the flush's on the loop's default pool of
        cores + 4 threads) with the reward encoded on the loop in between. The loop stays free for heartbeats,
        claims and stop."""
        if self._async_agent:
            async with context:
                record_result(tracer, await self.agent.execute(rollout.input, resources, rollout))
            return
        copied = contextvars.copy_context()  # the attempt is bound in this copy: the thread's next rollout starts clean
        await asyncio.get_running_loop().run_in_executor(
            self._agents, copied.run, _run_sync_attempt, context, tracer, self.agent, rollout, resources)


def _run_sync_attempt(context: TraceContext, tracer: KafkaTracer, agent: LitAgent[Any], rollout: AttemptedRollout,
                      resources: dict[str, Any]) -> None:
    with context:
        record_result(tracer, agent.execute_sync(rollout.input, resources, rollout))


class SteppingAside(Protocol):
    """What `wait_for_a_slot` asks of the task queue (`runner.tasks.TaskQueue`)."""

    def give_back(self, task: Task) -> None: ...

    def step_aside(self) -> None: ...

    def rejoin(self) -> None: ...


async def wait_for_a_slot(running: set[asyncio.Task[None]], queue: SteppingAside, backlog: list[Task],
                          step_aside_after: float) -> None:
    """Every slot is busy: wait for one to free. Busy for `step_aside_after`, the runner steps aside from the
    task group meanwhile (its client would keep acquiring tasks that idle runners could run; its backlog goes
    back too) and rejoins after. Stepping aside takes broker round trips (seconds while a broker restarts), in
    which the rollouts may all end: then there is nothing left to wait for. Stepping aside only spares idle
    runners a wait, so a broker error while leaving (it sends the pending acknowledgements first) leaves the
    runner waiting in the group, not ended."""
    done, _ = await asyncio.wait(running, timeout=step_aside_after, return_when=asyncio.FIRST_COMPLETED)
    if done:
        return
    if backlog:
        await asyncio.to_thread(_each, queue.give_back, backlog)
        backlog.clear()
    try:
        await asyncio.to_thread(queue.step_aside)
    except Exception as exc:  # the share consumer's KafkaException (only the log package names Kafka's types)
        log.warning("could not step aside from the task group (%s); waiting for a slot in it", exc)
    try:
        if running:
            await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await asyncio.to_thread(queue.rejoin)


def run_runner(config: RunnerConfig, agent: LitAgent[Any] | None = None, parent_pid: int | None = None) -> int:
    """Process entry point: SIGTERM and SIGINT ask for a cooperative stop after the current rollout, and so does
    the death of `parent_pid` (the process whose pool spawned this one), which could no longer stop it."""
    logging.basicConfig(level=os.environ.get("AGL_LOG_LEVEL", "WARNING").upper(),
                        format=f"%(asctime)s {config.runner_id} %(name)s %(levelname)s %(message)s")
    runner = Runner(config, agent, owns_process=True)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: runner.stop.set())
    if parent_pid is not None:
        stop_when_orphaned(parent_pid)
    return asyncio.run(runner.run())
