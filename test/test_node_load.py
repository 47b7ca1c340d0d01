"""Load: 8 client threads x 200 concurrent ~/solve_ik calls against one node process.

Every call must be answered, every success must hold under the independent reference FK,
and the node's resident memory must stay roughly flat. Counts can be reduced on a slow
machine with PYROKI_ROS_LOAD_CLIENTS / PYROKI_ROS_LOAD_CALLS (defaults 8 and 200). Latencies
are printed (pytest -s), never asserted: this machine is shared.
"""

from __future__ import annotations

import math
import os
import threading
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")

import reference_fk as ref
from builtin_interfaces.msg import Duration
from harness import NODE
from node_helpers import JOINTS, LOWER, MODEL, UPPER, panda_node, pose_stamped
from pyroki_ros.msg import ErrorCode, IKObjective
from pyroki_ros.srv import SolveIK

CLIENTS = int(os.environ.get("PYROKI_ROS_LOAD_CLIENTS", "8"))
CALLS = int(os.environ.get("PYROKI_ROS_LOAD_CALLS", "200"))


def request_for(target: np.ndarray) -> SolveIK.Request:
    objective = IKObjective(type=IKObjective.POSE, link="panda_hand", target=pose_stamped(target))
    # A generous budget: the node's 0.1 s default is for an unloaded machine.
    return SolveIK.Request(objectives=[objective], timeout=Duration(sec=20))


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with panda_node(
        tmp_path_factory, "test_node_load", mimic=False, ready_joint="panda_joint1"
    ) as env:
        yield env


@pytest.mark.slow
def test_concurrent_solve_ik_calls(node):
    rng = np.random.default_rng(7)
    margin = 0.1 * (UPPER - LOWER)
    total = CLIENTS * CALLS
    qs = rng.uniform(LOWER + margin, UPPER - margin, size=(total + 40, len(JOINTS)))
    targets = [ref.reference_fk(MODEL, q, JOINTS)["panda_hand"] for q in qs]

    # Warm the process (allocator, caches, DDS buffers) before the memory baseline.
    client = node.client(SolveIK, "solve_ik")
    for target in targets[total:]:
        assert node.session.call(client, request_for(target), timeout=120).error_code.val in (
            ErrorCode.SUCCESS,
            ErrorCode.NO_SOLUTION,
        )
    rss_before = node.node.rss_kib()

    results: list[list] = [[] for _ in range(CLIENTS)]
    errors: list[BaseException] = []
    start_line = threading.Barrier(CLIENTS)

    def worker(k: int) -> None:
        try:
            own = node.session.node.create_client(SolveIK, f"{NODE}/solve_ik")
            assert own.wait_for_service(timeout_sec=60)
            start_line.wait(timeout=120)
            for i in range(k * CALLS, (k + 1) * CALLS):
                sent = time.perf_counter()
                response = node.session.call(
                    own, request_for(targets[i]), timeout=300, node=node.node
                )
                results[k].append((i, time.perf_counter() - sent, response))
        except BaseException as e:  # noqa: BLE001 -- reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(CLIENTS)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=1800)
    wall = time.perf_counter() - started
    assert not errors, errors[0]
    assert all(not t.is_alive() for t in threads)
    rss_after = node.node.rss_kib()

    answered = [r for per_client in results for r in per_client]
    assert len(answered) == total
    solved, failed = 0, []
    for i, _, response in answered:
        assert list(response.solution.name) == JOINTS
        q = np.asarray(response.solution.position)
        assert np.all(q >= LOWER - 1e-6) and np.all(q <= UPPER + 1e-6)
        if response.success:
            solved += 1
            p_err, r_err = ref.pose_errors(
                targets[i], ref.reference_fk(MODEL, q, JOINTS)["panda_hand"]
            )
            assert p_err <= 1.1e-3 and r_err <= math.radians(1.0) + 1e-3, (i, p_err, r_err)
        else:
            assert response.error_code.val in (ErrorCode.NO_SOLUTION, ErrorCode.TIMEOUT)
            failed.append((i, response.message))
    assert solved >= 0.97 * total, f"{solved}/{total} solved; failures: {failed[:5]}"

    rtt = np.array([r[1] for r in answered]) * 1e3
    solve = np.array([r[2].solve_time for r in answered]) * 1e3
    print(
        f"\nload: {CLIENTS} clients x {CALLS} calls = {total} in {wall:.1f} s "
        f"({total / wall:.0f} calls/s); solved {solved}/{total}\n"
        f"  round trip ms: median {np.median(rtt):.1f}, p90 {np.percentile(rtt, 90):.1f}, "
        f"p99 {np.percentile(rtt, 99):.1f}, max {rtt.max():.1f}\n"
        f"  solver ms:     median {np.median(solve):.2f}, p90 {np.percentile(solve, 90):.2f}\n"
        f"  node VmRSS: {rss_before / 1024:.1f} MiB before, {rss_after / 1024:.1f} MiB after"
    )
    # Roughly flat: generous slack for allocator noise, none for a per-call leak
    # (e.g. 1600 calls x 100 KiB would be +156 MiB).
    assert rss_after <= rss_before + max(64 * 1024, 0.2 * rss_before), (rss_before, rss_after)
    assert node.node.alive()
