"""How many files a process holds open against its limit: a local broker keeps several open per partition,
and at its limit it stops (docs/deployment.md), so `kafka status` shows how near it is."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

#: The share of the limit from which `kafka status` warns.
NEAR_LIMIT = 0.8


@dataclass(frozen=True)
class OpenFiles:
    """Descriptors `used` by a process against its soft limit on open files."""

    used: int
    limit: int

    @property
    def near_limit(self) -> bool:
        return self.used >= NEAR_LIMIT * self.limit


def open_files(pid: int) -> OpenFiles | None:
    """`pid`'s open descriptors and limit, from /proc (Linux); None where they cannot be read."""
    try:
        used = len(os.listdir(f"/proc/{pid}/fd"))
        soft, _ = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    except (OSError, AttributeError):  # gone, not ours to read, or no /proc or prlimit (not Linux)
        return None
    return OpenFiles(used, soft) if soft != resource.RLIM_INFINITY else None
