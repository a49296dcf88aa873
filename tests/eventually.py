"""The tests' one polling wait: ask again, a moment apart, until an answer holds or a deadline passes.

A test that waits for another process, thread or the log to catch up waits on the very thing it asserts next
(not on something that usually comes with it), through `eventually` (a plain probe) or `eventually_async` (a
probe that may be awaited). Both return the answer that held, so the test asserts on it, and fail with what
was awaited and the last answer seen (or the last error, for exceptions the probe may raise meanwhile).
`tests/structure/test_polling.py` refuses a sleep inside a loop anywhere else in tests/.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

#: Seconds between the first two probes, growing by half each time up to the longest: what is ready at once
#: costs a test next to nothing, and a long wait does not spin.
FIRST_INTERVAL, LONGEST_INTERVAL = 0.01, 0.1
#: Seconds a wait lasts by default: generous on a loaded 2-core machine; a passing test never waits it out.
WITHIN = 30.0

_NOTHING = object()


class _Wait:
    """One wait's bookkeeping, shared by both forms: the deadline, the last answer and the failure message."""

    def __init__(self, what: str, within: float, until: Callable[[object], bool],
                 ignoring: tuple[type[BaseException], ...], context: Callable[[], str] | None) -> None:
        self.what, self.within, self.until, self.ignoring, self.context = what, within, until, ignoring, context
        self.deadline = time.monotonic() + within
        self.last: object = _NOTHING
        self.interval = FIRST_INTERVAL

    def holds(self, answer: object) -> bool:
        self.last = answer
        return self.until(answer)

    def missed(self, error: BaseException) -> None:
        """An error the probe may raise meanwhile (a server not listening yet): it counts as a 'not yet'."""
        if not isinstance(error, self.ignoring):
            raise error
        self.last = error

    def pause(self) -> float:
        """Seconds to sleep before the next probe; fails the test once the deadline has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            seen = "no answer" if self.last is _NOTHING else f"last seen: {self.last!r}"
            more = f"\n{self.context()}" if self.context else ""
            raise AssertionError(f"not within {self.within:g} s: {self.what} ({seen}){more}")
        pause, self.interval = min(self.interval, left), min(self.interval * 1.5, LONGEST_INTERVAL)
        return pause


def eventually(probe: Callable[[], T], what: str, *, within: float = WITHIN,
               until: Callable[[T], bool] = bool, ignoring: tuple[type[BaseException], ...] = (),
               context: Callable[[], str] | None = None) -> T:
    """Call `probe()` until `until(answer)` holds (by default: the answer is truthy) and return that answer.

    `what` says what is awaited, for the failure message, and `context()` what else it shows (the log tail of
    the process waited on); exceptions of the `ignoring` types count as 'not yet'.
    """
    wait = _Wait(what, within, until, ignoring, context)  # type: ignore[arg-type]
    while True:
        try:
            answer = probe()
            if wait.holds(answer):
                return answer
        except Exception as error:
            wait.missed(error)
        time.sleep(wait.pause())


async def eventually_async(probe: Callable[[], Awaitable[T] | T], what: str, *, within: float = WITHIN,
                           until: Callable[[T], bool] = bool, ignoring: tuple[type[BaseException], ...] = (),
                           context: Callable[[], str] | None = None) -> T:
    """`eventually` for a test on an event loop: the probe may be a coroutine function, and the wait yields."""
    wait = _Wait(what, within, until, ignoring, context)  # type: ignore[arg-type]
    while True:
        try:
            answer = probe()
            if inspect.isawaitable(answer):
                answer = await answer
            if wait.holds(answer):
                return answer  # type: ignore[return-value]
        except Exception as error:
            wait.missed(error)
        await asyncio.sleep(wait.pause())
