"""Adapters: pure functions from a rollout's spans to training data (triplets, messages), as Agent Lightning 0.3.0's."""
