"""verl's agent loop seam on CPU: verl's own DataProto in, our runners through Kafka, verl's DataProto out.

Everything but the GPU: the manager verl would build (from a config naming the bridge) gets a batch in
verl's layout (prompts repeated per GRPO group, one row repeated as verl pads), the rollouts run on real
runner processes calling our tiny policy server through the LLM proxy, and the samples come back from the
samples topic as rows verl's GRPO advantage takes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from agl_events import Trainer
from agl_events.algorithm.base import AlgorithmContext, SplitResult
from agl_events.algorithm.verl_manager import KafkaAgentLoopManager, bridge
from agl_events.algorithm.verl_rollouts import TASK_COLUMN, KafkaRollouts, task_from_row
from agl_events.algorithm.verl_trainer import verl_config
from agl_events.config import Settings
from agl_events.demo.reverse import reverse_agent, reverse_tasks, reward_of
from agl_events.llm.proxy import LLMProxy
from agl_events.policy.model import Policy, PolicyConfig
from agl_events.policy.server import PolicyServer
from agl_events.policy.tokenizer import make_tokenizer
from agl_events.policy.weights import save_weights, weights_path
from agl_events.types import ProxyLLM


def _rows(tasks: list[dict[str, Any]], n: int, *, pad_with_first: bool = False) -> DataProto:
    """A gen batch as verl's fit hands it over: each task `n` times in a row, one uid per task."""
    items = [task for task in tasks for _ in range(n)]
    uids = [f"uid-{i}" for i in range(len(tasks)) for _ in range(n)]
    if pad_with_first:  # verl pads a batch to a multiple of its workers with copies of its first rows
        items, uids = [*items, items[0]], [*uids, uids[0]]
    return DataProto.from_dict(non_tensors={TASK_COLUMN: np.array(items, dtype=object),
                                            "uid": np.array(uids, dtype=object),
                                            "index": np.arange(len(items))})


class _VerlSide:
    """An algorithm standing in for verl's trainer: serves a policy, and asks the manager verl would build."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.outputs: list[DataProto] = []

    async def run(self, ctx: AlgorithmContext, train: Sequence[Any], val: Sequence[Any] | None
                  ) -> dict[str, SplitResult]:
        assert ctx.settings is not None and ctx.store_url is not None
        tokenizer = make_tokenizer()
        with PolicyServer(tokenizer, model="policy") as server:
            uri = save_weights(Policy(PolicyConfig(vocab_size=len(tokenizer))),
                               weights_path(self.home, ctx.settings.experiment, 1))
            server.load(uri, 1)
            models = [{"model_name": "policy", "litellm_params": {"model": "hosted_vllm/policy",
                                                                  "api_base": server.url}}]
            with LLMProxy(models, ctx.store_url, ctx.settings) as proxy:
                def llm() -> ProxyLLM:
                    resource = proxy.as_resource(model="policy")
                    assert isinstance(resource, ProxyLLM)
                    return resource

                async with KafkaRollouts(ctx, llm, pad_token_id=tokenizer.pad_token_id, max_prompt_length=16,
                                         max_response_length=8, timeout=120) as rollouts:
                    with bridge(rollouts, asyncio.get_running_loop()) as key:
                        manager = KafkaAgentLoopManager.create(config=OmegaConf.create({"agl_events": {"bridge": key}}),
                                                               llm_client=None)
                        train_rows = _rows(list(train), 3, pad_with_first=True)
                        train_rows.meta_info = {"global_steps": 1}
                        self.outputs.append(await asyncio.to_thread(manager.generate_sequences, train_rows))
                        val_rows = _rows(list(val or []), 1)
                        val_rows.meta_info = {"global_steps": 1, "validate": True}
                        self.outputs.append(await asyncio.to_thread(manager.generate_sequences, val_rows))
        return {}


@pytest.mark.kafka
def test_verl_batches_are_rolled_out_by_the_runners_and_come_back_in_verls_layout(settings: Settings,
                                                                                   tmp_path: Path) -> None:
    side = _VerlSide(tmp_path)
    tasks, val = reverse_tasks(4, seed=3), reverse_tasks(3, seed=4)
    Trainer(side, n_runners=2, adapter={"llm_call_match": "litellm_request"},
            settings=settings.model_copy(update={"home": tmp_path}), view_dir=tmp_path / "view", progress=False
            ).fit(reverse_agent, tasks, val_dataset=val)
    train, held_out = side.outputs
    tokenizer = make_tokenizer()

    assert len(train) == 4 * 3 + 1 and len(held_out) == 3  # one row per input row, the padding row included
    assert list(train.non_tensor_batch["uid"]) == [f"uid-{i}" for i in range(4) for _ in range(3)] + ["uid-0"]
    assert len(set(train.non_tensor_batch["rollout_id"])) == 13  # each row its own rollout
    t = train.batch
    assert t["prompts"].shape == (13, 16) and t["responses"].shape == (13, 8) and t["input_ids"].shape == (13, 24)
    assert set(t.keys()) >= {"attention_mask", "position_ids", "response_mask", "rm_scores", "rollout_log_probs"}
    # each row's reward is what the agent computed from the answer the policy gave in that row
    for row in range(13):
        task = tasks[row // 3] if row < 12 else tasks[0]
        answer = tokenizer.decode(t["responses"][row][t["response_mask"][row].bool()].tolist(),
                                  skip_special_tokens=True)
        assert t["rm_scores"][row].sum().item() == pytest.approx(reward_of(task, answer)), (row, answer)
    logprobs = t["rollout_log_probs"][t["response_mask"].bool()]
    assert (logprobs < 0).all()  # sampled tokens carry their sampling-time logprobs
    advantages, _ = compute_grpo_outcome_advantage(t["rm_scores"], t["response_mask"], train.non_tensor_batch["uid"])
    assert advantages.shape == (13, 8) and train.meta_info["timing"]["agl_events/rollouts"] == 13.0
    # synchronous (max_staleness=0): every row answered by its own rollout, sampled under this step's weights
    assert list(train.non_tensor_batch["weights_version"]) == [1] * 13
    assert train.meta_info["timing"]["agl_events/max_lag"] == 0.0
    assert held_out.batch["rm_scores"].shape == (3, 8)


def test_a_manager_without_its_bridge_says_what_it_needs() -> None:
    with pytest.raises(RuntimeError, match=r"agl_events\.bridge"):
        KafkaAgentLoopManager(OmegaConf.create({}))


def test_rows_give_back_the_task_or_their_own_fields_as_plain_python() -> None:
    assert task_from_row({TASK_COLUMN: {"digits": np.array([1, 2])}, "uid": "u", "index": 3}) == {"digits": [1, 2]}
    assert task_from_row({"question": "q", "extra_info": {"n": np.int64(2)}, "uid": "u", "raw_prompt": []}) == {
        "question": "q", "extra_info": {"n": 2}}


def test_verl_config_takes_our_defaults_the_callers_overrides_and_names_the_manager_and_bridge() -> None:
    config = verl_config("/models/tiny", ["actor_rollout_ref.rollout.n=8", "trainer.total_training_steps=3"],
                         bridge="k1")
    rollout = config.actor_rollout_ref.rollout
    assert (config.actor_rollout_ref.model.path, rollout.name, rollout.n) == ("/models/tiny", "vllm", 8)
    assert rollout.agent.agent_loop_manager_class == "agl_events.algorithm.verl_manager.KafkaAgentLoopManager"
    assert (config.algorithm.adv_estimator, config.trainer.total_training_steps, config.agl_events.bridge) == (
        "grpo", 3, "k1")
    assert list(config.trainer.logger) == ["console"]
