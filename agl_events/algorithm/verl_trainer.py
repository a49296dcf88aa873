"""VERL: verl 0.9's PPO/GRPO trainer (FSDP actor, vLLM rollout servers, its weight sync) fed from Kafka.

verl keeps what it is good at: log-probs, reference, advantages, the update, checkpoints and pushing each
new version's weights into its vLLM servers. Rollouts are ours: verl's agent loop manager is
`verl_manager.KafkaAgentLoopManager`, which turns each batch into rollouts on the task topic, run by the
runners with the user's agent, whose LLM calls go through our LLM proxy to verl's vLLM servers (the proxy
is started once verl has started them and knows their addresses), and reads the batch back from the
samples topic. So every rollout, span and sample of a verl run is in the log, as for GRPO.

With `max_staleness=k > 0` the runners run ahead of verl's trainer by up to `k` steps (`verl_rollouts`),
and verl's own rollout correction is turned on (decoupled mode, `OFF_POLICY_DEFAULTS`): the actor
recomputes each token's logprob under the weights the step starts from (`old_log_probs`, the proximal
policy), and the PPO-clipped loss around them is weighted per token by min(pi_old / pi_rollout, 2), with
pi_rollout the logprob the LLM proxy recorded when the token was sampled (`rollout_log_probs`), which is
`grpo_math.decoupled_loss`. verl's own run-ahead trainers are not used: docs/training-loop.md says why.

Configuration is verl's own (hydra overrides on its `ppo_trainer` config, as on verl's command line), with
defaults for one node: GRPO, vLLM, one agent loop worker, console logging. verl's trainer runs in this
process, on a thread (its loop is synchronous), with Ray for its GPU workers. Needs GPUs; the pieces that
do not (config, manager, batch layout) are tested on CPU.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agl_events.algorithm.base import AlgorithmContext, SplitResult
from agl_events.algorithm.grpo_math import IS_CAP
from agl_events.algorithm.verl_batch import Level
from agl_events.algorithm.verl_rollouts import TASK_COLUMN, KafkaRollouts
from agl_events.llm.proxy import LLMProxy
from agl_events.types import ProxyLLM

log = logging.getLogger(__name__)

#: Our defaults, each overridable by the caller's overrides of the same key (verl's own defaults otherwise).
DEFAULTS: dict[str, str] = {
    "algorithm.adv_estimator": "grpo",
    "actor_rollout_ref.rollout.name": "vllm",
    "actor_rollout_ref.rollout.n": "4",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": "1",
    "actor_rollout_ref.rollout.agent.num_workers": "1",
    "actor_rollout_ref.rollout.calculate_log_probs": "true",
    "data.train_batch_size": "16",
    "data.max_prompt_length": "512",
    "data.max_response_length": "512",
    "actor_rollout_ref.actor.ppo_mini_batch_size": "16",
    "trainer.n_gpus_per_node": "1",
    "trainer.nnodes": "1",
    "trainer.logger": "[console]",
    "trainer.total_epochs": "1",
    "trainer.save_freq": "-1",
    "trainer.test_freq": "5",
}


#: With rollouts running ahead: verl's rollout correction in decoupled mode, token-level importance weights
#: truncated at 2 (`grpo_math.IS_CAP`, verl's default threshold), each overridable as `DEFAULTS` are.
OFF_POLICY_DEFAULTS: dict[str, str] = {
    "algorithm.rollout_correction.rollout_is": "token",
    "algorithm.rollout_correction.rollout_is_threshold": str(IS_CAP),
    "algorithm.rollout_correction.bypass_mode": "false",
}


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def verl_config(model_path: str, overrides: Sequence[str] = (), *, bridge: str | None = None,
                max_staleness: int = 0) -> Any:
    """verl's `ppo_trainer` config for `model_path` (a Hugging Face model folder) with our defaults (and,
    with `max_staleness`, `OFF_POLICY_DEFAULTS`), then `overrides` (hydra syntax: `key=value`, `+key=value`
    for keys verl's files do not list), and our agent loop manager; `bridge` names the `KafkaRollouts` it
    uses (set by `VERL.run`)."""
    import verl
    from hydra import compose, initialize_config_dir

    given = {_key(o) for o in overrides}
    defaults = {**DEFAULTS, **(OFF_POLICY_DEFAULTS if max_staleness else {})}
    ours = [f"{k}={v}" for k, v in defaults.items() if k not in given]
    fixed = [f"actor_rollout_ref.model.path={model_path}",
             f"+actor_rollout_ref.rollout.agent.agent_loop_manager_class={_manager_fqn()}"]
    if bridge is not None:
        fixed.append(f"+agl_events.bridge={bridge}")
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        return compose("ppo_trainer", overrides=[*ours, *overrides, *fixed])


def _manager_fqn() -> str:
    from agl_events.algorithm.verl_manager import FQN

    return FQN


class _Tasks:
    """A dataset as verl's dataloader wants it: dict rows with one tensor (DataProto needs one)."""

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = list(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict[str, Any]:
        import torch

        return {TASK_COLUMN: self.items[index], "dummy_tensor": torch.tensor([0], dtype=torch.uint8)}


class _Proxy:
    """Our LLM proxy in front of verl's vLLM servers, started when verl has started them."""

    def __init__(self, ctx: AlgorithmContext, served_model: str, model: str) -> None:
        self.ctx, self.served_model, self.model = ctx, served_model, model
        self.proxy: LLMProxy | None = None
        self._started = threading.Event()

    def serve(self, addresses: Sequence[str]) -> None:
        if self.ctx.store_url is None or self.ctx.settings is None:
            raise RuntimeError("VERL needs the store URL and settings the Trainer gives its context")
        models = [{"model_name": self.model, "litellm_params": {"model": f"hosted_vllm/{self.served_model}",
                                                                "api_base": f"http://{address}/v1"}}
                  for address in addresses]
        # in a process of its own, as upstream's VERL runs its proxy: this one drives verl and serves the store
        self.proxy = LLMProxy(models, self.ctx.store_url, self.ctx.settings, launch_mode="mp").start()
        log.info("LLM proxy %s in front of verl's vLLM servers %s", self.proxy.url, ", ".join(addresses))
        self._started.set()

    def resource(self) -> ProxyLLM:
        if self.proxy is None:
            raise RuntimeError("rollouts asked for before verl started its vLLM servers")
        llm = self.proxy.as_resource(model=self.model)
        assert isinstance(llm, ProxyLLM)
        return llm

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()


class VERL:
    """verl's trainer on `model_path` (local Hugging Face folder) with `overrides`; rollouts through Kafka."""

    def __init__(self, model_path: str, overrides: Sequence[str] = (), *, level: Level = "trajectory",
                 model: str = "policy", rollout_timeout: float = 600.0, max_staleness: int = 0) -> None:
        """`level`: how a rollout's LLM calls become a training row (see `verl_batch`); `model`: the name
        agents ask the proxy for; `max_staleness`: how many steps rollouts may run ahead of verl's trainer
        (0: synchronous). verl prints each step's metrics (`trainer.logger`)."""
        self.model_path, self.overrides, self.level = model_path, list(overrides), level
        self.model, self.rollout_timeout, self.max_staleness = model, rollout_timeout, max_staleness

    async def run(self, ctx: AlgorithmContext, train: Sequence[Any], val: Sequence[Any] | None
                  ) -> dict[str, SplitResult]:
        try:
            import ray  # noqa: F401
            from transformers import AutoTokenizer
        except ImportError as exc:  # pragma: no cover - the training extra installs them
            raise RuntimeError("VERL needs verl and its GPU stack: pip install 'agl-events[gpu]'") from exc
        probe = verl_config(self.model_path, self.overrides, max_staleness=self.max_staleness)
        tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        proxy = _Proxy(ctx, self.model_path, self.model)
        rollout = probe.actor_rollout_ref.rollout
        rollouts = KafkaRollouts(ctx, proxy.resource, pad_token_id=pad,
                                 max_prompt_length=probe.data.max_prompt_length,
                                 max_response_length=probe.data.max_response_length, level=self.level,
                                 temperature=rollout.temperature, val_temperature=rollout.val_kwargs.temperature,
                                 timeout=self.rollout_timeout, max_staleness=self.max_staleness)
        from agl_events.algorithm.verl_manager import bridge

        async with rollouts:
            with bridge(rollouts, asyncio.get_running_loop()) as key:
                config = verl_config(self.model_path, self.overrides, bridge=key, max_staleness=self.max_staleness)
                try:
                    await asyncio.to_thread(_fit, config, train, val or train, proxy.serve)
                finally:
                    proxy.stop()
        return {}


def _fit(config: Any, train: Sequence[Any], val: Sequence[Any], on_servers: Callable[[Sequence[str]], None]
         ) -> None:
    """verl's own setup (as its `main_ppo` task runner does it, here in-process) and training loop."""
    import ray
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env
    from verl.trainer.main_ppo_v0 import BaseTaskRunner
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.utils.dataset.rl_dataset import collate_fn

    OmegaConf.resolve(config)
    if not ray.is_initialized():
        ray.init(runtime_env=get_ppo_ray_runtime_env(config))
    roles = BaseTaskRunner()
    _, worker_group_cls = roles.add_actor_rollout_worker(config)
    roles.add_critic_worker(config)
    roles.add_reward_model_resource_pool(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    model_config = omega_conf_to_dataclass(config.actor_rollout_ref.model)

    class Trainer(RayPPOTrainer):  # type: ignore[misc]
        def init_workers(self) -> None:
            super().init_workers()
            on_servers(self.llm_server_manager.server_addresses)

    trainer = Trainer(config=config, tokenizer=model_config.tokenizer, processor=model_config.processor,
                      role_worker_mapping=roles.role_worker_mapping,
                      resource_pool_manager=roles.init_resource_pool_mgr(config),
                      ray_worker_group_cls=worker_group_cls, train_dataset=_Tasks(train), val_dataset=_Tasks(val),
                      collate_fn=collate_fn)
    trainer.init_workers()
    trainer.fit()
