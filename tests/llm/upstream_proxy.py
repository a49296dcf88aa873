"""Agent Lightning 0.3.0's own LLM proxy (LiteLLM) run on given requests: its answers and its spans, as JSON.

    python -m tests.llm.upstream_proxy result.json < job.json

The job names the model list and the requests (`{"path": "chat/completions", "body": {...}}`); each request
goes to a rollout attempt of its own in upstream's InMemoryLightningStore, so the spans of each call come
back apart; the result goes to a file (LiteLLM prints a banner on stdout). Run as a process of its own:
upstream's proxy installs LiteLLM callbacks and a global TracerProvider, which would leak into the tests'
process. Offline: LiteLLM's price list is the bundled one.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# upstream's proxy refuses to start without a master key; it serves on loopback for this run only
os.environ.setdefault("LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY", "true")

import httpx

from tests.eventually import eventually_async

CALL_SPANS = ("litellm_request", "raw_gen_ai_request")
SPANS_TIMEOUT = 60.0


async def run(job: dict[str, Any]) -> list[dict[str, Any]]:
    from agentlightning.llm_proxy import LLMProxy
    from agentlightning.store.memory import InMemoryLightningStore

    store = InMemoryLightningStore(thread_safe=True)
    proxy = LLMProxy(model_list=job["model_list"], store=store, launch_mode="thread", host="127.0.0.1")
    await proxy.start()
    results: list[dict[str, Any]] = []
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            for request in job["requests"]:
                rollout = await store.start_rollout(input={})
                base = proxy.as_resource(rollout.rollout_id, rollout.attempt.attempt_id,
                                         model=request["body"]["model"]).endpoint
                answer = await http.post(f"{base}/{request['path']}", json=request["body"])
                results.append({"status": answer.status_code, "text": answer.text,
                                "spans": await call_spans(store, rollout.rollout_id, request["path"])})
    finally:
        await proxy.stop()
    return results


async def call_spans(store: Any, rollout_id: str, path: str) -> list[dict[str, Any]]:
    """The call's spans once the proxy's exporter handed them all over (on its own thread, after answering, and
    not always in one batch: a streamed chat call's raw span once came after its litellm_request span). LiteLLM's
    OpenTelemetry makes a raw span for chat calls only, none for text completions."""
    wanted = set(CALL_SPANS) if path == "chat/completions" else {"litellm_request"}
    spans = await eventually_async(
        lambda: call_spans_now(store, rollout_id), f"upstream's {' and '.join(sorted(wanted))} spans of {rollout_id}",
        within=SPANS_TIMEOUT, until=lambda found: wanted <= {s.name for s in found})
    return [s.model_dump(mode="json") for s in spans]


async def call_spans_now(store: Any, rollout_id: str) -> list[Any]:
    return [s for s in await store.query_spans(rollout_id) if s.name in CALL_SPANS]


def main() -> None:
    results = asyncio.run(run(json.load(sys.stdin)))
    with open(sys.argv[1], "w") as out:
        json.dump(results, out)


if __name__ == "__main__":
    main()
