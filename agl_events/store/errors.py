"""What a store refuses to do, and why it cannot serve at all (the server answers 405 and 503 with the reason)."""

from __future__ import annotations


class StoreUnhealthyError(RuntimeError):
    """The store stopped serving: its view no longer follows the log, or it was closed."""


class FollowerFailed(StoreUnhealthyError):
    """The view stopped following the log; reads would be stale and folds are not happening."""


class ReadOnlyStoreError(RuntimeError):
    """A write asked of a read-only store (a view of the past): refused, with which view it serves."""


class NotOwnerError(RuntimeError):
    """A command forwarded by another store for a rollout whose partition this store does not own (any more):
    the forwarder learns the new owner and asks it (HTTP 421, Misdirected Request)."""


class NoOwnerError(RuntimeError):
    """No store of the group took the rollout's partition in time (a rebalance that does not settle): 503."""
