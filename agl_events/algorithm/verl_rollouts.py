"""verl's rollouts, made by our runners and read back from the samples topic.

What verl's agent loop does in-process (send each prompt to vLLM, score it), agl-events does through the
log: each batch row becomes a rollout on the task topic, run by a runner with the agent's own code, its LLM
calls going through the LLM proxy to verl's vLLM servers (token ids and logprobs recorded in spans); the
samples worker turns the finished rollout into a sample; this bridge waits for exactly the samples of its
rollouts and lays them out as verl's batch (`verl_batch`, one row per input row, in the input's order).

Rows sharing verl's `uid` (the GRPO group: one prompt repeated `rollout.n` times) become one group of
rollouts sharing a data id, so the samples are grouped as well. Each call names the resources version it
runs under: per step a `ProxyLLM` whose `version` is verl's global step (verl syncs the new weights into
the vLLM servers before it asks for rollouts), so every sample records which weights produced it.

No verl import here: the manager verl instantiates (`verl_manager`) calls `generate` on the Trainer's
event loop, and the tests call it directly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agl_events.algorithm.base import AlgorithmContext
from agl_events.algorithm.verl_batch import Level, VerlBatch, verl_batch
from agl_events.samples.batching import BatchPolicy
from agl_events.samples.model import Sample
from agl_events.samples.stream import SampleStream, default_group
from agl_events.types import ProxyLLM

log = logging.getLogger(__name__)

#: The column of a `VERL` dataset that holds each task as it was given.
TASK_COLUMN = "agl_task"
#: Keys verl adds to a batch row for its own agent loop, not part of the task a runner gets.
VERL_ROW_KEYS = frozenset({"uid", "index", "raw_prompt", "raw_prompt_ids", "tools_kwargs", "interaction_kwargs",
                           "agent_name", "priority", "__do_sample__", "dummy_tensor", "fake_ids",
                           "multi_modal_data", "multi_modal_inputs"})


def native(value: Any) -> Any:
    """A batch row's value as plain JSON-able Python (numpy arrays and scalars inside), for the task topic."""
    if isinstance(value, dict):
        return {str(k): native(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [native(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars, torch tensors
        return native(value.tolist())
    return value


def task_from_row(row: dict[str, Any]) -> Any:
    """The task of one verl batch row, as the agent gets it: the item `VERL`'s dataset keeps under
    `TASK_COLUMN`, or, for verl's own datasets (parquet files), the row's fields without verl's keys."""
    if TASK_COLUMN in row:
        return native(row[TASK_COLUMN])
    return native({k: v for k, v in row.items() if k not in VERL_ROW_KEYS})


@dataclass
class GenerateStats:
    """What one `generate` did (verl logs it as timing / metrics)."""

    rollouts: int = 0
    seconds: float = 0.0
    foreign_samples: int = 0  # other trainers' or older runs' samples, passed over
    unmerged: int = 0
    empty: int = 0
    truncated: int = 0


@dataclass
class KafkaRollouts:
    """Rollouts for verl's batches, through the runners: use as `async with`."""

    ctx: AlgorithmContext
    #: The `ProxyLLM` the runners call (the LLM proxy in front of verl's vLLM servers), without a version.
    llm: Callable[[], ProxyLLM]
    pad_token_id: int
    max_prompt_length: int
    max_response_length: int
    level: Level = "trajectory"
    temperature: float = 1.0
    val_temperature: float = 0.0
    timeout: float = 600.0
    last: GenerateStats = field(default_factory=GenerateStats)
    _streams: dict[str, SampleStream] = field(default_factory=dict)

    async def __aenter__(self) -> KafkaRollouts:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for stream in self._streams.values():
            await stream.__aexit__(None, None, None)
        self._streams.clear()

    async def generate(self, tasks: Sequence[Any], uids: Sequence[str], *, step: int, validate: bool = False
                       ) -> VerlBatch:
        """One rollout per row (`tasks[i]` in group `uids[i]`) under the weights of `step`; their samples
        as one batch row each, in row order. Raises TimeoutError if they are not all back in `timeout`."""
        started = time.monotonic()
        mode = "val" if validate else "train"
        llm = self.llm()
        temperature = self.val_temperature if validate else self.temperature
        published = await self.ctx.publish_resources({"llm": llm.model_copy(update={
            "version": step, "sampling_parameters": {**llm.sampling_parameters, "temperature": temperature}})})
        row_rollouts = await self._enqueue(tasks, uids, mode, published.resources_id)
        samples, foreign = await self._collect(row_rollouts, mode)
        batch = verl_batch([samples[rid] for rid in row_rollouts], pad_token_id=self.pad_token_id,
                           max_prompt_length=self.max_prompt_length, max_response_length=self.max_response_length,
                           level=self.level, one_row_per_sample=True)
        self.last = GenerateStats(len(row_rollouts), time.monotonic() - started, foreign, batch.unmerged,
                                  batch.empty, batch.truncated_responses)
        log.info("step %d %s: %d rollouts in %.1f s", step, mode, len(row_rollouts), self.last.seconds)
        return batch

    async def _enqueue(self, tasks: Sequence[Any], uids: Sequence[str], mode: str, resources_id: str) -> list[str]:
        """Rollout ids in row order. Rows of one uid are one group, wherever they sit (verl pads a batch to a
        multiple of its workers by repeating rows)."""
        if len(tasks) != len(uids):
            raise ValueError(f"{len(tasks)} tasks for {len(uids)} uids")
        rows_of: dict[str, list[int]] = {}
        for row, uid in enumerate(uids):
            rows_of.setdefault(str(uid), []).append(row)
        by_size: dict[int, list[str]] = {}
        for uid, rows in rows_of.items():
            by_size.setdefault(len(rows), []).append(uid)
        row_rollouts = [""] * len(tasks)
        for size, group_uids in by_size.items():
            queued = await self.ctx.enqueue_groups([tasks[rows_of[uid][0]] for uid in group_uids], size, mode,
                                                   resources_id, data_ids=group_uids)
            for n, rollout in enumerate(queued):
                row_rollouts[rows_of[group_uids[n // size]][n % size]] = rollout.rollout_id
        return row_rollouts

    async def _collect(self, rollout_ids: list[str], mode: str) -> tuple[dict[str, Sample], int]:
        """The samples of `rollout_ids`, and how many others were passed over."""
        stream = self._streams.get(mode)
        if stream is None:
            if self.ctx.settings is None:
                raise RuntimeError("KafkaRollouts needs the context's settings (the Trainer sets them)")
            policy = BatchPolicy(batch_size=1, modes=frozenset({mode}))  # whole groups, as they complete
            group = f"{default_group(self.ctx.settings.experiment)}-verl-{mode}"
            stream = self._streams[mode] = self.ctx.sample_stream(policy, group=group)
        wanted, got, foreign = set(rollout_ids), {}, 0
        deadline = time.monotonic() + self.timeout
        while len(got) < len(wanted):
            batch = await stream.next_batch(timeout=max(0.0, deadline - time.monotonic()))
            if batch is None:
                raise TimeoutError(f"{len(wanted) - len(got)} of {len(wanted)} {mode} rollouts had no sample "
                                   f"within {self.timeout:.0f} s")
            for sample in batch.samples:
                if sample.rollout_id in wanted:
                    got[sample.rollout_id] = sample
                else:
                    foreign += 1
        await stream.commit()
        return got, foreign
