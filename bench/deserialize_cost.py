#!/usr/bin/env python3
"""What rclpy spends turning a PlanTrajectory request into Python objects, by obstacle count:
the reason the interfaces bound their nested-message sequences (pyroki_ros/ros/params.py: RequestLimits).
Serialises a request with N sphere obstacles and deserialises it, as a node's take does
before any node code runs.

Usage (repository root)::

    .venv/bin/python bench/deserialize_cost.py
"""

from __future__ import annotations

import time

from common import git_rev, host

from geometry_msgs.msg import PoseStamped
from pyroki_ros.srv import PlanTrajectory
from rclpy.serialization import deserialize_message, serialize_message
from shape_msgs.msg import SolidPrimitive


def main() -> None:
    # Up to the interface bound (4096): past it rclpy refuses to serialise the request.
    print(f"machine: {host()}; git {git_rev()}")
    print("| obstacles | bytes | serialise s | deserialise s | per obstacle us |")
    print("|---:|---:|---:|---:|---:|")
    for count in (1024, 4096):
        request = PlanTrajectory.Request()
        request.obstacles = [SolidPrimitive(type=1, dimensions=[0.1, 0.1, 0.1])] * count
        request.obstacle_poses = [PoseStamped()] * count
        start = time.perf_counter()
        data = serialize_message(request)
        middle = time.perf_counter()
        deserialize_message(data, PlanTrajectory.Request)
        end = time.perf_counter()
        print(
            f"| {count:,} | {len(data):,} | {middle - start:.3f} | {end - middle:.3f} | "
            f"{1e6 * (end - middle) / count:.0f} |"
        )


if __name__ == "__main__":
    main()
