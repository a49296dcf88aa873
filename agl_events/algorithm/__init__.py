"""Algorithms drive training: they enqueue rollouts, read what runners produced, and publish resources."""

from agl_events.algorithm.base import Algorithm, AlgorithmContext, SplitResult
from agl_events.algorithm.baseline import Baseline

__all__ = ["Algorithm", "AlgorithmContext", "Baseline", "SplitResult"]
