"""Versioned weights files: `<home>/policy/<experiment>/v<N>.pt`, named to servers by a `file://` URI, and
the trainer's optimiser state beside them (`v<N>.optimizer.pt`, the state after the step that made v<N>).

A trainer writes a version while a server may be loading the previous one, so a file appears whole or not
at all (written beside, then renamed over). The file holds the config too: a server needs nothing else.
The optimiser state is what a restarted trainer needs besides the weights to go on where it stopped; it is
written with the weights, before the step that made them commits, and one file per version: a trainer killed
after writing version N+1 but before committing its step resumes from version N, whose state must still be
there (writing N+1 again on the retried step is harmless: same name, written whole).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import torch

from agl_events.policy.model import Policy, PolicyConfig


def weights_path(home: Path, experiment: str, version: int) -> Path:
    return home / "policy" / experiment / f"v{version}.pt"


def optimizer_path(home: Path, experiment: str, version: int) -> Path:
    return home / "policy" / experiment / f"v{version}.optimizer.pt"


def _save_atomically(content: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(content, temp)
    os.replace(temp, path)


def save_weights(policy: Policy, path: Path) -> str:
    """Write atomically; returns the file's `file://` URI."""
    _save_atomically({"config": policy.config.model_dump(), "state_dict": policy.state_dict()}, path)
    return path.resolve().as_uri()


def save_optimizer(optimizer: torch.optim.Optimizer, version: int, path: Path) -> None:
    """The optimiser's state after the step that made weights `version`."""
    _save_atomically({"version": version, "state_dict": optimizer.state_dict()}, path)


def save_version(policy: Policy, optimizer: torch.optim.Optimizer, home: Path, experiment: str, version: int
                 ) -> str:
    """Weights `version` and the optimiser state that goes with them, each named by the version, so a step
    taken again after a crash writes the same files again; the optimiser's first, so weights that exist
    always have theirs. Returns the weights' URI."""
    save_optimizer(optimizer, version, optimizer_path(home, experiment, version))
    return save_weights(policy, weights_path(home, experiment, version))


def load_optimizer(optimizer: torch.optim.Optimizer, version: int, path: Path) -> bool:
    """Restore the state saved with weights `version`; False (state left fresh) when there is none for it."""
    if not path.is_file():
        return False
    saved = torch.load(path, map_location="cpu", weights_only=True)
    if saved.get("version") != version:
        return False
    optimizer.load_state_dict(saved["state_dict"])
    return True


def load_weights(uri: str) -> Policy:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        raise ValueError(f"weights are read from file:// URIs, not {uri!r}")
    saved = torch.load(unquote(parsed.path), map_location="cpu", weights_only=True)
    policy = Policy(PolicyConfig.model_validate(saved["config"]))
    policy.load_state_dict(saved["state_dict"])
    return policy.eval()
