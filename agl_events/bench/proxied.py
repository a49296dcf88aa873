"""HTTP calls per proxied rollout, by route: runners whose agents call an LLM through the LLM proxy.

    python -m agl_events.bench.proxied [--rollouts 40] [--concurrency 8]

One runner process running `--concurrency` rollouts at once, each agent making two calls on its attempt's
route of the LLM proxy (one inside a traced step, one streamed) to a fake vLLM-like backend and returning a
reward: the shape of an RL rollout whose token ids come from the proxy. The store is embedded, so every call
its `/metrics` counts in the window came from the runner or the proxy (`bench.round_trips`); a proxied rollout
costs more calls than a plain one because the runner's tracer and the proxy both take each span's sequence id
from the store (the order of rewards and calls, which upstream's proxy adapter reads).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import uuid
from pathlib import Path
from typing import Any

import openai

from agl_events import operation, rollout
from agl_events.bench.round_trips import per_rollout, read_requests
from agl_events.bench.store_latency import print_figures
from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.llm.fake_backend import FakeBackend
from agl_events.llm.proxy import LLMProxy
from agl_events.log.admin import delete_topics
from agl_events.log.clients import make_admin
from agl_events.runner.pool import RunnerPool
from agl_events.runner.worker import RunnerConfig
from agl_events.server.embedded import embedded_store_server
from agl_events.types import LLM, EnqueueRolloutRequest

MODEL = "policy"


@rollout
def asking(task: dict[str, Any], llm: LLM) -> float:
    """Two calls on the attempt's own route (one inside a traced step, one streamed), then a reward."""
    client = openai.OpenAI(base_url=llm.endpoint, api_key="unused", max_retries=0)
    with operation(step="think"):
        first = client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task["q"]}])
    chunks = client.chat.completions.create(model=llm.model, stream=True, messages=[
        {"role": "user", "content": task["q"]}, {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "again"}])
    second = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    client.close()
    return 1.0 if second == "Echo: again" else 0.0


async def measure(settings: Settings, rollouts: int, concurrency: int, work: Path) -> dict[str, float]:
    """Calls per rollout by route over the rollouts' whole run, and their sum (`calls_per_rollout`)."""
    with FakeBackend() as backend:
        models = [{"model_name": MODEL, "litellm_params": {"model": f"hosted_vllm/{backend.model}",
                                                          "api_base": backend.url}}]
        async with embedded_store_server(settings, work) as (store, url):
            with LLMProxy(models, url, settings) as proxy:
                await store.add_resources({"llm": proxy.as_resource(model=MODEL)})
                pool = RunnerPool(RunnerConfig(settings=settings, store_url=url, agent="bench",
                                               concurrency=concurrency), 1, agent=asking)
                pool.start()
                try:
                    before = await read_requests(url)
                    queued = await store.enqueue_many_rollouts(
                        [EnqueueRolloutRequest(input={"q": f"question {i}"}) for i in range(rollouts)])
                    done = await store.wait_for_rollouts(rollout_ids=[r.rollout_id for r in queued], timeout=600)
                    calls = per_rollout(before, await read_requests(url), rollouts)
                finally:
                    pool.stop(grace=10)
    succeeded = sum(r.status == "succeeded" for r in done)
    return {"succeeded": succeeded, "calls_per_rollout": sum(calls.values()), **calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8, help="rollouts the runner runs at once")
    args = parser.parse_args()
    base = Settings.from_env()
    settings = base.model_copy(update={"bootstrap": ensure_broker(base),
                                       "experiment": f"bench-proxied-{uuid.uuid4().hex[:8]}"})
    try:
        figures = asyncio.run(measure(settings, args.rollouts, args.concurrency,
                                      Path(tempfile.mkdtemp(prefix="agl-bench-proxied-"))))
    finally:
        delete_topics(make_admin(settings.bootstrap_servers), f"agl.{settings.experiment}")
    print_figures(f"proxied rollouts · {args.rollouts} rollouts · 1 runner x {args.concurrency}", figures)


if __name__ == "__main__":
    main()
