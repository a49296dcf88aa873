"""A trainer's figures: training steps taken, the mean reward of the last step's batch, samples consumed.

A step is a batch the trainer's `SampleStream` handed the algorithm (GRPO and VERL train one step per batch).
The Trainer registers these on the Prometheus registry of the store server it embeds, so they are scraped
from the same `/metrics` as the store's figures and shown on its `/ui`: the trainer needs no port of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import Metric
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from agl_events.samples.batching import SampleBatch


class TrainerMetrics:
    """A Prometheus collector over plain attributes, updated once per batch."""

    def __init__(self, experiment: str) -> None:
        self.experiment = experiment
        self.step = 0
        #: Mean final reward of the last batch's samples that had one; None before any.
        self.reward: float | None = None
        self.samples = 0

    def observe_batch(self, batch: SampleBatch) -> None:
        """One training step's batch."""
        rewards = [s.final_reward for s in batch.samples if s.final_reward is not None]
        self.step += 1
        self.samples += len(batch)
        if rewards:
            self.reward = sum(rewards) / len(rewards)

    def collect(self) -> Iterator[Metric]:
        labels = ["experiment"]
        step = GaugeMetricFamily("agl_trainer_step", "Training steps taken (batches the trainer's sample "
                                 "stream handed the algorithm).", labels=labels)
        step.add_metric([self.experiment], self.step)
        reward = GaugeMetricFamily("agl_trainer_reward", "Mean final reward of the last training step's "
                                   "batch.", labels=labels)
        if self.reward is not None:
            reward.add_metric([self.experiment], self.reward)
        samples = CounterMetricFamily("agl_trainer_samples_consumed", "Samples the trainer trained on.",
                                      labels=labels)
        samples.add_metric([self.experiment], self.samples)
        yield from (step, reward, samples)
