"""What a store refuses to do, and why it cannot serve at all (the server answers 405 and 503 with the reason)."""

from __future__ import annotations


class StoreUnhealthyError(RuntimeError):
    """The store stopped serving: its view no longer follows the log, or it was closed."""


class FollowerFailed(StoreUnhealthyError):
    """The view stopped following the log; reads would be stale and folds are not happening."""


class ReadOnlyStoreError(RuntimeError):
    """A write asked of a read-only store (a view of the past): refused, with which view it serves."""
