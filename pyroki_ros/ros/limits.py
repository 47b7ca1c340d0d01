"""The node's size limits: every request size is bounded before any work is done.

A client on the DDS domain can send a message of any size. Each size the node would spend
time or memory on (objectives, targets, obstacles, steps, names, URDF text) has a limit, a
node parameter with a safe default (see ``PARAMETERS`` in node.py); a request over one is
refused at once with ``REQUEST_TOO_LARGE`` and a message naming the parameter, before any
parsing that grows with the size. The defaults keep one request's work in the seconds and
the node's memory under ~2 GB (docs/benchmarks/hostile_input.md measures both).

The interfaces add a ceiling of their own: the sequences of nested messages are bounded in
msg/ and srv/ (objectives and waypoints 64, obstacles and half-spaces 4096, message-form batch
targets and retarget steps 16384, points per step 64), because rclpy turns every nested
message into a Python object before any node code runs (~30 us per obstacle here,
bench/deserialize_cost.py: 100,000 obstacles would take ~3 s). A standard client cannot even
serialise a request past a ceiling (the error is raised on its side, at once); a parameter
above a ceiling has no effect beyond it.
"""

from __future__ import annotations

import dataclasses

from pyroki_ros.msg import ErrorCode
from pyroki_ros.ros.conversions import RequestError


@dataclasses.dataclass(frozen=True)
class RequestLimits:
    """Upper bounds on request sizes; each field is the node parameter of the same name."""

    max_objectives: int = 16  # per IK problem (solve_ik, a goal, a plan's goal or waypoint)
    max_waypoints: int = 16  # waypoint groups of one plan
    max_batch_targets: int = 100_000  # targets of one solve_ik_batch
    max_obstacles: int = 1024  # obstacles + half-spaces of one plan
    max_trajectory_steps: int = 4096  # knots of one plan
    max_retarget_steps: int = 4096  # steps of one retarget_motion
    max_keypoints: int = 200_000  # steps x links of one retarget_motion
    max_names: int = 1024  # names (joint, link) in any one list of a message
    max_urdf_bytes: int = 10_000_000  # a robot_description / urdf_file
    max_urdf_links: int = 1000  # links of a robot model

    def check(self, count: int, limit: str, what: str) -> None:
        """REQUEST_TOO_LARGE when ``count`` exceeds the limit named ``limit``."""
        bound = getattr(self, limit)
        if count > bound:
            raise RequestError(
                ErrorCode.REQUEST_TOO_LARGE,
                f"{what}: {count} is over the node's limit {limit} = {bound} (a node parameter)",
            )

    def check_state(self, state, what: str) -> None:
        """A JointState's names and positions (and velocities, efforts) within max_names."""
        count = max(len(state.name), len(state.position))
        self.check(count, "max_names", f"{what} names / positions")
