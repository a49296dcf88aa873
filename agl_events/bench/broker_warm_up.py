"""Warming the local broker's JVM before a benchmark's measured rounds.

    python -m agl_events.bench.broker_warm_up --bootstrap HOST:PORT --broker-pid PID --params JSON

A broker just started runs Kafka's code interpreted and compiles its hot paths as they come. Over its first rounds
of 2,000 medium rollouts a fresh broker's JIT compiler took 57%, 50%, 37%, 26%... of the broker's CPU, and the
compiler's threads take the cores from the store and the runners too: ours-only rounds of 1,000 rollouts on a
broker warming went 163 -> 198 -> 241 -> ... 272 rollouts/s (broker CPU 3.9 -> 1.1 ms per rollout). A broker in
service compiled all that long ago, and Agent Lightning's side (Python) has nothing like it, so `agl-events bench`
runs this first: our side's workload through one store and one runner pool, in rounds, until the compiler takes
under `WARM_JIT_SHARE` of the broker's CPU in `WARM_ROUNDS` rounds in a row (one such round is not enough: a fresh
broker went 49%, 33%, 9%, and a later one 13%, 34%, 11%, compiling in bursts). It runs in a process of its own,
because its store grows far beyond a measured round's and the bench reads its own peak RSS as the store's. One JSON
line per round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from collections.abc import Callable

from agl_events.bench.compare import our_side, run_all
from agl_events.bench.cpu import JIT_THREADS, process_cpu_seconds, thread_cpu_seconds
from agl_events.bench.workload import WorkloadParams
from agl_events.config import Settings
from agl_events.log.admin import delete_topics
from agl_events.log.clients import make_admin

#: Rollouts of one round, the most rounds, the share of the broker's CPU in a round its JIT compiler may take, and
#: how many rounds in a row must stay under it for the broker to count as warm.
WARM_UP_ROLLOUTS = 2000
WARM_UP_MAX_ROUNDS = 8
WARM_JIT_SHARE = 0.10
WARM_ROUNDS = 2


def compiling_share(jit_seconds: float, broker_seconds: float) -> float:
    """The JIT compiler's share of the broker's CPU over a stretch (0 for a stretch it spent idle)."""
    return jit_seconds / broker_seconds if broker_seconds > 0 else 0.0


def is_warm(shares: list[float]) -> bool:
    """Whether the rounds so far (the compiler's share of each) end in `WARM_ROUNDS` under `WARM_JIT_SHARE`."""
    return len(shares) >= WARM_ROUNDS and all(share < WARM_JIT_SHARE for share in shares[-WARM_ROUNDS:])


def _compiling_and_all(pid: int) -> tuple[float, float] | None:
    """CPU seconds so far of the process's JIT compiler threads, and of the whole process."""
    jit, cpu = thread_cpu_seconds(pid, JIT_THREADS), process_cpu_seconds(pid)
    return None if jit is None or cpu is None else (jit, cpu)


async def warm_up(settings: Settings, params: WorkloadParams, broker_pid: int, report: Callable[[int, float], None],
                  rollouts: int = WARM_UP_ROLLOUTS, max_rounds: int = WARM_UP_MAX_ROUNDS) -> list[float]:
    """Rounds of `rollouts` of the workload until the broker is warm (or `max_rounds`); the compiler's share of
    the broker's CPU in each round, each also given to `report(round, share)` as it ends. Nothing when the
    broker's threads cannot be read (no /proc)."""
    shares: list[float] = []
    async with our_side(settings, params) as (store, _, _):
        for round_ in range(1, max_rounds + 1):
            batch = params.model_copy(update={"rollouts": rollouts, "seed": 20_000 + round_})
            start = _compiling_and_all(broker_pid)
            await run_all(store, batch.tasks(), params.batch_size)
            end = _compiling_and_all(broker_pid)
            if start is None or end is None:
                break
            shares.append(compiling_share(end[0] - start[0], end[1] - start[1]))
            report(round_, shares[-1])
            if is_warm(shares):
                break
    return shares


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bootstrap", required=True, help="the local broker's address")
    parser.add_argument("--broker-pid", type=int, required=True, help="the local broker's process")
    parser.add_argument("--params", required=True, help="the workload, as WorkloadParams JSON")
    args = parser.parse_args(argv)
    experiment = f"bench-warm-{uuid.uuid4().hex[:8]}"
    settings = Settings.from_env().model_copy(update={"bootstrap": args.bootstrap, "experiment": experiment})
    params = WorkloadParams.model_validate_json(args.params)
    try:
        asyncio.run(warm_up(settings, params, args.broker_pid, lambda round_, share: print(
            json.dumps({"round": round_, "rollouts": WARM_UP_ROLLOUTS, "jit_share": round(share, 3)}), flush=True)))
    finally:
        delete_topics(make_admin(args.bootstrap), f"agl.{experiment}.")


if __name__ == "__main__":
    main()
