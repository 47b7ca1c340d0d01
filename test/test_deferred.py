"""pyroki_ros.ros.deferred without ROS: a request whose program compiles is answered within
its budget (a little before it: answer_margin), the compile goes on for the next request,
and a budget spent before the compile was queued is answered at once."""

from __future__ import annotations

import threading
import time

from pyroki_ros.ros.deferred import (
    CompileQueue,
    Deferred,
    allow_deferred,
    answer_margin,
    run_after_compile,
)


class FakeService:
    """What allow_deferred wraps: ``send_response(response, header)``."""

    def __init__(self) -> None:
        self.sent: list[tuple[object, float]] = []
        self.event = threading.Event()

    def send_response(self, response, header) -> None:
        self.sent.append((response, time.perf_counter()))
        self.event.set()


def call(queue, work, budget, start=None):
    """A request as the executor handles it: the callback's return value goes to the
    (wrapped) send_response with the header. Returns the service and the start time."""
    service = FakeService()
    allow_deferred(service)
    start = time.perf_counter() if start is None else start
    answer = run_after_compile(
        queue, "program", work, budget, start, busy=lambda: "busy", late=lambda: "late"
    )
    service.send_response(answer, header=None)
    return service, start


def test_a_compile_longer_than_the_budget_is_answered_within_it_and_goes_on():
    queue = CompileQueue(capacity=4)
    compiled = threading.Event()

    def work(deferred: Deferred) -> None:
        time.sleep(0.6)  # the compile
        compiled.set()
        deferred.resolve("solved")  # too late: the first answer wins

    try:
        service, start = call(queue, work, budget=0.3)
        assert service.event.wait(5.0)
        response, at = service.sent[0]
        assert response == "late"
        margin = answer_margin(0.3)
        assert 0.3 - margin - 0.005 <= at - start < 0.3
        assert compiled.wait(5.0)  # the compile finished for the next request
        assert len(service.sent) == 1
    finally:
        queue.shutdown()


def test_a_compile_within_the_budget_answers_its_result():
    queue = CompileQueue(capacity=4)
    try:
        service, _ = call(queue, lambda deferred: deferred.resolve("solved"), budget=2.0)
        assert service.event.wait(5.0)
        time.sleep(0.1)
        assert [response for response, _ in service.sent] == ["solved"]
    finally:
        queue.shutdown()


def test_a_budget_spent_before_the_compile_was_queued_is_answered_at_once():
    queue = CompileQueue(capacity=4)
    try:
        service, _ = call(
            queue, lambda d: time.sleep(1.0), budget=0.1, start=time.perf_counter() - 1
        )
        assert service.event.wait(0.5)
        assert service.sent[0][0] == "late"
    finally:
        queue.shutdown()


def test_no_budget_waits_for_the_compile():
    queue = CompileQueue(capacity=4)

    def work(deferred: Deferred) -> None:
        time.sleep(0.2)
        deferred.resolve("solved")

    try:
        service, _ = call(queue, work, budget=0.0)
        assert service.event.wait(5.0)
        assert service.sent[0][0] == "solved"
    finally:
        queue.shutdown()
