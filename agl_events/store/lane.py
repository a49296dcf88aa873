"""A thread of its own for one blocking Kafka client: its calls run there, in order, awaited from the event loop.

A store's poll loops (the follower's reader, the ingester's consumer) block for up to a poll's timeout, over
and over, for as long as the store lives. On `asyncio.to_thread` they held threads of the event loop's
default executor, which has min(32, cores + 4): a server holding a few experiments had every one of them
taken by polls, and every other blocking call (opening a store, asking where a topic ends, closing a client)
queued behind them, so calls took seconds and shutdown took minutes. A lane is one daemon thread per client
instead: its polls delay nothing else, and one stuck in a broker call never keeps the process from exiting.
Short blocking questions to the broker (where a topic ends, creating topics) go to `ask`'s pool, which runs
nothing else either.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

#: Threads for short broker questions of every store in the process (each bounded by its client's timeout).
ASK_THREADS = 8
_asks = ThreadPoolExecutor(ASK_THREADS, thread_name_prefix="agl-kafka-ask")

_Call = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


async def ask(call: Callable[[], T]) -> T:
    """`call()` (a short blocking broker request) off the event loop, on the asks' own threads."""
    return await asyncio.get_running_loop().run_in_executor(_asks, call)


class Lane:
    """One daemon thread running the calls given to `run`, one at a time, in order."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    async def run(self, call: Callable[[], T]) -> T:
        """`call()` on the lane's thread. Cancelling the wait does not stop a call already running (a blocking
        client call cannot be interrupted): its result is dropped. RuntimeError once the lane is closed (a call
        given then would wait forever)."""
        if self._closed:
            raise RuntimeError(f"lane {self._thread.name} is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put((call, loop, future))
        return await future

    def close(self) -> None:
        """End the thread once the calls already given have run. Idempotent."""
        if not self._closed:
            self._closed = True
            self._calls.put(None)

    def _serve(self) -> None:
        while (item := self._calls.get()) is not None:
            call, loop, future = item
            try:
                outcome: tuple[Any, BaseException | None] = (call(), None)
            except BaseException as exc:  # handed to the awaiting coroutine
                outcome = (None, exc)
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits it any more
                loop.call_soon_threadsafe(_settle, future, *outcome)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the awaiting coroutine was cancelled
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
