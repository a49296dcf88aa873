"""The training data plane's figures, on the local (or configured) broker.

    python -m agl_events.bench.samples [--rollouts 300] [--llm-calls 2] [--calls 200] [--token-delay 0]

Prints, as a table and a last line of JSON:
- proxy overhead per LLM call: the same chat completion against the fake vLLM-like backend directly and
  through the LLM proxy (sequence id from the store, spans durable on Kafka before the answer), p50/p99;
- samples/s from finished rollouts to a trainer batch: rollouts are claimed, traced (LLM calls with token
  ids) and finished in-process as fast as the store allows, while the samples worker (a child
  process, TracerTraceToTriplet) turns them into samples and a SampleStream batches them; throughput is
  rollouts over the time from the first finish to the last sample in a batch, latency is per rollout
  from its finish to its sample being handed out.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from agl_events.bench.store_latency import percentile, print_figures
from agl_events.broker.local import ensure_broker
from agl_events.config import Settings
from agl_events.events.codec import AvroCodec
from agl_events.llm.fake_backend import FakeBackend
from agl_events.llm.proxy import LLMProxy
from agl_events.log.writer import EventWriter
from agl_events.processors.background import samples_worker
from agl_events.samples.batching import BatchPolicy
from agl_events.samples.stream import SampleStream
from agl_events.server.embedded import embedded_store_server
from agl_events.store.kafka import KafkaLightningStore
from agl_events.tracer import KafkaTracer
from agl_events.types import EnqueueRolloutRequest

PROMPT_TOKENS = 200
RESPONSE_TOKENS = 50
RUNNERS = 8  # simulated runners finishing rollouts concurrently, as a runner pool would


def _trace_rollout(tracer: KafkaTracer, rid: str, aid: str, first_sequence_id: int, calls: int) -> None:
    """What an agent's trace looks like to the adapter: LLM calls with token ids. (No reward span: emitters
    write through the process's one active tracer, and these simulated runners share a process.)"""
    otel = tracer.get_tracer()
    with tracer.trace_context(rid, aid, first_sequence_id), otel.start_as_current_span("agent.run"):
        for call in range(calls):
            attributes: dict[str, Any] = {
                "gen_ai.response.id": f"{rid}-{call}",
                "prompt_token_ids": list(range(PROMPT_TOKENS)),
                "response_token_ids": list(range(RESPONSE_TOKENS)),
            }
            with otel.start_as_current_span("openai.chat.completion", attributes=attributes):
                pass


async def measure_samples(settings: Settings, rollouts: int, calls: int, work: Path) -> dict[str, float]:
    store = await KafkaLightningStore.open(settings, view_dir=work / "view")
    writer = EventWriter(settings.bootstrap_servers, settings.experiment, AvroCodec(), producer_id="bench-runner")
    finished_at: dict[str, float] = {}
    handed_at: dict[str, float] = {}
    worker = samples_worker(settings, work / "samples", work / "samples.log")
    stream = SampleStream(settings.bootstrap_servers, settings.experiment, AvroCodec(),
                          BatchPolicy(batch_size=32, grouped=False, modes=None), poll_timeout=0.05)
    try:
        queued = await store.enqueue_many_rollouts([EnqueueRolloutRequest(input=i) for i in range(rollouts)])

        async def consume() -> None:
            while len(handed_at) < rollouts:
                batch = await stream.next_batch(timeout=1.0, partial=True)
                now = time.perf_counter()
                for sample in batch.samples if batch is not None else []:
                    handed_at.setdefault(sample.rollout_id, now)
                if not worker.alive():
                    raise RuntimeError(f"the samples worker died:\n{worker.tail()}")

        consumer = asyncio.create_task(consume())
        todo = iter(queued)

        async def run(tracer: KafkaTracer) -> None:  # one simulated runner: one attempt at a time
            for rollout in todo:
                claim = await store.claim_rollout(rollout.rollout_id, "bench-runner")
                assert claim is not None
                rid, aid = rollout.rollout_id, claim.rollout.attempt.attempt_id
                await asyncio.to_thread(_trace_rollout, tracer, rid, aid, claim.next_sequence_id, calls)
                await store.finish_attempt(rid, aid, "succeeded", tracer.spans_through())
                finished_at[rid] = time.perf_counter()

        await asyncio.gather(*[run(KafkaTracer(writer)) for _ in range(RUNNERS)])
        await asyncio.wait_for(consumer, timeout=300)
    finally:
        stream.close()
        worker.stop()
        writer.close()
        await store.close()
    latencies = [(handed_at[rid] - finished_at[rid]) * 1000 for rid in finished_at]
    first = min(finished_at.values())
    return {
        "finished_per_s": rollouts / (max(finished_at.values()) - first),
        "samples_per_s": rollouts / (max(handed_at.values()) - first),
        "finish_to_batch_p50_ms": percentile(latencies, 0.5),
        "finish_to_batch_p99_ms": percentile(latencies, 0.99),
    }


async def measure_proxy(settings: Settings, calls: int, work: Path, token_delay: float) -> dict[str, float]:
    """The same chat call, alternately direct and through the proxy on one attempt's route."""
    async with embedded_store_server(settings, work / "proxy-view") as (store, url):
        with FakeBackend(token_delay=token_delay) as backend, LLMProxy(
                [{"model_name": "policy", "litellm_params": {"model": f"hosted_vllm/{backend.model}",
                                                             "api_base": backend.url}}], url, settings) as proxy:
            await store.enqueue_rollout({"bench": "proxy"})
            attempted = await store.dequeue_rollout("bench")
            assert attempted is not None
            route = proxy.as_resource(attempted.rollout_id, attempted.attempt.attempt_id, "policy").endpoint
            body = {"messages": [{"role": "user", "content": "what is two plus two"}], "max_tokens": 16}
            timings: dict[str, list[float]] = {"direct": [], "proxied": []}
            async with httpx.AsyncClient(timeout=60) as http:
                for i in range(calls + 5):  # the first few warm up connections and imports
                    for name, base, model in (("direct", backend.url, backend.model), ("proxied", route, "policy")):
                        started = time.perf_counter()
                        answer = await http.post(f"{base}/chat/completions", json={**body, "model": model})
                        answer.raise_for_status()
                        if i >= 5:
                            timings[name].append((time.perf_counter() - started) * 1000)
    overhead = [p - d for p, d in zip(timings["proxied"], timings["direct"], strict=True)]
    return {
        "direct_call_p50_ms": percentile(timings["direct"], 0.5),
        "proxied_call_p50_ms": percentile(timings["proxied"], 0.5),
        "proxy_overhead_p50_ms": percentile(overhead, 0.5),
        "proxy_overhead_p99_ms": percentile(overhead, 0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=300, help="finished rollouts to turn into samples")
    parser.add_argument("--llm-calls", type=int, default=2, help="LLM calls traced per rollout")
    parser.add_argument("--calls", type=int, default=200, help="chat calls each way for the proxy overhead")
    parser.add_argument("--token-delay", type=float, default=0.0,
                        help="seconds the fake backend takes per token (0: as fast as it can)")
    args = parser.parse_args()
    base = Settings.from_env()
    settings = base.model_copy(update={"bootstrap": ensure_broker(base),
                                       "experiment": f"bench-samples-{uuid.uuid4().hex[:8]}"})
    work = Path(tempfile.mkdtemp(prefix="agl-bench-samples-"))
    figures = asyncio.run(measure_proxy(settings, args.calls, work, args.token_delay))
    figures |= asyncio.run(measure_samples(settings, args.rollouts, args.llm_calls, work))
    print_figures(f"training data plane · {settings.bootstrap_servers} · {args.calls} calls · {args.rollouts} "
                  "rollouts", figures)


if __name__ == "__main__":
    main()
