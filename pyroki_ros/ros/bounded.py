"""Subscriptions that weigh a message's serialised size before rclpy turns it into Python.

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

Not covered, and not coverable in node code: services (rclpy has no raw service server: a
request is converted before the handler runs), and what Fast DDS holds before the take (it
reassembles any sample of an unbounded type; the topics' queue depths bound how many).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from rclpy.serialization import deserialize_message

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


def too_large(what: str, size: int, budget: int, reason: str) -> str:
    return (
        f"{what}: {size:,} bytes serialised, over the {budget:,} bytes the node takes "
        f"({reason}, a node parameter); dropped unread"
    )


def subscribe(
    node,
    msg_type,
    topic: str,
    callback: Callable,
    qos,
    budget: Callable[[], tuple[int, str]],
    what: str,
    **kwargs,
):
    """``node.create_subscription`` whose ``callback`` only sees messages within
    ``budget() -> (bytes, reason)`` (read at each message: parameters may change); a larger
    one, or one that does not deserialise, is dropped unread with a warning (at most one per
    WARN_EVERY_S per topic). ``kwargs``: callback_group etc."""
    logger = node.get_logger()
    last_warning = [-math.inf]

    def warn(text: str) -> None:
        now = time.monotonic()
        if now - last_warning[0] >= WARN_EVERY_S:
            last_warning[0] = now
            logger.warning(text)

    def on_raw(raw: bytes) -> None:
        limit, reason = budget()
        if len(raw) > limit:
            warn(too_large(what, len(raw), limit, reason))
            return
        try:
            msg = deserialize_message(raw, msg_type)
        except Exception as e:  # noqa: BLE001 -- malformed CDR: an exception would stop spin
            warn(f"{what}: {len(raw):,} bytes that do not deserialise ({e}); dropped")
            return
        callback(msg)

    return node.create_subscription(msg_type, topic, on_raw, qos, raw=True, **kwargs)
