"""Baseline: run each dataset once with the initial resources and report the rewards. Proves the loop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agl_events.algorithm.base import AlgorithmContext, SplitResult


class Baseline:
    async def run(self, ctx: AlgorithmContext, train_dataset: Sequence[Any],
                  val_dataset: Sequence[Any] | None) -> dict[str, SplitResult]:
        results = {"train": await ctx.run_split(train_dataset, "train")}
        if val_dataset:
            results["val"] = await ctx.run_split(val_dataset, "val")
        return results
