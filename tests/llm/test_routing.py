"""The model list: LiteLLM's format (a list, or a config with `model_list`), checked when the proxy starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agl_events.llm.model_list import ModelConfig, load_model_list
from agl_events.llm.routing import ModelRouter, UnknownModelError


def test_a_litellm_config_file_is_a_model_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLICY_KEY", "sk-policy")
    config = tmp_path / "litellm.yaml"
    config.write_text("""
model_list:
  - model_name: policy
    litellm_params: {model: hosted_vllm/Qwen/Qwen2.5-0.5B, api_base: "http://gpu-1:8000/v1",
                     api_key: os.environ/POLICY_KEY, timeout: 30}
  - model_name: judge
    litellm_params: {model: openai/gpt-4o-mini}
    model_info: {return_token_ids: false}
litellm_settings: {num_retries: 0}
""")
    router = ModelRouter(load_model_list(config))
    assert router.names == ["policy", "judge"]


async def test_a_call_is_routed_to_its_deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLICY_KEY", "sk-policy")
    for name in ("OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "models.json"
    path.write_text(json.dumps([
        {"model_name": "policy", "litellm_params": {"model": "hosted_vllm/Qwen/Qwen2.5-0.5B",
                                                     "api_key": "os.environ/POLICY_KEY",
                                                     "api_base": "http://gpu-1:8000/v1"}},
        {"model_name": "judge", "litellm_params": {"model": "openai/gpt-4o-mini"},
         "model_info": {"return_token_ids": False}}]))
    router = ModelRouter(load_model_list(path))
    policy = await router.route("policy")
    assert (policy.backend_model, policy.provider, policy.url("chat/completions")) == (
        "Qwen/Qwen2.5-0.5B", "hosted_vllm", "http://gpu-1:8000/v1/chat/completions")
    assert policy.headers() == {"Authorization": "Bearer sk-policy"} and policy.asks_token_ids
    judge = await router.route("judge")
    assert judge.api_base == "https://api.openai.com/v1" and not judge.asks_token_ids and judge.asks_logprobs
    with pytest.raises(UnknownModelError, match="'gpt-5' is not in the proxy's model list; it serves: policy, judge"):
        await router.route("gpt-5")


def test_backends_that_do_not_speak_openai_are_refused_at_start() -> None:
    with pytest.raises(ValueError, match="no OpenAI-compatible endpoint for provider 'anthropic'"):
        ModelRouter([ModelConfig(model_name="claude", litellm_params={"model": "anthropic/claude-3-5-sonnet"})])


def test_a_file_that_is_no_model_list_says_what_one_is(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("litellm_settings: {}\n")
    with pytest.raises(ValueError, match="non-empty list of"):
        load_model_list(path)
