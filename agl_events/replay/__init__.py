"""Replaying an experiment's history: rebuild and verify views, views as of a point in the past, snapshots
that bound how far a rebuild reads, and training data exported from the log.

The log is the truth and every view is a fold of it, so each of these is a fold of some stretch of the log
(`scan`) up to a `cut` (the offset past the last record to fold, per partition).
"""
