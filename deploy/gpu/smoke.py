"""The GPU smoke training `check.sh` runs: VERL on the digit-reversal task, rollouts through Kafka.

Prints verl's metrics per step, then one line: `gpu check: <steps> verl steps on <model> in <s>s` with the
store's counts (rollouts, spans, resources versions), checked against a view rebuilt from the log; exits 1
if no rollout went through Kafka or the rebuilt view differs.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from agl_events import Trainer
from agl_events.algorithm import VERL
from agl_events.config import Settings
from agl_events.demo.reverse import reverse_agent, reverse_tasks
from agl_events.demo.run import live_and_rebuilt
from agl_events.policy.hf_model import save_tiny_llama

STEPS = 4
#: One GPU, a small batch, no flash-attn (not in the gpu extra), no reference model.
OVERRIDES = [
    f"trainer.total_training_steps={STEPS}", "trainer.val_before_train=true", "trainer.test_freq=2",
    "data.train_batch_size=16", "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.ppo_mini_batch_size=16",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16",
    "data.max_prompt_length=64", "data.max_response_length=16",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.4", "actor_rollout_ref.actor.use_kl_loss=false",
    "algorithm.use_kl_in_reward=false", "actor_rollout_ref.model.use_remove_padding=false",
    "+actor_rollout_ref.model.override_config.attn_implementation=sdpa", "actor_rollout_ref.actor.optim.lr=1e-4",
]


def main(model: str | None) -> int:
    root = Path(tempfile.mkdtemp(prefix="agl-gpu-"))
    folder = model or str(save_tiny_llama(root / "tiny-llama"))
    settings = Settings().model_copy(update={"experiment": f"gpu-check-{int(time.time())}"})
    started = time.monotonic()
    trainer = Trainer(VERL(folder, OVERRIDES), n_runners=4, adapter={"llm_call_match": "litellm_request"},
                      settings=settings, view_dir=root / "live", progress=False)
    trainer.fit(reverse_agent, reverse_tasks(STEPS * 16, seed=1), val_dataset=reverse_tasks(16, seed=2))
    seconds = time.monotonic() - started
    live, rebuilt = live_and_rebuilt(trainer.settings_used, root / "live", root / "rebuilt")
    print(f"gpu check: {STEPS} verl steps on {folder} in {seconds:.0f}s; live {live}; rebuilt {rebuilt}")
    return 0 if live == rebuilt and live["total_rollouts"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
