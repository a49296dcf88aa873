"""Folding prompt optimization steps (APO): one entry per candidate, its scores set by round and scope.

A candidate's entry is created when it is proposed (or when an edit fails, with the reason); each score
is set under `<round>/<scope>`, so a step applied twice leaves the entry as once.
"""

from __future__ import annotations

from agl_events.events.typed import PromptCandidateRecorded
from agl_events.reducers import keys
from agl_events.reducers.changes import Pending


def prompt_candidate_recorded(view: Pending, event: PromptCandidateRecorded) -> None:
    key = keys.prompt_candidate(event.run_id, event.candidate_id)
    entry = view.get(key) or {"run_id": event.run_id, "candidate_id": event.candidate_id, "scores": {}}
    if event.stage == "scored":
        scores = {**entry["scores"], f"{event.round}/{event.scope}": {
            "round": event.round, "scope": event.scope, "score": event.score,
            "rollout_ids": list(event.rollout_ids), "time": event.time}}
        entry = {**entry, "scores": scores}
    else:
        entry = {**entry, "status": event.stage, "round": event.round, "parent_id": event.parent_id,
                 "template": event.template, "critique": event.critique, "reason": event.reason,
                 "time": event.time}
    view.put(key, entry)
