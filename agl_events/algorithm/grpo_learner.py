"""The GRPO learner in a process of its own: the policy and its optimiser live there; a step sends a batch's
tokens and gets back the URI of the weights version the learner wrote.

Why a process: the trainer's interpreter also runs the store (its event loop serves the runners' claims and
finishes), the LLM proxy and the policy server. torch releases the GIL inside each operation but needs it back
between operations, and a thread busy with Python keeps it for up to the interpreter's switch interval (5 ms)
each time: a d_model 512 policy's update took 1.5 s alone and 9.9 s beside one busy Python thread
(docs/performance.md, "Pipelined training"). A pipelined loop trains while those threads serve runners, so
the learner gets an interpreter of its own. The synchronous loop uses it too: one path, the same numbers (one
intra-op thread, as `GRPO.retrain` trains).

Exactly-once steps keep their order: the learner writes the weights and the optimiser state, named by version
(`policy.weights.save_version`), before it answers, and the trainer commits the step only after the answer.
A trainer that dies closes its end of the pipe and the learner, reading end of file, ends too.

The learner also makes its policy and optimiser (`LearnerStart`): fresh, or from the last committed step. Made
in the trainer, they cost it a torch optimiser's first construction (torch imports its compiler then, seconds of
CPU while the trainer also starts its store, runners and proxy) and a copy of their state through the spawn's
pipe, which the trainer waited on until the child had imported torch.
"""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Self

import torch

from agl_events.algorithm.grpo_update import PolicyUpdate, Tokens
from agl_events.policy.model import Policy, PolicyConfig
from agl_events.policy.weights import load_optimizer, load_weights, optimizer_path, save_version
from agl_events.samples.steps import StepRecord


@dataclass(frozen=True)
class LearnerStart:
    """Where the learner's policy and Adam optimiser (learning rate `lr`) come from: the seeded weights of
    `config` (`last` None), or the weights the last committed step `last` wrote and the optimiser state saved
    with them (a restarted trainer)."""

    config: PolicyConfig
    lr: float
    last: StepRecord | None = None


@dataclass(frozen=True)
class Started:
    """What the learner reports once its policy is ready: the steps already done, the URI of the weights it
    starts from, and whether an optimiser state was restored (False: a resumed learner had none saved)."""

    done: int
    weights_uri: str
    optimizer_restored: bool


def open_learner(start: LearnerStart, home: Path, experiment: str
                 ) -> tuple[Policy, torch.optim.Optimizer, Started]:
    """The policy and optimiser `start` names: fresh at step 0 (the seeded weights written as v1), or after
    the last committed step.

    Nothing else needs restoring: the sample stream's group resumes from the offsets committed with `last`,
    and the trainer tells it which samples committed steps took beyond them. A step that was cut off before its
    commit left at most a weights file of the next version, written again when the step is taken again."""
    last = start.last
    # The mode each is made in (fresh: training; loaded: eval) is the one it trains in, as `GRPO.retrain`
    # does: in eval mode the no-grad proximal pass takes torch's fused encoder path, whose last bits differ,
    # and Adam's first steps turn such differences into whole steps of lr.
    if last is None:
        policy = Policy(start.config)
        optimizer = torch.optim.Adam(policy.parameters(), lr=start.lr)
        return policy, optimizer, Started(0, save_version(policy, optimizer, home, experiment, 1), True)
    policy = load_weights(last.weights_uri)
    optimizer = torch.optim.Adam(policy.parameters(), lr=start.lr)
    restored = load_optimizer(optimizer, last.version, optimizer_path(home, experiment, last.version))
    return policy, optimizer, Started(last.step + 1, last.weights_uri, restored)


class LearnerProcess:
    """Trains the policy and optimiser `start` names with `update`, one step per `step` call, in a spawned
    process; writes versions under `home` for `experiment`."""

    def __init__(self, update: PolicyUpdate, start: LearnerStart, home: Path, experiment: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_learn, name="grpo-learner", daemon=True,
                                        args=(child, update, start, home, experiment))
        self._child = child
        self._started: Started | None = None

    def start(self) -> Self:
        """Start the process; it makes its policy while the caller goes on (`ready` waits for it)."""
        self._process.start()
        self._child.close()
        return self

    def ready(self) -> Started:
        """Wait until the learner's policy is made (and v1 written, when fresh); at once once it was. Blocks: call
        it in a thread."""
        if self._started is None:
            outcome, detail = self._receive("the learner's start")
            if outcome == "error":
                raise RuntimeError(f"the learner could not start: {detail}")
            assert isinstance(detail, Started)
            self._started = detail
        return self._started

    def _receive(self, what: str) -> tuple[str, object]:
        try:
            outcome, detail = self._conn.recv()
        except EOFError:
            raise RuntimeError(f"the learner process ended before {what} (exit code {self._process.exitcode})"
                               ) from None
        return outcome, detail

    def step(self, tokens: Tokens, version: int) -> str:
        """Train on `tokens`, write the result as weights `version`; its URI. Blocks: call it in a thread."""
        self.ready()  # the learner's first answer is its start's
        self._conn.send((tokens, version))
        outcome, detail = self._receive(f"weights v{version}")
        if outcome == "error":
            raise RuntimeError(f"the learner failed at weights v{version}: {detail}")
        return str(detail)

    def stop(self) -> None:
        self._conn.close()
        self._process.join(timeout=30)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _learn(conn: Connection, update: PolicyUpdate, start: LearnerStart, home: Path, experiment: str) -> None:
    """The learner process: makes its policy and says so ("ready", `Started`), then steps until the trainer
    closes the pipe. Each step answers ("written", URI), or ("error", what went wrong) and ends: the trainer
    raises it."""
    torch.set_num_threads(1)  # one core for the learner, the other for sampling and the store; and as retrain
    try:
        policy, optimizer, started = open_learner(start, home, experiment)
    except Exception as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", started))
    while True:
        try:
            tokens, version = conn.recv()
        except EOFError:
            return
        try:
            update(policy, optimizer, tokens)
            conn.send(("written", save_version(policy, optimizer, home, experiment, version)))
        except Exception as exc:  # the trainer raises it: a learner that stopped answering would hang it
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            return
