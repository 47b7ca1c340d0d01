"""Service answers that come later, from another thread, without blocking the executor.

The node's IK / FK services are spun by one single-threaded executor (the cheapest round
trip, docs/benchmarks/node.md). A request that needs long work (a first-time compile) must
not hold that thread: its callback returns a :class:`Deferred` at once, the work runs on a
background thread, and the answer is sent when the work ends or its time budget runs out,
whichever comes first. Meanwhile the executor serves everyone else.

rclpy has no API for this: an ``async`` callback awaiting a future makes its executor poll
the pending task in a busy loop (rclpy.executors._wait_for_ready_callbacks yields every
pending task on every pass), which on a small CPU takes the time the work needs. Instead,
:func:`allow_deferred` wraps one service's ``send_response``: the executor calls it with the
callback's return value and the request header; a Deferred takes the header and sends the
real response itself once it is resolved.

:class:`CompileQueue` runs such work: one program compile at a time per key on a background
thread, later work for the same program waiting for it instead of compiling it again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# Work items that may wait for one program's compile (beyond: the queue is full, BUSY).
WAITERS_PER_COMPILE = 64
# A budget is answered this much before it runs out: ANSWER_MARGIN of it, at most
# ANSWER_MARGIN_S (answer_margin). The caller's clock also counts what the node's does not:
# its request's serialisation, transfer and deserialisation before the callback starts, and
# the answer's way back, which grow with the request (a 4,096-step retargeting). With 0.1 of
# the budget, at most 0.1 s, a 2 s retarget compile reached the caller after 2.00-2.10 s
# (bench/hostile_input.py, case 2g, while the compile ran): up to 0.2 s on the way.
ANSWER_MARGIN = 0.15
ANSWER_MARGIN_S = 0.3


def answer_margin(budget: float) -> float:
    """Seconds before a ``budget`` (s) runs out that its answer leaves the node."""
    return min(ANSWER_MARGIN * budget, ANSWER_MARGIN_S)


def core_budget(budget: float, start: float) -> float:
    """What the core may spend (s; 0: no limit) of a request's ``budget`` (s; 0: none) that
    started at ``start`` (``time.perf_counter()``): what is left, less the answer's margin,
    at least a millisecond (the core then stops after its first step)."""
    if budget <= 0:
        return 0.0
    return max(budget - answer_margin(budget) - (time.perf_counter() - start), 1e-3)


class Deferred:
    """A response resolved later (once); sent when both it and the request header are known."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._response: Any = None
        self._send: Callable[[Any, Any], None] | None = None
        self._header: Any = None
        self._sent = False

    def resolve(self, response) -> bool:
        """Sets the answer; False if one was set before (the first answer wins)."""
        with self._lock:
            if self._response is not None:
                return False
            self._response = response
        self._flush()
        return True

    @property
    def resolved(self) -> bool:
        return self._response is not None

    def _attach(self, send: Callable[[Any, Any], None], header) -> None:
        with self._lock:
            self._send, self._header = send, header
        self._flush()

    def _flush(self) -> None:
        with self._lock:
            if self._sent or self._response is None or self._send is None:
                return
            self._sent = True
            send, response, header = self._send, self._response, self._header
        send(response, header)


def allow_deferred(service) -> None:
    """Lets ``service``'s callback return a :class:`Deferred` instead of a response."""
    send = service.send_response

    def send_response(response, header) -> None:
        if isinstance(response, Deferred):
            response._attach(send, header)
        else:
            send(response, header)

    service.send_response = send_response


class BackgroundWork:
    """A bounded queue of long work for deferred answers: ``threads`` workers, at most
    ``capacity`` jobs waiting or running (more -> :meth:`submit` returns False)."""

    def __init__(self, threads: int, capacity: int, name: str) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._capacity = capacity
        self._count = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], None]) -> bool:
        with self._lock:
            if self._count >= self._capacity:
                return False
            self._count += 1

        def run() -> None:
            try:
                fn()
            finally:
                with self._lock:
                    self._count -= 1

        self._pool.submit(run)
        return True

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def answer_within(
    deferred: Deferred, seconds: float, on_timeout: Callable[[], Any]
) -> threading.Timer:
    """Resolves ``deferred`` with ``on_timeout()`` after ``seconds`` (at once when <= 0)
    unless it is resolved by then."""

    def expire() -> None:
        if not deferred.resolved:
            deferred.resolve(on_timeout())

    timer = threading.Timer(max(seconds, 0.0), expire)
    timer.daemon = True
    timer.start()
    return timer


class CompileQueue:
    """Work that needs a program compiled first: the first item for a key compiles it (one
    background thread, at most ``capacity`` compiles queued or running), items for the same
    key that come meanwhile run right after it (at most :data:`WAITERS_PER_COMPILE`), then
    ``after()`` (the node frees the compile's memory: model.release_freed_memory)."""

    def __init__(
        self, capacity: int, name: str = "pyroki_compile", after: Callable[[], None] = lambda: None
    ) -> None:
        self._work = BackgroundWork(1, capacity, name)
        self._waiting: dict[Any, list[Callable[[], None]]] = {}  # key -> items after it
        self._lock = threading.Lock()
        self._after = after

    def submit(self, key, item: Callable[[], None]) -> bool:
        """Runs ``item`` after (or as) the compile of ``key``; False when the queue is full."""
        with self._lock:
            waiters = self._waiting.get(key)
            if waiters is not None and len(waiters) < WAITERS_PER_COMPILE:
                waiters.append(item)
                return True
            if waiters is not None or not self._work.submit(lambda: self._run(key, item)):
                return False
            self._waiting[key] = []
            return True

    def compile(self, key, item: Callable[[], None]) -> None:
        """Runs ``item`` (which compiles ``key``) unless ``key`` is compiling already or the
        queue is full (a later call retries)."""
        with self._lock:
            if key not in self._waiting and self._work.submit(lambda: self._run(key, item)):
                self._waiting[key] = []

    def _run(self, key, item: Callable[[], None]) -> None:
        try:
            item()
        finally:
            while True:
                with self._lock:
                    waiters = self._waiting.get(key)
                    if not waiters:
                        self._waiting.pop(key, None)
                        break
                    ready, waiters[:] = list(waiters), []
                for waiting in ready:
                    waiting()
            self._after()

    def shutdown(self) -> None:
        self._work.shutdown()


def answer_in_background(
    submit: Callable[[Callable[[], None]], bool],
    work: Callable[[Deferred], None],
    deadline: float | None,
    busy: Callable[[], Any],
    late: Callable[[], Any],
) -> Deferred | Any:
    """``work(deferred)`` handed to ``submit`` (a queue's; False when it is full: ``busy()``
    at once, instead of a Deferred) answers through ``deferred``; when ``deadline`` (s from
    now; None: none) comes first, ``late()`` is the answer and the work goes on."""
    deferred = Deferred()
    if not submit(lambda: work(deferred)):
        return busy()
    if deadline is not None:
        answer_within(deferred, deadline, late)
    return deferred


def run_after_compile(
    queue: CompileQueue,
    key,
    work: Callable[[Deferred], None],
    budget: float,
    start: float,
    busy: Callable[[], Any],
    late: Callable[[], Any],
) -> Deferred | Any:
    """A request whose program is not compiled yet: ``work(deferred)`` runs on ``queue``'s
    compile thread (compiling, then answering through ``deferred``), the request's budget
    counting the compile: when ``budget`` (s since ``start``; <= 0: none) runs out first,
    ``late()`` is the answer, a little before the budget so that it reaches the caller within
    it (ANSWER_MARGIN), and the compile goes on for the next request. A full queue:
    ``busy()`` at once, instead of a Deferred."""
    deadline = core_budget(budget, start) if budget > 0 else None
    return answer_in_background(lambda job: queue.submit(key, job), work, deadline, busy, late)
