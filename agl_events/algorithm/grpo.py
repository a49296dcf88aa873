"""GRPO on the torch policy, through the whole loop: runners sample via the LLM proxy from the policy
server, the samples worker turns rollouts into samples, and each step trains on whole groups and publishes
the next weights version.

One step: enqueue `prompts_per_step` tasks x `group_size` rollouts under the latest version, take one batch
of complete groups from the sample stream, normalise rewards within each group, take `epochs` PPO-clipped
steps on the recorded token ids with the logprobs recorded at sampling time as the old policy, write the
weights as the next version, commit the step, then load the version into the server and publish it. The
update and the write run in a learner process of its own (`grpo_learner.LearnerProcess`): this interpreter
also runs the store, the LLM proxy and the policy server, whose Python threads held a large policy's update
back on the GIL.

Each step is exactly-once (docs/training-loop.md, "Exactly-once steps"): its weights file (named by version)
is written first, then its record (`samples.steps.StepRecord`: the samples trained and dropped as stale) and
the sample stream's offsets are committed in one Kafka transaction (`samples.step_log.StepLog`), and only
then are the weights published. A trainer started again on the same experiment and home (SIGKILLed at any
point) resumes after the last committed step: its weights and optimiser state, the stream's committed
offsets, and the ids every committed step took, which it never takes again (`grpo_learner.open_learner`).

`max_staleness=0` is the synchronous loop: each step enqueues the groups it trains on and waits for them,
so runners idle while the trainer trains. `max_staleness=k > 0` pipelines: the loop keeps `k + 1` steps'
worth of groups in flight (`in_flight.InFlight`), so runners go on sampling under the newest weights the
policy server holds while a step trains; a batch takes whole groups enqueued at most `k` versions before the
weights the step starts from, older ones are skipped by the batcher and given up (counted) by the loop, which
enqueues fresh ones instead. Such samples were drawn by older weights: the update is decoupled PPO
(`grpo_math.decoupled_loss`), clipped around the step's starting weights and weighted by the truncated
importance weight against the logprobs the proxy recorded when each token was sampled.

Evaluation goes through the runners too (`ctx.run_split(val, "val")`): the agent decodes greedily for
rollouts that are not training ones, and the split's mean reward is the held-out success (`history`).

A step depends only on what it trains on: the initial weights come from `seed`, and a batch is put in a
canonical order (groups by group id, samples by sample id) before it becomes tensors, so the order samples
arrived in from the partitions changes nothing. That makes a run reproducible from its recorded samples:
`retrain` takes the same steps over the batches `samples.history.ReplayedSampleStream` reads back, with no
runners, store or servers, and ends at the weights the live run published last (bit for bit, on the same
machine and torch build); `samples.history.StepBatches` gives the exact batches of any run from its step
records.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from itertools import cycle, islice
from pathlib import Path
from typing import Any

import torch

from agl_events.algorithm.base import AlgorithmContext, SplitResult
from agl_events.algorithm.grpo_learner import LearnerProcess, LearnerStart
from agl_events.algorithm.grpo_math import IS_CAP, group_advantages
from agl_events.algorithm.grpo_update import PolicyUpdate, Tokens
from agl_events.algorithm.in_flight import InFlight
from agl_events.config import Settings
from agl_events.llm.proxy import LLMProxy
from agl_events.llm.serving import LaunchMode
from agl_events.policy.model import Policy, PolicyConfig
from agl_events.policy.server import PolicyServer
from agl_events.policy.tokenizer import make_tokenizer
from agl_events.policy.weights import save_weights
from agl_events.proc.crash import crash_point
from agl_events.samples.batching import BatchPolicy, SampleBatch
from agl_events.samples.model import Sample, group_id
from agl_events.samples.step_log import StepLog, read_steps
from agl_events.samples.steps import StepRecord, accounted_ids, last_step
from agl_events.types import ProxyLLM, ResourcesUpdate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Evaluation:
    """Held-out success after `step` training steps: mean reward, and the share answered exactly right."""

    step: int
    version: int
    mean_reward: float
    exact: float


@dataclass(frozen=True)
class StepStats:
    """One training step: the version it started from, the groups it trained on and how many versions
    behind that version each was enqueued (`lags`, 0 when synchronous; this trainer's groups only), the
    groups given up as too stale once it published, the samples the batcher has skipped as stale so far, and
    the seconds the trainer spent on it from its batch in hand to the version published (`busy_seconds`:
    what the benchmarks' trainer idle share is the rest of)."""

    step: int
    version: int
    groups: int
    lags: tuple[int, ...]
    dropped_groups: int
    stale_samples: int
    busy_seconds: float


class GRPO:
    """`steps` GRPO steps of the policy (`policy`, default a 2-layer d=32 transformer) served as `model`."""

    def __init__(self, steps: int = 30, prompts_per_step: int = 8, group_size: int = 8, *, lr: float = 5e-3,
                 epochs: int = 2, clip: float = 0.2, grad_clip: float = 1.0, temperature: float = 1.0,
                 entropy_coef: float = 0.0, is_cap: float = IS_CAP,
                 max_staleness: int = 0, eval_every: int = 10, policy: PolicyConfig | None = None,
                 model: str = "policy", batch_timeout: float = 300.0, seed: int = 0,
                 on_step: Callable[[int, float], None] | None = None,
                 on_eval: Callable[[Evaluation], None] | None = None,
                 proxy_launch_mode: LaunchMode = "mp") -> None:
        """`entropy_coef` weighs an entropy bonus in the loss (0: plain GRPO). `max_staleness` bounds how many
        versions behind a trained group may be (0: synchronous, see the module's docstring), `is_cap` truncates
        the importance weights that correct for it (`grpo_math.IS_CAP`). `seed` fixes the initial weights:
        it becomes the policy config's seed, under which `Policy` draws them (`torch.manual_seed` inside
        `fork_rng`, so the caller's random state is untouched); a `policy` config that sets another seed
        explicitly is refused rather than silently overridden. `on_step(steps_done, mean_train_reward)` runs
        after each step is published, `on_eval` after each held-out evaluation: for progress displays (the
        demo's), on the trainer's event loop. `proxy_launch_mode` is where the LLM proxy runs (`LLMProxy`): "mp",
        a process of its own, since this one also serves the store and the policy and is a step's bound with
        the proxy on a thread of it; "thread" starts seconds sooner, for runs of a few small steps."""
        if policy is not None and "seed" in policy.model_fields_set and policy.seed != seed:
            raise ValueError(f"GRPO seed={seed} but its policy config sets seed={policy.seed}: give it once")
        self.steps, self.prompts_per_step, self.group_size = steps, prompts_per_step, group_size
        self.lr, self.epochs, self.clip, self.grad_clip = lr, epochs, clip, grad_clip
        self.temperature, self.max_staleness, self.eval_every = temperature, max_staleness, eval_every
        self.entropy_coef, self.is_cap = entropy_coef, is_cap
        self.tokenizer = make_tokenizer()
        self.policy_config = (policy or PolicyConfig(vocab_size=len(self.tokenizer))).model_copy(update={"seed": seed})
        self.model, self.batch_timeout = model, batch_timeout
        self.on_step, self.on_eval = on_step, on_eval
        self.proxy_launch_mode: LaunchMode = proxy_launch_mode
        self.history: list[Evaluation] = []
        #: Per step: the mean training reward of its batch.
        self.train_rewards: list[float] = []
        #: Per step of the last `run`: what it trained on and what was given up as stale.
        self.records: list[StepStats] = []
        #: The last `run`'s groups in flight: enqueued, trained, dropped, still pending at the end.
        self.in_flight = InFlight(prompts_per_step, max_staleness)

    async def run(self, ctx: AlgorithmContext, train: Sequence[Any], val: Sequence[Any] | None
                  ) -> dict[str, SplitResult]:
        if ctx.store_url is None or ctx.settings is None:
            raise RuntimeError("GRPO needs the store URL and settings the Trainer gives its context")
        settings = ctx.settings
        flight = self.in_flight = InFlight(self.prompts_per_step, self.max_staleness)
        self.records = []
        results: dict[str, SplitResult] = {}
        batches = BatchPolicy(batch_size=self.prompts_per_step * self.group_size, group_size=self.group_size,
                              max_staleness=self.max_staleness)
        async with AsyncExitStack() as stack:
            stream = await stack.enter_async_context(ctx.sample_stream(batches, recorded=True))
            steps = await StepLog.open(settings.bootstrap_servers, settings.experiment, stream)  # fences the last
            stack.push_async_callback(asyncio.to_thread, steps.close)
            committed = await asyncio.to_thread(read_steps, settings.bootstrap_servers, settings.experiment)
            stream.known(accounted_ids(committed))
            server = stack.enter_context(PolicyServer(self.tokenizer, model=self.model))
            models = [{"model_name": self.model,
                       "litellm_params": {"model": f"hosted_vllm/{self.model}", "api_base": server.url}}]
            proxy = LLMProxy(models, ctx.store_url, settings, launch_mode=self.proxy_launch_mode)
            stack.push_async_callback(asyncio.to_thread, proxy.stop)  # off the loop too (a process: a join)
            # The learner's process (a new interpreter importing torch, which its parent waits for while it hands
            # the state over) and a proxy process (one importing LiteLLM) take seconds each to start: side by
            # side, and off the loop, which serves the store meanwhile.
            learning, serving = await asyncio.gather(
                asyncio.to_thread(self._start_learner, settings, last_step(committed)),
                asyncio.to_thread(proxy.start), return_exceptions=True)
            if isinstance(learning, BaseException):
                raise learning
            learner, done, uri = learning
            stack.callback(learner.stop)
            if isinstance(serving, BaseException):
                raise serving
            # the tasks the next step would take, numbered: a task's number is its group's data id
            tasks = enumerate(islice(cycle(train), done * self.prompts_per_step, None),
                              start=done * self.prompts_per_step)
            published = await self._publish(ctx, proxy, server, uri, done + 1)
            for step in range(done, self.steps + 1):
                if val and (step in (done, self.steps) or step % self.eval_every == 0):
                    results["val"] = await self._evaluate(ctx, val, step, server.version or 0, published)
                if step == self.steps:
                    break
                await self._enqueue(ctx, flight, list(islice(tasks, flight.wanted(self.steps - step))),
                                    version=step + 1)
                batch = await stream.next_batch(timeout=self.batch_timeout)
                if batch is None:
                    raise TimeoutError(f"no complete batch within {self.batch_timeout:.0f} s at step {step}")
                busy_from = time.perf_counter()
                versions = flight.train({group[0].group_id for group in batch.groups})
                tokens = self._tokens(batch.groups)
                uri = await asyncio.to_thread(learner.step, tokens, step + 2)
                await steps.commit(steps.record(step, step + 2, uri, batch, stream.drain_stale()),
                                   before_commit=lambda step=step: crash_point("in-transaction", step))
                crash_point("committed", step)
                published = await self._publish(ctx, proxy, server, uri, step + 2)
                lags = tuple(sorted(step + 1 - v for v in versions))
                record = StepStats(step, step + 1, len(batch.groups), lags, flight.publish(step + 2),
                                   stream.stats.skipped_stale, time.perf_counter() - busy_from)
                self.records.append(record)
                log.info("step %d: mean reward %.3f, %d sequences, lags %s, %d groups given up as stale "
                         "(%d samples skipped as stale so far)", step, self.train_rewards[-1],
                         len(tokens.prompts), record.lags, record.dropped_groups, record.stale_samples)
                if self.on_step is not None:
                    self.on_step(step + 1, self.train_rewards[-1])
        return results

    async def _enqueue(self, ctx: AlgorithmContext, flight: InFlight, tasks: list[tuple[int, Any]], version: int
                       ) -> None:
        """A group of `group_size` rollouts per numbered task, under the latest resources (weights `version`),
        each task's number its data id: two groups of one task under one version stay two groups."""
        if not tasks:
            return
        rollouts = await ctx.enqueue_groups([task for _, task in tasks], self.group_size,
                                            data_ids=[str(number) for number, _ in tasks])
        flight.add((group_id(r.input, r.metadata, r.resources_id) for r in rollouts), version)

    def retrain(self, batches: Iterable[SampleBatch], *, save_to: Path | None = None,
                on_step: Callable[[int, float], None] | None = None) -> Policy:
        """The live loop's training, offline: from the seeded initial weights and a fresh Adam, one step
        (`_tokens` + `_update`) per batch, in the order given; no runners, store, servers or publishing.

        Fed a `ReplayedSampleStream` of a finished synchronous run (one batch per resources generation), or
        the `StepBatches` its step records name (any run, pipelined or restarted), it ends at the weights
        that run published last, given the same hyperparameters and seed. `train_rewards` is this
        retrain's, one entry per step (cleared first); `on_step` (default the constructor's) runs after each
        step. With `save_to`, the weights are written there after each step as the live run names its
        versions: `v1.pt` the initial weights, `v{k+1}.pt` after step k, so each compares with its live twin.

        Trained on one intra-op thread, as the live loop's learner process is:
        float sums split across threads could otherwise differ in their last bits."""
        on_step = on_step or self.on_step
        policy = Policy(self.policy_config)
        optimizer = torch.optim.Adam(policy.parameters(), lr=self.lr)
        self.train_rewards = []
        if save_to is not None:
            save_weights(policy, save_to / "v1.pt")
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for step, batch in enumerate(batches, start=1):
                self._update(policy, optimizer, self._tokens(batch.groups))
                if save_to is not None:
                    save_weights(policy, save_to / f"v{step + 1}.pt")
                if on_step is not None:
                    on_step(step, self.train_rewards[-1])
        finally:
            torch.set_num_threads(threads)
        return policy

    def _start_learner(self, settings: Settings, last: StepRecord | None) -> tuple[LearnerProcess, int, str]:
        """The learner process, started fresh or after the last committed step `last`, once its policy is made:
        with the steps done and the URI of the weights it starts from. Blocking: call it in a thread."""
        learner = LearnerProcess(self._rule(), LearnerStart(self.policy_config, self.lr, last), settings.home,
                                 settings.experiment).start()
        try:
            started = learner.ready()
        except BaseException:
            learner.stop()
            raise
        if last is not None:
            if not started.optimizer_restored:
                log.warning("no optimiser state saved with weights v%d: resuming with a fresh optimiser",
                            last.version)
            log.info("resuming from weights v%d (%d steps done)", last.version, started.done)
        return learner, started.done, started.weights_uri

    async def _publish(self, ctx: AlgorithmContext, proxy: LLMProxy, server: PolicyServer, uri: str, version: int
                       ) -> ResourcesUpdate:
        """Serve weights `version` (committed) and publish them: rollouts enqueued from now on use them. A
        resumed trainer publishes the version it resumed from once more, since the resources of the trainer
        that stopped name its own proxy (and a trainer killed between its commit and this publishes it here
        for the first time). The file is read in a worker thread, off the event loop that serves the store."""
        await asyncio.to_thread(server.load, uri, version)
        base = proxy.as_resource(model=self.model)
        llm = ProxyLLM(**base.model_dump(exclude={"resource_type", "sampling_parameters"}), weights_uri=uri,
                       version=version, sampling_parameters={"temperature": self.temperature})
        return await ctx.publish_resources({"llm": llm})

    async def _evaluate(self, ctx: AlgorithmContext, val: Sequence[Any], step: int, version: int,
                        published: ResourcesUpdate) -> SplitResult:
        result = await ctx.run_split(val, "val", resources_id=published.resources_id)
        rewards = [r or 0.0 for r in result.rewards]
        point = Evaluation(step, version, sum(rewards) / len(rewards), sum(r == 1.0 for r in rewards) / len(rewards))
        self.history.append(point)
        if self.on_eval is not None:
            self.on_eval(point)
        log.info("eval after %d steps (v%d): mean reward %.3f, exact %.3f", step, version, point.mean_reward,
                 point.exact)
        return result

    def _tokens(self, groups: list[list[Sample]]) -> Tokens:
        """Every triplet with token ids and logprobs, each given its sample's group-normalised advantage.

        Groups by group id and samples by sample id (a group id split over two groups: by their sample ids),
        whatever order they came in: float sums over the batch then come out the same for the same samples."""
        groups = sorted((sorted(group, key=lambda s: s.sample_id) for group in groups),
                        key=lambda group: (group[0].group_id, group[0].sample_id))
        rewards = [[s.final_reward or 0.0 for s in group] for group in groups]
        self.train_rewards.append(sum(map(sum, rewards)) / sum(map(len, rewards)))
        tokens = Tokens([], [], [], [])
        for group, advantages in zip(groups, group_advantages(rewards), strict=True):
            for sample, advantage in zip(group, advantages, strict=True):
                for triplet in sample.triplets:
                    response, logprobs = triplet.response.get("token_ids") or [], triplet.response.get("logprobs")
                    if not response or logprobs is None or len(logprobs) != len(response):
                        continue  # nothing sampled, or sampled without logprobs: no old policy to compare with
                    tokens.prompts.append(list(triplet.prompt["token_ids"]))
                    tokens.responses.append(list(response))
                    tokens.old_logprobs.append([float(lp) for lp in logprobs])
                    tokens.advantages.append(advantage)
        return tokens

    def _rule(self) -> PolicyUpdate:
        """This GRPO's update, as its hyperparameters are now: decoupled when pipelined."""
        return PolicyUpdate(self.epochs, self.clip, self.grad_clip, self.temperature, self.entropy_coef,
                            self.is_cap, decoupled=self.max_staleness > 0)

    def _update(self, policy: Policy, optimizer: torch.optim.Optimizer, tokens: Tokens) -> None:
        """One step's update in this process (the live loop runs the same `_rule` in its learner process)."""
        self._rule()(policy, optimizer, tokens)
