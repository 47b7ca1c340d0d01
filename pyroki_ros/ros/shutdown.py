"""Ending ``pyroki_ros_node`` on SIGINT / SIGTERM within a hard limit, in every state.

:class:`SignalShutdown` turns both signals into a shutdown request that is never lost;
:func:`shut_down` stops the executors and leaves without waiting for work that cannot be
interrupted (a JAX compilation, a plan); :func:`exit_with_parent` ties a child node to its
parent process (the demo and the tests).
"""

from __future__ import annotations

import os
import sys
import threading
import time

import rclpy

from pyroki_ros.ros.params import NODE_NAME

# --- shutdown on SIGINT / SIGTERM ----------------------------------------------------------------
# rclpy's own handlers (what rclpy.init installs by default) lose the wake-up now and then: its
# signal thread triggers the executors' guard conditions *before* it shuts the context down
# (rclpy 9.1.2, src/rclpy/signal_handler.cpp), so an executor that wakes in between still sees a
# valid context, waits again without a timeout, and nothing is left to wake it (that thread's
# rcl_shutdown bypasses the Python on_shutdown callbacks that would wake the executor). SIGINT
# hid it: the wake-up alone lets Python raise KeyboardInterrupt in the main thread. SIGTERM
# left the node spinning for good, more often on a loaded machine. Instead the node handles
# both signals itself (SignalShutdown) and ends within SHUTDOWN_HARD_LIMIT_S.
SHUTDOWN_SIGNALS = ("SIGINT", "SIGTERM")
# Work still running this long after the signal is not waited for (the process ends without
# finalising the interpreter: JAX compilations and plans cannot be interrupted).
SHUTDOWN_GRACE_S = 0.8
# The watchdog: whatever still runs then, the process ends (console and log file flushed).
SHUTDOWN_WATCHDOG_S = 1.5
# If even the watchdog thread cannot run (native code holding the GIL, e.g. in interpreter
# finalisation): SIGALRM's default action ends the process (status -14), armed at the signal.
SHUTDOWN_HARD_LIMIT_S = 1.9


def _flush_output() -> None:
    """Python's and C's buffered console output (rcutils writes with C stdio)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (AttributeError, OSError):
        pass


def _exit_now(reason: str) -> None:
    """Ends the process at once, output flushed. An error-level message also makes rcl's
    spdlog file sink flush what it holds (it flushes on errors, otherwise every 5 s)."""
    try:
        rclpy.logging.get_logger(NODE_NAME).error(f"{reason}: exiting now")
    except Exception:  # noqa: BLE001, S110 -- logging may be shut down already
        pass
    _flush_output()
    os._exit(0)


class SignalShutdown:
    """SIGINT / SIGTERM as a shutdown request that is never lost.

    The Python-level handlers do nothing; what counts is ``signal.set_wakeup_fd``: the
    interpreter's C handler writes the signal number to a socket the moment the signal arrives,
    and a helper thread acts on it, whatever the main thread is doing (waiting inside rcl,
    running a callback). The first signal completes :attr:`stopped` (a done future wakes the
    executor spinning until it: its flag is set before the wake-up, so it cannot be missed),
    arms the watchdog (:data:`SHUTDOWN_WATCHDOG_S`, then SIGALRM at
    :data:`SHUTDOWN_HARD_LIMIT_S`); a second signal ends the process at once."""

    def __init__(self) -> None:
        import signal
        import socket

        from rclpy.task import Future

        self.stopped = Future()
        self._signal_time: float | None = None
        self._numbers = {int(getattr(signal, name)) for name in SHUTDOWN_SIGNALS}
        self._receive, self._send = socket.socketpair()
        self._send.setblocking(False)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the hard limit's action
        for number in self._numbers:
            signal.signal(number, _ignore_signal)
        signal.set_wakeup_fd(self._send.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._listen, name="pyroki_ros_signals", daemon=True).start()

    @classmethod
    def install(cls) -> SignalShutdown | None:
        """Only the main thread can install signal handlers; elsewhere rclpy's are used."""
        if threading.current_thread() is not threading.main_thread():
            return None
        return cls()

    def deadline(self, seconds: float) -> float:
        """time.monotonic() ``seconds`` after the signal (after now if none came)."""
        start = self._signal_time
        return (time.monotonic() if start is None else start) + seconds

    def _listen(self) -> None:
        import signal

        watchdog: float | None = None
        while True:
            if watchdog is not None:
                left = watchdog - time.monotonic()
                if left <= 0:
                    _exit_now(
                        f"shutdown watchdog: not finished {SHUTDOWN_WATCHDOG_S} s after "
                        f"the signal (threads: {', '.join(_running_threads()) or 'none'})"
                    )
                self._receive.settimeout(left)
            try:
                data = self._receive.recv(64)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            for number in data:
                if number not in self._numbers:
                    continue
                name = signal.Signals(number).name
                if watchdog is not None:
                    _exit_now(f"second signal ({name}) during shutdown")
                self._signal_time = time.monotonic()
                watchdog = self._signal_time + SHUTDOWN_WATCHDOG_S
                signal.setitimer(signal.ITIMER_REAL, SHUTDOWN_HARD_LIMIT_S)
                try:  # first: the process may end right after set_result
                    rclpy.logging.get_logger(NODE_NAME).info(f"{name}: shutting down")
                except Exception:  # noqa: BLE001, S110 -- before rclpy.init
                    pass
                self.stopped.set_result(number)


def _ignore_signal(number, frame) -> None:
    """Python-level handler of SIGINT / SIGTERM: SignalShutdown acts on the wake-up fd."""


def _running_threads() -> list[str]:
    """Threads still alive besides the main thread and the signal thread. Daemon or not, each
    can hold up the exit: the interpreter joins non-daemon threads and every thread pool's
    workers (the executors' pools are daemon threads, made by a daemon thread), and one that
    runs JAX code while the interpreter finalises can crash it."""
    me = threading.current_thread()
    return [
        t.name
        for t in threading.enumerate()
        if t is not me
        and t is not threading.main_thread()
        and t.name != "pyroki_ros_signals"
        and t.is_alive()
    ]


def shut_down(node, executor, worker, signals: SignalShutdown | None, code: int) -> None:
    """Stops the executors, destroys the node and shuts ROS down without waiting for running
    work; when work still runs at the grace deadline (a JAX compilation or a plan cannot be
    interrupted, and finalising the interpreter under it crashes or waits for it), leaves at
    once with os._exit."""
    if node is not None:
        node.closing.set()  # batches stop between chunks
    if worker is not None:  # no new work; running callbacks are not waited for
        worker.shutdown(timeout_sec=0, wait_for_threads=False)
    if executor is not None:
        executor.shutdown(timeout_sec=0)
    busy = node is not None and node.busy_compiling()
    try:
        if node is not None and not busy:
            node.destroy_node()
    finally:
        rclpy.try_shutdown()
    deadline = (
        signals.deadline(SHUTDOWN_GRACE_S) if signals else time.monotonic() + SHUTDOWN_GRACE_S
    )
    while (running := _running_threads()) and time.monotonic() < deadline:
        if node is not None and node.busy_compiling():  # no use waiting
            break
        time.sleep(0.01)
    busy = node is not None and node.busy_compiling()
    if busy or running:
        what = ", ".join(running + (["a model compilation"] if busy else []))
        try:
            rclpy.logging.get_logger(NODE_NAME).info(f"shut down; not waiting for {what}")
        except Exception:  # noqa: BLE001, S110 -- logging is shut down
            pass
        _flush_output()
        os._exit(code)


def exit_with_parent() -> None:
    """With PYROKI_ROS_EXIT_WITH_PARENT=<pid of the parent> (set by pyroki_ros.ros.process for
    the demo and tests), ask Linux for a SIGTERM when the parent dies, so that a crashed test
    run leaves no node behind (the SIGTERM ends the node like any other: main)."""
    parent = os.environ.get("PYROKI_ROS_EXIT_WITH_PARENT")
    if not parent or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # the parent is already gone
        sys.exit(0)
