"""When to start a crashed process again: exponential backoff, forgotten once it stayed up long enough.

Pure (the supervisor passes its clock's readings), so the policy is tested on a fake clock. A process that
crashes at once is tried after 1 s, then 2, 4, ... up to a minute, so a broken one (a bad agent module, a taken
port) costs little while it keeps failing; one that ran for a minute before it crashed is restarted after 1 s
again, as a healthy process that crashed once deserves.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class BackoffPolicy(BaseModel):
    initial: float = Field(1.0, gt=0, description="seconds before the first restart")
    factor: float = Field(2.0, ge=1)
    maximum: float = Field(60.0, gt=0, description="the longest wait between restarts")
    reset_after: float = Field(60.0, ge=0, description="seconds up after which earlier crashes are forgiven")


class Backoff:
    """One process's restarts: `started` when it starts, `exited` when it exits; then `due` says when to start
    it again."""

    def __init__(self, policy: BackoffPolicy | None = None) -> None:
        self.policy = policy or BackoffPolicy()
        #: Crashes in a row, each after less than `reset_after` seconds up.
        self.crashes = 0
        self.started_at: float | None = None
        self.restart_at: float | None = None

    def started(self, now: float) -> None:
        self.started_at, self.restart_at = now, None

    def exited(self, now: float) -> float:
        """Note an exit at `now`; returns when to start it again."""
        if self.started_at is not None and now - self.started_at >= self.policy.reset_after:
            self.crashes = 0
        delay = min(self.policy.initial * self.policy.factor ** self.crashes, self.policy.maximum)
        self.crashes += 1
        self.started_at, self.restart_at = None, now + delay
        return self.restart_at

    def due(self, now: float) -> bool:
        return self.restart_at is not None and now >= self.restart_at
