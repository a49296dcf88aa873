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
"""

from __future__ import annotations

import io
import multiprocessing
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Self

import torch

from agl_events.algorithm.grpo_update import PolicyUpdate, Tokens
from agl_events.policy.model import Policy, PolicyConfig
from agl_events.policy.weights import save_version


class LearnerProcess:
    """Trains copies of `policy` and `optimizer` (their state as they are now) with `update`, one step per
    `step` call, in a spawned process; writes versions under `home` for `experiment`."""

    def __init__(self, update: PolicyUpdate, policy: Policy, optimizer: torch.optim.Optimizer, home: Path,
                 experiment: str) -> None:
        state = io.BytesIO()
        torch.save({"policy": policy.state_dict(), "optimizer": optimizer.state_dict()}, state)
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_learn, name="grpo-learner", daemon=True,
                                        args=(child, update, policy.config, policy.training, state.getvalue(),
                                              home, experiment))
        self._child = child

    def start(self) -> Self:
        """Start the process; it loads the state while the caller goes on (the first `step` waits for it)."""
        self._process.start()
        self._child.close()
        return self

    def step(self, tokens: Tokens, version: int) -> str:
        """Train on `tokens`, write the result as weights `version`; its URI. Blocks: call it in a thread."""
        self._conn.send((tokens, version))
        try:
            reply = self._conn.recv()
        except EOFError:
            raise RuntimeError(f"the learner process ended (exit code {self._process.exitcode})") from None
        outcome, text = reply
        if outcome == "error":
            raise RuntimeError(f"the learner failed at weights v{version}: {text}")
        return text

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


def _learn(conn: Connection, update: PolicyUpdate, config: PolicyConfig, training: bool, state: bytes,
           home: Path, experiment: str) -> None:
    """The learner process: steps until the trainer closes the pipe. Each step answers ("written", URI), or
    ("error", what went wrong) and ends: the trainer raises it."""
    torch.set_num_threads(1)  # one core for the learner, the other for sampling and the store; and as retrain
    saved = torch.load(io.BytesIO(state), map_location="cpu", weights_only=True)
    policy = Policy(config)
    policy.load_state_dict(saved["policy"])
    optimizer = torch.optim.Adam(policy.parameters())
    optimizer.load_state_dict(saved["optimizer"])
    # the mode the trainer's copy is in: in eval mode the no-grad proximal pass takes torch's fused encoder
    # path, whose last bits differ, and Adam's first steps turn such differences into whole steps of lr
    policy.train(training)
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
