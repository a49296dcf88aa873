"""Training samples: finished rollouts as adapter output, on the samples topic, read by trainers in batches."""
