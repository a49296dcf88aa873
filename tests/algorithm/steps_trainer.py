"""The trainer process `test_grpo_exactly_once` SIGKILLs and starts again: a tiny pipelined GRPO run on the
experiment, home and broker its environment names (`AGL_CRASH_AT` picks where it kills itself)."""

from __future__ import annotations

import logging

from agl_events import Trainer
from agl_events.algorithm.grpo import GRPO
from agl_events.config import Settings
from agl_events.demo.reverse import reverse_agent, reverse_tasks

#: Steps of 2 groups of 2, one version of staleness allowed: the smallest pipelined run.
STEPS, PROMPTS, GROUP = 4, 2, 2


def grpo() -> GRPO:
    """The recipe, the same for the live trainer and the test's retrain. The proxy on a thread: a process of
    its own takes seconds to start, more than these steps of 4 rollouts take, and the trainer starts 3 times."""
    return GRPO(steps=STEPS, prompts_per_step=PROMPTS, group_size=GROUP, max_staleness=1, eval_every=STEPS,
                batch_timeout=120.0, proxy_launch_mode="thread")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("httpx", "LiteLLM", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    settings = Settings.from_env()
    Trainer(grpo(), n_runners=1, adapter={"llm_call_match": "litellm_request"}, settings=settings,
            view_dir=settings.home / "view", progress=False).fit(reverse_agent, reverse_tasks(8, seed=1))
