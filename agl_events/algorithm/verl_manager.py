"""The agent loop manager verl instantiates (`actor_rollout_ref.rollout.agent.agent_loop_manager_class`).

verl 0.9's trainer asks its agent loop manager for rollouts once per step (`generate_sequences`, the
batch's prompts repeated `rollout.n` times, rows of one prompt sharing `uid`) and for validation. This one
hands the rows to `KafkaRollouts` on the Trainer's event loop, so rollouts run on our runners through the
log, and returns their samples in verl's layout: one row per input row, the reward as `rm_scores` on the
last token (verl then skips its own reward loop), `response_mask`, the sampling-time `rollout_log_probs`,
and per row the weights version (verl step) that sampled it, `weights_version` (older than the step when
`KafkaRollouts.max_staleness` lets rollouts run ahead).

verl builds the manager itself, from its config; the config names the bridge (`agl_events.bridge`), which
`VERL` registers here for the length of a training run. So the manager runs in the process that runs
verl's trainer (where `VERL` runs it), not in a Ray actor elsewhere.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from verl import DataProto

from agl_events.algorithm.verl_rollouts import KafkaRollouts, task_from_row

FQN = "agl_events.algorithm.verl_manager.KafkaAgentLoopManager"

_BRIDGES: dict[str, tuple[KafkaRollouts, asyncio.AbstractEventLoop]] = {}


@contextmanager
def bridge(rollouts: KafkaRollouts, loop: asyncio.AbstractEventLoop) -> Iterator[str]:
    """Make `rollouts` (served on `loop`) reachable to managers verl builds, under the key yielded: put it in
    the config as `agl_events.bridge`."""
    key = uuid.uuid4().hex
    _BRIDGES[key] = (rollouts, loop)
    try:
        yield key
    finally:
        _BRIDGES.pop(key, None)


class KafkaAgentLoopManager:
    """verl's `AgentLoopManager` contract (`create`, `generate_sequences`) over `KafkaRollouts`."""

    def __init__(self, config: Any, llm_client: Any = None, teacher_client: Any = None,
                 reward_loop_worker_handles: Any = None) -> None:
        """verl passes its LLM server client and reward workers; rollouts go through our LLM proxy to the
        same vLLM servers and rewards come from the agents, so neither is used."""
        key = (config.get("agl_events") or {}).get("bridge")
        if key not in _BRIDGES:
            raise RuntimeError("KafkaAgentLoopManager serves agl_events.algorithm.VERL: it needs config "
                               "agl_events.bridge naming a bridge registered in this process")
        self.rollouts, self._loop = _BRIDGES[key]

    @classmethod
    def create(cls, *args: Any, **kwargs: Any) -> KafkaAgentLoopManager:
        return cls(*args, **kwargs)

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        """Blocks verl's training thread until every row's rollout has its sample."""
        uids = prompts.non_tensor_batch["uid"]
        columns = prompts.non_tensor_batch
        tasks = [task_from_row({key: values[i] for key, values in columns.items()}) for i in range(len(prompts))]
        step = int(prompts.meta_info.get("global_steps", 0))
        validate = bool(prompts.meta_info.get("validate", False))
        batch = asyncio.run_coroutine_threadsafe(
            self.rollouts.generate(tasks, [str(u) for u in uids], step=step, validate=validate), self._loop).result()
        tensors = dict(batch.tensors)
        tensors["rm_scores"] = tensors.pop("token_level_scores")
        stats = self.rollouts.last
        timing = {"agl_events/generate_s": stats.seconds, "agl_events/rollouts": float(stats.rollouts),
                  "agl_events/foreign_samples": float(stats.foreign_samples),
                  "agl_events/unmerged": float(stats.unmerged), "agl_events/empty": float(stats.empty),
                  "agl_events/truncated": float(stats.truncated),
                  "agl_events/max_lag": float(step - min(stats.versions)),
                  "agl_events/stale_groups": float(stats.dropped_groups),
                  "agl_events/stale_samples": float(stats.stale_samples)}
        return DataProto.from_dict(
            tensors=tensors, non_tensors={"uid": np.array(uids, dtype=object),
                                          "rollout_id": np.array(batch.rollout_ids, dtype=object),
                                          "weights_version": np.array(stats.versions)},
            meta_info={"timing": timing})
