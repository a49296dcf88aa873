"""APO end to end on the real broker: candidates as resources versions, rollouts on runner processes, a
scripted model (tests/algorithm/apo_agents.py) as critic, editor and task model, every step in the log."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from agl_events import Trainer
from agl_events.algorithm.apo import APO
from agl_events.config import Settings
from agl_events.server.client import StoreClient
from agl_events.server.embedded import embedded_store_server
from agl_events.types import LLM, PromptTemplate
from tests.algorithm.apo_agents import HINTS, ScriptedModels, arithmetic_agent, arithmetic_tasks

pytestmark = pytest.mark.kafka

SEED = PromptTemplate(template="Question: {question}", engine="f-string")


def _apo(models: ScriptedModels, **options: object) -> APO:
    client = openai.AsyncOpenAI(base_url=models.url, api_key="unused", max_retries=0)
    return APO(client, gradient_model="critic", apply_edit_model="editor", beam_width=2, branch_factor=2,
               beam_rounds=2, gradient_batch_size=2, val_batch_size=4, seed=1, **options)  # type: ignore[arg-type]


def test_apo_finds_a_better_prompt_and_the_log_holds_every_candidate_with_its_score(
        settings: Settings, tmp_path: Path) -> None:
    with ScriptedModels(slow_seconds=0.05) as models:
        apo = _apo(models)
        trainer = Trainer(apo, n_runners=2, settings=settings, view_dir=tmp_path / "view", progress=False,
                          initial_resources={"prompt_template": SEED, "llm": LLM(endpoint=models.url,
                                                                                  model="task-model")})
        results = trainer.fit(arithmetic_agent, arithmetic_tasks(8), val_dataset=arithmetic_tasks(6, offset=100))
        assert models.calls["critic"] == models.calls["editor"] == 2 * 2 * 2

    best = results["best"]
    assert best.prompt is not None and HINTS[0] in best.prompt.template and "{question}" in best.prompt.template
    assert best.score == 1.0 and best.mean_reward == 1.0 and len(best.rollouts) == 6  # the seed scored 0.5
    # the log holds the run: a store rebuilt from it serves the history, to the client and to `apo history`
    history, latest, table = asyncio.run(_from_the_log(settings, tmp_path / "rebuilt", apo.run_id))
    seed = history[0]
    assert (seed.template, seed.parent_id, seed.round) == (SEED.template, None, 0)
    assert [s.score for s in seed.scores if s.scope == "full"] == [0.5]
    assert len(history) == 1 + 2 * 2 * 2 and all(c.status == "proposed" for c in history)
    assert all(c.parent_id in {h.candidate_id for h in history} and c.critique for c in history[1:])
    assert all(c.scores and all(len(s.rollout_ids) in (4, 6) for s in c.scores) for c in history)
    assert best.resources_id in {c.candidate_id for c in history}
    assert max(c.best_full_score or 0.0 for c in history) == 1.0
    assert latest.resources["prompt_template"] == best.prompt  # the best prompt is the latest resources
    assert f"APO run {apo.run_id}: 9 candidates" in table and "best" in table and "Question: {question}" in table


async def _from_the_log(settings: Settings, view_dir: Path, run_id: str | None) -> tuple[list, object, str]:
    async with embedded_store_server(settings, view_dir) as (store, url):
        history = await StoreClient(url).prompt_candidates(run_id)
        latest = await store.get_latest_resources()
        root = url.split("/experiments/")[0]
        shown = await asyncio.to_thread(subprocess.run, [
            sys.executable, "-m", "agl_events", "--bootstrap", settings.bootstrap_servers, "--experiment",
            settings.experiment, "apo", "history", "--store-url", root], capture_output=True, text=True, timeout=120,
            env={**os.environ, "COLUMNS": "200"})
        assert shown.returncode == 0, shown.stderr
        return history, latest, shown.stdout


def test_candidates_scored_one_after_another_find_the_better_prompt_too(settings: Settings, tmp_path: Path) -> None:
    """`concurrent=False` (upstream's order) through the whole loop; the concurrent default is the test above, and
    how candidates overlap is `test_apo_search.py`'s (in-process, no timing)."""
    with ScriptedModels(slow_seconds=0.05) as models:
        trainer = Trainer(_apo(models, concurrent=False), n_runners=2, settings=settings, progress=False,
                          view_dir=tmp_path / "view",
                          initial_resources={"prompt_template": SEED, "llm": LLM(endpoint=models.url,
                                                                                  model="task-model")})
        best = trainer.fit(arithmetic_agent, arithmetic_tasks(8), val_dataset=arithmetic_tasks(4, 100))["best"]
    assert best.score == 1.0
