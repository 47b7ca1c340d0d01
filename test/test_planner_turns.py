"""pyroki_ros.ros.planning.Turns without a node: one plan at a time, and a request that waits
goes before the warm-up's background steps (a plain lock may hand itself straight back to
the thread that released it, so a first plan could wait for every background step)."""

from __future__ import annotations

import threading
import time

import pytest

from pyroki_ros.ros.planning import Turns


def _waiting(target, name: str, order: list[str]) -> threading.Thread:
    def run() -> None:
        with target():
            order.append(name)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def test_a_waiting_request_goes_before_the_background():
    turns, order = Turns(), []
    with turns.request():
        background = _waiting(turns.background, "background", order)
        time.sleep(0.05)  # the background waits first
        request = _waiting(turns.request, "request", order)
        time.sleep(0.05)
        assert order == []  # neither while the turn is held
    request.join(5)
    background.join(5)
    assert order == ["request", "background"]


def test_background_steps_in_a_row_let_a_request_in_between():
    """The warm-up's loop of background turns: a request that comes during one step runs
    before the next."""
    turns, order = Turns(), []
    step_started = threading.Event()

    def warm_up() -> None:
        for i in range(3):
            with turns.background():
                order.append(f"step {i}")
                step_started.set()
                time.sleep(0.05)

    thread = threading.Thread(target=warm_up, daemon=True)
    thread.start()
    assert step_started.wait(5)
    request = _waiting(turns.request, "request", order)
    request.join(5)
    thread.join(5)
    assert order == ["step 0", "request", "step 1", "step 2"]


def test_one_turn_at_a_time_and_a_request_times_out():
    turns = Turns()
    with turns.request():
        start = time.perf_counter()
        with pytest.raises(TimeoutError), turns.request(timeout=0.1):
            pass
        assert 0.09 <= time.perf_counter() - start < 1.0
    with turns.request(timeout=0.1):  # free again: no wait, and the failed wait left no trace
        pass
    with turns.background():
        pass
