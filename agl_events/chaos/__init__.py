"""Chaos runs: a workload through every process of a deployment while they are killed, then proof that
nothing acknowledged was lost and nothing applied twice."""
