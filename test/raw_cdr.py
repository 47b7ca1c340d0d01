"""Raw (already serialised, CDR) messages past the interfaces' bounds, or huge: what a client
that bypasses rclpy can send (the hostile-input tests and bench/hostile_input.py).

rclpy's ``Publisher.publish`` takes ``bytes`` as an already-serialised message and sends them
as they are, past the typesupport's serialiser (which refuses a bounded sequence over its
bound). CDR (little endian, XCDR1 as rmw_fastrtps writes it): a 4-byte encapsulation header,
then each field aligned to its size relative to the end of that header.
"""

from __future__ import annotations

import struct

import numpy as np

CDR_LE = b"\x00\x01\x00\x00"


def joint_state_cdr(names: int = 0, positions: int = 0) -> bytes:
    """A sensor_msgs/JointState of ``names`` 11-character names (16 bytes each) and
    ``positions`` float64 positions, empty frame_id, velocity and effort."""
    head = CDR_LE + bytes(8) + struct.pack("<I", 1) + bytes(4)  # stamp, frame_id "" (+pad)
    block = b"".join(struct.pack("<I", 12) + f"j{i:010d}".encode() + b"\0" for i in range(1000))
    body = block * (names // 1000) + block[: 16 * (names % 1000)]
    data = np.arange(positions, dtype="<f8").tobytes()  # 8-aligned: 28 + 16 n - 4 = 0 mod 8
    tail = struct.pack("<I", positions) + data + bytes(8)  # velocity, effort: empty
    return head + struct.pack("<I", names) + body + tail


def goal_cdr(objective, count: int) -> bytes:
    """A pyroki_ros/MultiLinkGoal (empty frame_id) of ``count`` copies of ``objective``: a
    legal message of 1 and 2 objectives serialised by rclpy, the second objective's bytes
    (it starts 4 mod 8, as every later one does) repeated, the count patched (offset 20)."""
    from pyroki_ros.msg import MultiLinkGoal
    from rclpy.serialization import serialize_message

    one, two = (serialize_message(MultiLinkGoal(objectives=[objective] * k)) for k in (1, 2))
    assert struct.unpack_from("<I", two, 20) == (2,)
    out = bytearray(two + two[len(one) :] * (count - 2))
    struct.pack_into("<I", out, 20, count)
    return bytes(out)


def collision_object_cdr(dimensions: list[float]) -> bytes:
    """A pyroki_ros/CollisionObject ADD of a sphere whose ``dimensions`` has any length (the
    interface says ``float64[<=3]``): three serialised, the rest spliced in after them."""
    from pyroki_ros.msg import CollisionObject
    from rclpy.serialization import serialize_message
    from shape_msgs.msg import SolidPrimitive

    msg = CollisionObject(id="raw_sphere", operation=CollisionObject.ADD)
    msg.primitive = SolidPrimitive(type=SolidPrimitive.SPHERE, dimensions=dimensions[:3])
    msg.pose.position.x = 0.5
    msg.pose.orientation.w = 1.0
    raw = bytearray(serialize_message(msg))
    data = struct.pack("<3d", *dimensions[:3])
    at = raw.index(data)  # the 3 doubles; their count 4 or 8 bytes before (alignment)
    count_at = at - 4 if struct.unpack_from("<I", raw, at - 4) == (3,) else at - 8
    assert struct.unpack_from("<I", raw, count_at) == (3,)
    struct.pack_into("<I", raw, count_at, len(dimensions))
    extra = struct.pack(f"<{len(dimensions) - 3}d", *dimensions[3:])  # 8n bytes: alignment kept
    return bytes(raw[: at + 24] + extra + raw[at + 24 :])


def string_cdr(head: bytes, size: int, tail: bytes) -> bytes:
    """A std_msgs/String of ``size`` bytes: ``head``, spaces, ``tail``."""
    text = head + b" " * (size - len(head) - len(tail)) + tail
    return CDR_LE + struct.pack("<I", len(text) + 1) + text + b"\0"
