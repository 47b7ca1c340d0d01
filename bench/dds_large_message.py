#!/usr/bin/env python3
"""Does a huge raw message on a topic stall a service of the same process, and does a DDS
participant of its own for the topic (a second rclpy Context) avoid it?

The hostile-input benchmark's raw 96 MB cases (docs/benchmarks/hostile_input.md, rows 6c-6f)
delay the node's ``compute_fk`` by 0.2-0.9 s in some runs, before any node code runs. This
script asks the same question without the node: a server process with a trivial service
(``std_srvs/Trigger``) and a raw ``sensor_msgs/JointState`` subscription, either on the
service's participant (``same``) or on a second one with its own executor thread
(``separate``); a probe process calls the service every 20 ms; this process publishes
``--rounds`` raw JointState messages of ``--mb`` MB (12 million positions for 96 MB), 3 s
apart. Per message: the probe calls started from 0.5 s before the publish to 2.5 s after it,
their median and worst latency.

What it showed (2026-11-28, this 2-core VM): both modes ~0.1 s per message (rclpy's copy of
the bytes under the GIL), "same" now and then much longer (0.35 s, 2.0 s on a first
message). The node itself stalled far more often (2.3-2.8 s in 4 of 6 messages with the
topics on the services' participant, none with a participant of their own:
bench/hostile_input.py's raw cases), so it takes its topics on a participant of their own
(pyroki_ros/ros/bounded.py).

Usage (repository root; ~1 min per mode)::

    .venv/bin/python bench/dds_large_message.py            # both modes
    .venv/bin/python bench/dds_large_message.py --modes separate --rounds 3
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import host, loadavg, utc_now

SERVICE = "/dds_exp_trigger"
TOPIC = "/dds_exp_joint_states"


def server(mode: str) -> None:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from std_srvs.srv import Trigger

    rclpy.init()
    node = rclpy.create_node("dds_exp_server")
    node.create_service(Trigger, SERVICE, lambda request, response: response)
    taker = node
    if mode == "separate":
        context = rclpy.Context()
        rclpy.init(context=context)
        taker = rclpy.create_node("dds_exp_inputs", context=context)
        inputs = SingleThreadedExecutor(context=context)
        inputs.add_node(taker)
        threading.Thread(target=inputs.spin, daemon=True).start()
    taker.create_subscription(JointState, TOPIC, lambda raw: None, 10, raw=True)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    executor.spin()


def probe(out: Path) -> None:
    import rclpy
    from std_srvs.srv import Trigger

    rclpy.init()
    node = rclpy.create_node("dds_exp_probe")
    client = node.create_client(Trigger, SERVICE)
    client.wait_for_service(30.0)
    with out.open("w") as f:
        while True:
            start = time.time()
            future = client.call_async(Trigger.Request())
            rclpy.spin_until_future_complete(node, future, timeout_sec=10.0)
            f.write(f"{start:.4f} {time.time() - start:.4f}\n")
            f.flush()
            time.sleep(0.02)


def run(mode: str, rounds: int, mb: float) -> list[tuple[int, float, float]]:
    """(calls, median ms, worst ms) of the probe per message."""
    import rclpy
    from raw_cdr import joint_state_cdr  # test/raw_cdr.py
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    out = Path(tempfile.mkdtemp(prefix="dds_exp_")) / "probe.txt"
    me = [sys.executable, __file__]
    processes = [subprocess.Popen([*me, "--server", mode])]
    time.sleep(3.0)
    processes.append(subprocess.Popen([*me, "--probe", str(out)]))
    time.sleep(5.0)
    node = rclpy.create_node(f"dds_exp_flood_{mode}")
    raw = joint_state_cdr(positions=int(mb * 1e6 / 8))
    windows = []
    try:
        for _ in range(rounds):
            publisher = node.create_publisher(
                JointState, TOPIC, QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
            )
            while publisher.get_subscription_count() < 1:
                time.sleep(0.05)
            time.sleep(0.5)
            start = time.time()
            publisher.publish(raw)
            time.sleep(2.5)
            windows.append((start - 0.5, time.time()))
            node.destroy_publisher(publisher)
    finally:
        for process in processes:
            process.kill()
        node.destroy_node()
    calls = [tuple(map(float, line.split())) for line in out.read_text().splitlines() if line]
    rows = []
    for a, b in windows:
        latency = sorted(d for t, d in calls if a <= t <= b)
        rows.append((len(latency), 1e3 * latency[len(latency) // 2], 1e3 * latency[-1]))
    return rows


def main() -> int:
    if sys.argv[1:2] == ["--server"]:
        server(sys.argv[2])
        return 0
    if sys.argv[1:2] == ["--probe"]:
        probe(Path(sys.argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="same,separate")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--mb", type=float, default=96.0)
    args = parser.parse_args()
    import rclpy

    rclpy.init()
    print(f"{utc_now()}, {host()}, load {loadavg()}; {args.mb:g} MB raw JointState")
    try:
        for mode in args.modes.split(","):
            for i, (n, p50, worst) in enumerate(run(mode, args.rounds, args.mb)):
                print(
                    f"{mode}: message {i + 1}: {n} calls, median {p50:.1f} ms, worst {worst:.1f} ms"
                )
    finally:
        rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
