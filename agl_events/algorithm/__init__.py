"""Algorithms drive training: they enqueue rollouts, read what runners produced, and publish resources."""

import importlib
from typing import Any

from agl_events.algorithm.base import Algorithm, AlgorithmContext, SplitResult
from agl_events.algorithm.baseline import Baseline

__all__ = ["VERL", "Algorithm", "AlgorithmContext", "Baseline", "SplitResult"]


def __getattr__(name: str) -> Any:
    """`VERL` on first use only: it needs the training extra (torch, verl), which the core never imports."""
    if name == "VERL":  # imported by name, as the CLI imports the GRPO demo: torch-free modules stay so
        return importlib.import_module("agl_events.algorithm.verl_trainer").VERL
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
