"""A first IK answer from a running pyroki_ros_node (any route: venv node, launch, colcon).

    .venv/bin/python examples/first_ik.py                      # /pyroki_ros_node, bundled Panda
    python3 examples/first_ik.py --node /arm1/pyroki_ros_node  # launched with namespace:=arm1

Waits for ~/solve_ik, asks for the Panda's hand 0.4 m ahead and 0.4 m up, pointing down, and
repeats while the node answers NO_ROBOT_MODEL (still loading and compiling its model). Prints
the answer and how long it took from this script's start. Exit status 0 on success.
"""

from __future__ import annotations

import argparse
import sys
import time

import rclpy
from pyroki_ros.msg import ErrorCode, IKObjective
from pyroki_ros.srv import SolveIK


def main() -> int:
    start = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--node", default="/pyroki_ros_node", help="the node's full name")
    parser.add_argument("--link", default="panda_hand", help="link that reaches the target")
    parser.add_argument("--timeout", type=float, default=300.0, help="s to wait in all")
    args = parser.parse_args()

    rclpy.init()
    node = rclpy.create_node("first_ik")
    client = node.create_client(SolveIK, f"{args.node}/solve_ik")
    goal = IKObjective(type=IKObjective.POSE, link=args.link)
    goal.target.pose.position.x, goal.target.pose.position.z = 0.4, 0.4
    goal.target.pose.orientation.x, goal.target.pose.orientation.w = 1.0, 0.0  # z axis down
    response = None
    try:
        while time.monotonic() - start < args.timeout:
            if not client.wait_for_service(timeout_sec=1.0):
                continue
            future = client.call_async(SolveIK.Request(objectives=[goal]))
            rclpy.spin_until_future_complete(node, future, timeout_sec=args.timeout)
            response = future.result()
            if response is None or response.error_code.val != ErrorCode.NO_ROBOT_MODEL:
                break
            time.sleep(0.2)  # the node is still loading its model
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    if response is None:
        print(f"no answer from {args.node}/solve_ik within {args.timeout:.0f} s")
        return 1
    joints = ", ".join(
        f"{n} {p:+.3f}" for n, p in zip(response.solution.name, response.solution.position)
    )
    print(
        f"success={response.success} code={response.error_code.val} {response.message}\n"
        f"{joints}\nfirst answer after {time.monotonic() - start:.1f} s "
        f"(solve {response.solve_time * 1e3:.1f} ms)"
    )
    return 0 if response.success else 1


if __name__ == "__main__":
    sys.exit(main())
