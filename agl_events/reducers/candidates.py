"""Folding prompt optimization steps (APO): one entry per candidate, its scores set by round and scope.

A candidate's entry is created when it is proposed (or when an edit fails, with the reason); each score
is set under `<round>/<scope>`, so a step applied twice leaves the entry as once.
"""

from __future__ import annotations

from typing import Any

from agl_events.reducers import keys
from agl_events.reducers.changes import Pending


def prompt_candidate_recorded(view: Pending, record: dict[str, Any]) -> None:
    key = keys.prompt_candidate(record["run_id"], record["candidate_id"])
    entry = view.get(key) or {"run_id": record["run_id"], "candidate_id": record["candidate_id"], "scores": {}}
    if record["stage"] == "scored":
        scores = {**entry["scores"], f"{record['round']}/{record['scope']}": {
            "round": record["round"], "scope": record["scope"], "score": record["score"],
            "rollout_ids": list(record["rollout_ids"]), "time": record["time"]}}
        entry = {**entry, "scores": scores}
    else:
        entry = {**entry, "status": record["stage"], "round": record["round"], "parent_id": record["parent_id"],
                 "template": record["template"], "critique": record["critique"], "reason": record["reason"],
                 "time": record["time"]}
    view.put(key, entry)
