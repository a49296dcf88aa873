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

With `max_staleness=k > 0` training rollouts run ahead of verl's trainer: a call returns as soon as its rows
can be filled with finished groups at most `k` steps old (`verl_ahead.AheadPool`), and the groups left
unfinished stay in flight for the next calls, which is where the samples' recorded logprobs
(`rollout_log_probs`) matter: verl's rollout correction weighs each token by pi_old / pi_rollout
(`verl_trainer` turns it on). Validation rollouts never run ahead.

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
from agl_events.algorithm.verl_ahead import AheadPool, Taken
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
    #: Per row: the weights version (verl step) its group was enqueued under.
    versions: tuple[int, ...] = ()
    #: Groups given up as more than `max_staleness` steps old at this call, and samples of given-up groups
    #: that came back during it.
    dropped_groups: int = 0
    stale_samples: int = 0


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
    #: How many steps behind verl's current one a trained group may have been enqueued (0: synchronous).
    max_staleness: int = 0
    last: GenerateStats = field(default_factory=GenerateStats)
    _streams: dict[str, SampleStream] = field(default_factory=dict)
    _pools: dict[str, AheadPool] = field(default_factory=dict)

    async def __aenter__(self) -> KafkaRollouts:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for stream in self._streams.values():
            await stream.__aexit__(None, None, None)
        self._streams.clear()

    async def generate(self, tasks: Sequence[Any], uids: Sequence[str], *, step: int, validate: bool = False
                       ) -> VerlBatch:
        """One rollout per row (`tasks[i]` in group `uids[i]`) under the weights of `step`, and a batch row
        per input row, in row order: each row's own sample, or with `max_staleness` (training) a sample of a
        finished group of the same size up to that many steps older. Raises TimeoutError if the rows cannot
        be filled within `timeout`."""
        if len(tasks) != len(uids):
            raise ValueError(f"{len(tasks)} tasks for {len(uids)} uids")
        started = time.monotonic()
        mode = "val" if validate else "train"
        pool = self._pools.setdefault(mode, AheadPool(0 if validate else self.max_staleness))
        dropped, foreign, stale = pool.publish(step), pool.foreign_samples, pool.stale_samples
        llm = self.llm()
        temperature = self.val_temperature if validate else self.temperature
        published = await self.ctx.publish_resources({"llm": llm.model_copy(update={
            "version": step, "sampling_parameters": {**llm.sampling_parameters, "temperature": temperature}})})
        rows_of: dict[str, list[int]] = {}
        for row, uid in enumerate(uids):
            rows_of.setdefault(str(uid), []).append(row)
        own = await self._enqueue(tasks, rows_of, mode, published.resources_id, pool, step)
        taken = await self._collect(pool, own, mode)
        rows: dict[int, Sample] = {}
        versions = [0] * len(tasks)
        for uid, samples in taken.samples.items():
            for row, sample in zip(rows_of[uid], samples, strict=True):
                rows[row], versions[row] = sample, taken.versions[uid]
        batch = verl_batch([rows[row] for row in range(len(tasks))], pad_token_id=self.pad_token_id,
                           max_prompt_length=self.max_prompt_length, max_response_length=self.max_response_length,
                           level=self.level, one_row_per_sample=True)
        self.last = GenerateStats(len(tasks), time.monotonic() - started, pool.foreign_samples - foreign,
                                  batch.unmerged, batch.empty, batch.truncated_responses, tuple(versions), dropped,
                                  pool.stale_samples - stale)
        log.info("step %d %s: %d rollouts in %.1f s, lags %s, %d groups given up as stale", step, mode, len(tasks),
                 self.last.seconds, sorted({step - v for v in versions}), dropped)
        return batch

    async def _enqueue(self, tasks: Sequence[Any], rows_of: dict[str, list[int]], mode: str, resources_id: str,
                       pool: AheadPool, version: int) -> dict[str, str]:
        """A group per uid, of as many rollouts as it has rows, wherever they sit (verl pads a batch to a
        multiple of its workers by repeating rows), then as many more groups of the uids' tasks, in turn, as
        `pool` wants in flight (data id `uid+n`), all added to `pool`: uid -> the key of its own group."""
        uids = list(rows_of)
        extra = max(0, pool.top_up(len(uids)) - len(uids))
        plan = [(uid, uid) for uid in uids] + [(uids[i % len(uids)], f"{uids[i % len(uids)]}+{i // len(uids) + 1}")
                                               for i in range(extra)]
        by_size: dict[int, list[tuple[str, str]]] = {}
        for uid, data_id in plan:
            by_size.setdefault(len(rows_of[uid]), []).append((uid, data_id))
        own: dict[str, str] = {}
        for size, groups in by_size.items():
            queued = await self.ctx.enqueue_groups([tasks[rows_of[uid][0]] for uid, _ in groups], size, mode,
                                                   resources_id, data_ids=[data_id for _, data_id in groups])
            for n, (uid, data_id) in enumerate(groups):
                key = pool.add([r.rollout_id for r in queued[n * size:(n + 1) * size]], version)
                if data_id == uid:
                    own[uid] = key
        return own

    async def _collect(self, pool: AheadPool, own: dict[str, str], mode: str) -> Taken:
        """Samples from the stream into `pool` until it can fill the slots `own`."""
        stream = self._streams.get(mode)
        if stream is None:
            if self.ctx.settings is None:
                raise RuntimeError("KafkaRollouts needs the context's settings (the Trainer sets them)")
            policy = BatchPolicy(batch_size=1, modes=frozenset({mode}))  # whole groups, as they complete
            group = f"{default_group(self.ctx.settings.experiment)}-verl-{mode}"
            stream = self._streams[mode] = self.ctx.sample_stream(policy, group=group)
        deadline = time.monotonic() + self.timeout
        while (taken := pool.take(own)) is None:
            batch = await stream.next_batch(timeout=max(0.0, deadline - time.monotonic()))
            if batch is None:
                raise TimeoutError(f"the {len(own)} groups of a {mode} batch had no finished groups to fill them "
                                   f"within {self.timeout:.0f} s")
            for sample in batch.samples:
                pool.offer(sample)
        await stream.commit()
        return taken
