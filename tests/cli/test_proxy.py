"""`agl-events proxy`: the LLM proxy as its own process, in front of a LiteLLM config's backend."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from agl_events.cli.main import app
from agl_events.config import Settings
from agl_events.llm.fake_backend import FakeBackend
from agl_events.proc.ports import free_port
from agl_events.server.process import StoreProcess
from tests.eventually import eventually

pytestmark = pytest.mark.kafka


def wait_healthy(url: str, proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    def healthy() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"the proxy exited: {proc.communicate()[0][-3000:]}")
        return httpx.get(f"{url}/health", timeout=2).status_code == 200

    eventually(healthy, "the proxy answering /health", within=timeout, ignoring=(httpx.HTTPError,))


def test_the_proxy_command_serves_a_litellm_config(settings: Settings, tmp_path: Path) -> None:
    config = tmp_path / "litellm.yaml"
    store = StoreProcess(settings, tmp_path / "views", tmp_path / "store.log")
    with FakeBackend() as backend:
        config.write_text(f"model_list:\n  - model_name: policy\n    litellm_params:\n"
                          f"      model: hosted_vllm/{backend.model}\n      api_base: {backend.url}\n")
        store.start()
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers, "--experiment",
             settings.experiment, "proxy", "--model-list", str(config), "--port", str(port),
             "--store-url", store.base.removesuffix("/v1/agl"), "--log-level", "warning"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
        try:
            proxy = f"http://127.0.0.1:{port}"
            wait_healthy(proxy, proc)
            rollout = httpx.post(f"{store.base}/rollouts", json={"input": {}}, timeout=10).json()
            rid, aid = rollout["rollout_id"], rollout["attempt"]["attempt_id"]
            reply = httpx.post(f"{proxy}/rollout/{rid}/attempt/{aid}/v1/chat/completions", timeout=30,
                               json={"model": "policy", "messages": [{"role": "user", "content": "hi"}]})
            assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "Echo: hi"
            httpx.post(f"{store.base}/rollouts/{rid}/attempts/{aid}", json={"status": "succeeded"}, timeout=30)
            spans = httpx.get(f"{store.base}/spans", params={"rollout_id": rid}, timeout=10).json()["items"]
            assert sorted(s["name"] for s in spans) == ["litellm_request", "raw_gen_ai_request"]
            assert {s["attempt_id"] for s in spans} == {aid}
        finally:
            proc.terminate()
            output = proc.communicate(timeout=30)[0]
            store.stop()
    assert proc.returncode in (0, -signal.SIGTERM), output[-3000:]  # uvicorn re-raises it once shut down
    assert "LLM proxy on" in output


def test_a_model_list_the_proxy_cannot_serve_is_refused(settings: Settings, tmp_path: Path) -> None:
    config = tmp_path / "models.yaml"
    config.write_text("- model_name: claude\n  litellm_params: {model: anthropic/claude-3-5-sonnet}\n")
    result = CliRunner().invoke(app, ["--bootstrap", settings.bootstrap_servers, "proxy", "--model-list",
                                      str(config)])
    assert result.exit_code == 2
    assert "provider 'anthropic'" in result.output
