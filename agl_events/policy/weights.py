"""Versioned weights files: `<home>/policy/<experiment>/v<N>.pt`, named to servers by a `file://` URI.

A trainer writes a version while a server may be loading the previous one, so a file appears whole or not
at all (written beside, then renamed over). The file holds the config too: a server needs nothing else.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

import torch

from agl_events.policy.model import Policy, PolicyConfig


def weights_path(home: Path, experiment: str, version: int) -> Path:
    return home / "policy" / experiment / f"v{version}.pt"


def save_weights(policy: Policy, path: Path) -> str:
    """Write atomically; returns the file's `file://` URI."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save({"config": policy.config.model_dump(), "state_dict": policy.state_dict()}, temp)
    os.replace(temp, path)
    return path.resolve().as_uri()


def load_weights(uri: str) -> Policy:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        raise ValueError(f"weights are read from file:// URIs, not {uri!r}")
    saved = torch.load(unquote(parsed.path), map_location="cpu", weights_only=True)
    policy = Policy(PolicyConfig.model_validate(saved["config"]))
    policy.load_state_dict(saved["state_dict"])
    return policy.eval()
