"""Agent Lightning 0.3.0's side of the side-by-side benchmark, run inside its own virtual environment.

    python agl_side.py --rollouts 50 --runners 2 --max-rounds 3 [--batch-size 10] [--span-sleep 0] [--seed 0]

It is executed by path (never imported as part of `agl_events`) with an interpreter that has only
`agentlightning==0.3.0` installed, so at module level it imports the standard library only and
imports agentlightning inside functions. Because it is stdlib-only it is also where the workload's
*shape* lives (`plan_rollout`, `make_tasks`, `run_plan`): our side imports these very functions, so
both stores see the same rollouts span for span, from the same seeds.

What it measures: `agl store` (the in-memory store server, as its CLI starts it) in one process,
R `LitAgentRunner` processes with an `OtelTracer` talking to it through `LightningStoreClient`
(spans go over OTLP, as in any remote deployment), and this process enqueueing in batches and
waiting. It prints ONE JSON line: rollouts, spans, seconds, dispatch and finish latencies and the server's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import socket
import string
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

_ALPHABET = string.ascii_letters + string.digits + " "
#: Byte value -> a character of `_ALPHABET`, so that random bytes translated through it are a random string made
#: at C speed. Drawing the characters one by one (`rng.choices`) cost 13 us a string, about 1 ms of CPU per medium
#: rollout: a third of our runners' CPU went to the random generator, which is not what the benchmark measures.
#: (256 byte values over 63 characters: the first four come a little more often, which no store cares about.)
_TO_ALPHABET = bytes(ord(_ALPHABET[b % len(_ALPHABET)]) for b in range(256))


def random_attributes(rng: random.Random, depth: int = 2) -> dict[str, Any]:
    """Nested attributes like a real agent's (prompts, tool args): 2-4 keys, strings of 5 to 300 chars."""
    attributes: dict[str, Any] = {}
    for k in range(rng.randint(2, 4)):
        if depth > 0 and rng.random() < 0.4:
            attributes[f"k{k}"] = random_attributes(rng, depth - 1)
        else:
            attributes[f"k{k}"] = rng.randbytes(rng.randint(5, 300)).translate(_TO_ALPHABET).decode("ascii")
    return attributes


def plan_rollout(seed: int, max_rounds: int, reward_probability: float = 0.5) -> dict[str, Any]:
    """Everything one rollout will emit, decided up front from its seed so both sides emit the same spans."""
    rng = random.Random(seed)
    rounds = []
    for _ in range(rng.randint(1, max_rounds)):
        rounds.append({"attributes": random_attributes(rng),
                       "children": [random_attributes(rng), random_attributes(rng)],
                       "reward": rng.random() if rng.random() < reward_probability else None})
    return {"rounds": rounds, "final": random_attributes(rng), "final_reward": rng.random()}


def expected_spans(plan: dict[str, Any]) -> int:
    """Spans a plan produces: 3 per round, its optional reward, the final span and the final reward."""
    return sum(3 + (r["reward"] is not None) for r in plan["rounds"]) + 2


def make_tasks(rollouts: int, max_rounds: int, reward_probability: float, span_sleep: float, seed: int
               ) -> list[dict[str, Any]]:
    """The task inputs both sides enqueue: small (a seed), the agent expands them into spans."""
    return [{"seed": seed * 1_000_003 + i, "max_rounds": max_rounds, "reward_p": reward_probability,
             "span_sleep": span_sleep} for i in range(rollouts)]


def run_plan(task: dict[str, Any], operation: Callable[..., Any], emit_reward: Callable[..., Any]) -> float:
    """The agent body, parameterised by the emitters so both implementations run identical code."""
    plan = plan_rollout(int(task["seed"]), int(task["max_rounds"]), float(task["reward_p"]))
    pause = float(task.get("span_sleep", 0.0))
    for i, rnd in enumerate(plan["rounds"]):
        with operation(name="round", round=i, attrs=rnd["attributes"]):
            for j, child in enumerate(rnd["children"]):
                with operation(name="step", step=j, attrs=child):
                    if pause:
                        time.sleep(pause)
        if rnd["reward"] is not None:
            emit_reward(rnd["reward"])
    with operation(name="final", attrs=plan["final"]):
        if pause:
            time.sleep(pause)
    return float(plan["final_reward"])  # the runner turns the returned float into the final reward span


# -- Agent Lightning side (imports agentlightning lazily) -------------------------------------------------

def _agl_agent(task: dict[str, Any], prompt_template: Any) -> float:
    """AGL's `@rollout` only accepts (task, llm) or (task, prompt_template) agents; the template is unused."""
    from agentlightning import emit_reward, operation

    return run_plan(task, operation, emit_reward)


def _runner_main(url: str, worker_id: int, stop: Any, poll_interval: float) -> None:
    """One runner process, wired as AGL's own launchers wire it (tracer init, then worker init, then iter)."""
    import logging

    from agentlightning import rollout
    from agentlightning.runner.agent import LitAgentRunner
    from agentlightning.store.client_server import LightningStoreClient
    from agentlightning.tracer.otel import OtelTracer

    logging.basicConfig(level=logging.WARNING)
    runner: Any = LitAgentRunner(OtelTracer(), poll_interval=poll_interval, interval_jitter=poll_interval / 2)
    runner.init(rollout(_agl_agent))
    runner.init_worker(worker_id, LightningStoreClient(url))
    try:
        asyncio.run(runner.iter(event=stop))
    finally:
        runner.teardown_worker(worker_id)
        runner.teardown()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, server: subprocess.Popen[bytes], timeout: float) -> None:
    """Until the server listens. Its start is mostly importing agentlightning (litellm...), 5-10 s of CPU that a
    loaded machine stretches to minutes, so the wait lasts while the server lives, up to `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"agl store exited with {server.returncode} before listening on port {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"agl store did not listen on port {port} within {timeout}s")


def _peak_rss_mb(pid: int) -> float | None:
    """VmHWM of a live process (Linux): the server is not our child in the rusage sense until it exits."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _percentile(values: list[float], q: float) -> float | None:
    """Nearest rank, as `agl_events.bench.store_latency.percentile` (not importable here)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else None


async def _run_all(client: Any, tasks: list[dict[str, Any]], batch_size: int) -> list[str]:
    from agentlightning.types import EnqueueRolloutRequest

    ids: list[str] = []
    for i in range(0, len(tasks), batch_size):
        queued = await client.enqueue_many_rollouts([EnqueueRolloutRequest(input=t) for t in tasks[i:i + batch_size]])
        ids.extend(r.rollout_id for r in queued)
    done: set[str] = set()
    while len(done) < len(ids):
        # AGL's client refuses timeouts >= 0.1 s (it would block its loop), so poll at that grain.
        finished = await client.wait_for_rollouts(rollout_ids=[i for i in ids if i not in done], timeout=0.05)
        done.update(r.rollout_id for r in finished)
        if len(done) < len(ids):
            await asyncio.sleep(0.02)
    return ids


async def _drive(url: str, args: argparse.Namespace) -> dict[str, Any]:
    from agentlightning.store.client_server import LightningStoreClient
    from agentlightning.types import PromptTemplate

    client: Any = LightningStoreClient(url)
    try:
        # AGL's runner skips a rollout when no resources exist at all, so give it some, as a trainer would.
        await client.add_resources({"prompt": PromptTemplate(template="bench {x}", engine="f-string")})
        await _run_all(client, make_tasks(args.runners * 2, 1, args.reward_p, 0.0, seed=10_000 + args.seed),
                       args.batch_size)  # warm-up: every runner has polled and traced once
        tasks = make_tasks(args.rollouts, args.max_rounds, args.reward_p, args.span_sleep, args.seed)
        started = time.time()
        ids = await _run_all(client, tasks, args.batch_size)
        seconds = time.time() - started
        spans, dispatch, finish = 0, [], []
        for rid in ids:
            spans += len(list(await client.query_spans(rid)))
            rollout, attempt = await client.get_rollout_by_id(rid), await client.get_latest_attempt(rid)
            if rollout is not None and attempt is not None:
                dispatch.append((attempt.start_time - rollout.start_time) * 1000)
            if rollout is not None and rollout.end_time is not None:
                finish.append((rollout.end_time - rollout.start_time) * 1000)
    finally:
        await client.close()
    return {"rollouts": len(ids), "spans": spans, "seconds": seconds,
            "expected_spans": sum(expected_spans(plan_rollout(int(t["seed"]), args.max_rounds, args.reward_p))
                                  for t in tasks),
            "dispatch_p50_ms": _percentile(dispatch, 0.5), "dispatch_p99_ms": _percentile(dispatch, 0.99),
            "finish_p50_ms": _percentile(finish, 0.5), "finish_p99_ms": _percentile(finish, 0.99)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rollouts", type=int, default=50)
    parser.add_argument("--runners", type=int, default=2)
    parser.add_argument("--max-rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--span-sleep", type=float, default=0.0)
    parser.add_argument("--reward-p", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--poll-interval", type=float, default=0.1)
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "agentlightning.cli.store", "--host", "127.0.0.1",
                               "--port", str(port), "--log-level", "WARNING"],
                              stdout=subprocess.DEVNULL, stderr=sys.stderr)
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    runners = []
    try:
        _wait_port(port, server, 600)
        url = f"http://127.0.0.1:{port}"
        runners = [context.Process(target=_runner_main, args=(url, i, stop, args.poll_interval), name=f"agl-runner-{i}")
                   for i in range(args.runners)]
        for process in runners:
            process.start()
        result = asyncio.run(_drive(url, args))
        result["store_rss_mb_peak"] = _peak_rss_mb(server.pid)
    finally:
        stop.set()
        for process in runners:
            process.join(15)
            if process.is_alive():
                process.kill()
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
    import resource  # after runners and server were reaped: the largest of them

    result["children_rss_mb_peak"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
