"""The byte budgets of the node's topics: a message is weighed, serialised, before anything
turns it into Python.

rclpy converts a message into Python objects (a ``str`` per name, an object per nested
message) in the executor thread, holding the GIL, before any node code runs; Fast DDS's
deserialiser does not enforce the interfaces' sequence bounds either (``IKObjective[<=64]``,
``float64[<=3]``), so a client that publishes raw CDR bytes reaches the node with any size.
Measured (bench/hostile_input.py, raw cases, docs/benchmarks/hostile_input.md): a 96 MB
``~/goal`` of 500,000 objectives held the request path 26 s (compute_fk waited as long) and
took the node to 1.6 GB; a 96 MB /joint_states of 6 million names held it 1.2 s, 2.3 GB.

So the node's topics are taken raw (``raw=True``: the serialised bytes, one copy) and a
message larger than its topic's byte budget is dropped with a warning naming the limit it
follows from, before any conversion; a smaller one is deserialised as rclpy would have done
and handed to the callback. The budgets derive from the node's size limits (params.py) with
generous room per element, so no message the limits allow is refused; they only bound the
conversion cost (about 1 s per 5 million strings here) of what the limits refuse anyway.

The weighing happens in the node's topic process (inputs.py), so that a huge message never
reaches the node's process at all.

Not covered, and not coverable in node code: services (rclpy has no raw service server: a
request is converted before the handler runs).
"""

from __future__ import annotations

import math
import time

# Room for the fixed part of a message (header, frame_id, scalars) and per element: generous,
# so that no message the node's count limits allow is refused by its size.
FIXED_BYTES = 64 * 1024
NAME_BYTES = 512  # one JointState entry: a name (up to ~480 characters) and three float64
OBJECTIVE_BYTES = 4 * 1024  # one IKObjective: ~200 bytes and three names
UTF8_MAX = 4  # bytes per character: max_urdf_bytes counts characters
WARN_EVERY_S = 5.0  # a topic's warnings about dropped messages, at most one per this


def joint_state_bytes(limits) -> tuple[int, str]:
    """A JointState's budget and the limit it follows from."""
    return FIXED_BYTES + limits.max_names * NAME_BYTES, f"max_names = {limits.max_names}"


def goal_bytes(limits) -> tuple[int, str]:
    """A MultiLinkGoal's (or a PoseStamped goal's) budget."""
    budget = FIXED_BYTES + limits.max_objectives * OBJECTIVE_BYTES
    return budget, f"max_objectives = {limits.max_objectives}"


def collision_object_bytes(limits) -> tuple[int, str]:
    """A CollisionObject's budget (one sphere, box or cylinder and its names)."""
    return FIXED_BYTES, "one object per message"


def urdf_bytes(limits) -> tuple[int, str]:
    """A robot_description String's budget."""
    budget = FIXED_BYTES + UTF8_MAX * limits.max_urdf_bytes
    return budget, f"max_urdf_bytes = {limits.max_urdf_bytes}"


def largest_budget(limits) -> int:
    """The largest of the node's topic budgets (bytes) under ``limits``."""
    budgets = (joint_state_bytes, goal_bytes, collision_object_bytes, urdf_bytes)
    return max(budget(limits)[0] for budget in budgets)


def too_large(what: str, size: int, budget: int, reason: str) -> str:
    return (
        f"{what}: {size:,} bytes serialised, over the {budget:,} bytes the node takes "
        f"({reason}, a node parameter); dropped unread"
    )


class Warnings:
    """Warnings about dropped messages, at most one per WARN_EVERY_S per topic: ``warn(key,
    text)`` (a flood of bad messages must not flood the log)."""

    def __init__(self, logger):
        self._logger = logger
        self._last: dict = {}

    def __call__(self, key, text: str) -> None:
        now = time.monotonic()
        if now - self._last.get(key, -math.inf) >= WARN_EVERY_S:
            self._last[key] = now
            self._logger.warning(text)
