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

The topics live on a DDS participant of their own (:class:`Inputs`: a second rclpy context
and a node ``<name>_inputs`` spun by its own threads), apart from the one that serves the
services. Measured (bench/hostile_input.py, raw cases, the probe calls that overlap each
case, 2026-11-28): with the topics on the services' participant, a 96 MB message held the
``compute_fk`` calls sent meanwhile 2.3-2.8 s in 4 of 6 tries, although the node dropped it
unread within 0.5 s (the requests reached the node late: below node code); on a participant
of their own, at most 0.15 s in 18 tries. What stays: rclpy's raw take copies the bytes
holding the GIL (~1 ms per MB here), and Fast DDS reassembles any sample of an unbounded
type before the take (a 96 MB one adds ~0.1-0.2 GB to the node's peak memory).

Not covered, and not coverable in node code: services (rclpy has no raw service server: a
request is converted before the handler runs).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.serialization import deserialize_message
from rclpy.signals import SignalHandlerOptions

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
    logger=None,
    **kwargs,
):
    """``node.create_subscription`` whose ``callback`` only sees messages within
    ``budget() -> (bytes, reason)`` (read at each message: parameters may change); a larger
    one, or one that does not deserialise, is dropped unread with a warning (at most one per
    WARN_EVERY_S per topic) on ``logger`` (default: the node's). ``kwargs``: callback_group
    etc."""
    logger = logger or node.get_logger()
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


class Inputs:
    """A node on a DDS participant of its own, for the topics anyone may publish to: a second
    rclpy context (the same ROS arguments: domain, enclave) and a node ``name`` in
    ``namespace``, spun by ``threads`` executor threads once :meth:`start` is called.

    It takes no global arguments (remaps, ``__node:=``): give it names resolved by the main
    node. Its callbacks run on its own threads, beside the main node's executor."""

    def __init__(
        self,
        name: str,
        namespace: str,
        args: Sequence[str] | None,
        domain_id: int,
        threads: int = 2,
    ):
        self.context = rclpy.Context()
        # Signals are the main context's (shutdown.py): none installed for this one.
        rclpy.init(
            args=list(args) if args is not None else None,
            context=self.context,
            domain_id=domain_id,
            signal_handler_options=SignalHandlerOptions.NO,
        )
        self.node = rclpy.create_node(
            name,
            namespace=namespace,
            context=self.context,
            use_global_arguments=False,
            start_parameter_services=False,
            enable_rosout=False,
        )
        self._executor = MultiThreadedExecutor(num_threads=threads, context=self.context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(
            target=self._executor.spin, name="pyroki_ros_inputs", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Stops taking messages (running callbacks are not waited for) and leaves the domain."""
        self._executor.shutdown(timeout_sec=0, wait_for_threads=False)
        self.node.destroy_node()
        self.context.try_shutdown()
