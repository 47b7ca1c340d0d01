"""Conversions between ROS messages and the core's numpy arrays: the quaternion-order boundary.

ROS messages store quaternions ``(x, y, z, w)``; the core (jaxlie) uses ``(w, x, y, z)``. This
module is the only place where one order becomes the other. Poses as arrays are ``wxyz_xyz``
(7,) float64: unit quaternion (w, x, y, z), then translation.

Nothing here checks values: requests.py checks what a request carries (finite, bounded,
non-zero quaternions) before it converts it with these functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Point, Pose, Vector3

# --- quaternion order --------------------------------------------------------------------------


def xyzw_to_wxyz(xyzw) -> np.ndarray:
    """ROS order (x, y, z, w) -> core order (w, x, y, z); works on (..., 4)."""
    q = np.asarray(xyzw, np.float64)
    return np.concatenate([q[..., 3:4], q[..., 0:3]], axis=-1)


def wxyz_to_xyzw(wxyz) -> np.ndarray:
    """Core order (w, x, y, z) -> ROS order (x, y, z, w); works on (..., 4)."""
    q = np.asarray(wxyz, np.float64)
    return np.concatenate([q[..., 1:4], q[..., 0:1]], axis=-1)


# --- messages -> numbers / arrays ------------------------------------------------------------------
# Single poses are read with plain float math: numpy's reductions cost microseconds each on
# 3-4 numbers, and a request has a dozen of them.


def xyz(msg: Point | Vector3) -> tuple[float, float, float]:
    return msg.x, msg.y, msg.z


def pose_numbers(msg: Pose) -> tuple[float, ...]:
    """(x, y, z, qx, qy, qz, qw): a Pose's 7 numbers in message (ROS) order."""
    p, o = msg.position, msg.orientation
    return p.x, p.y, p.z, o.x, o.y, o.z, o.w


def wxyz_xyz(numbers: Sequence[float], *, orientation: bool = True) -> np.ndarray:
    """wxyz_xyz (7,) float64 from a pose's numbers in message order (:func:`pose_numbers`),
    the quaternion normalised (it must be non-zero); with ``orientation=False`` the rotation is
    the identity (objectives that ignore it)."""
    x, y, z, qx, qy, qz, qw = numbers
    if not orientation:
        return np.array((1.0, 0.0, 0.0, 0.0, x, y, z), np.float64)
    norm = math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
    return np.array((qw / norm, qx / norm, qy / norm, qz / norm, x, y, z), np.float64)


def pose_to_wxyz_xyz(msg: Pose, *, orientation: bool = True) -> np.ndarray:
    """wxyz_xyz (7,) float64 from a Pose (see :func:`wxyz_xyz`)."""
    return wxyz_xyz(pose_numbers(msg), orientation=orientation)


def pose_rows(poses: Sequence[Pose]) -> np.ndarray:
    """(N, 7) rows in message order [x, y, z, qx, qy, qz, qw] from Pose messages."""
    return np.array([pose_numbers(p) for p in poses], np.float64).reshape(-1, 7)


def rows_to_wxyz_xyz(rows, *, orientation: bool = True) -> np.ndarray:
    """(N, 7) wxyz_xyz from rows [x, y, z, qx, qy, qz, qw], quaternions normalised (each must
    be non-zero); with ``orientation=False`` the rotations are the identity."""
    rows = np.asarray(rows, np.float64).reshape(-1, 7)
    out = np.empty_like(rows)
    out[:, 4:] = rows[:, :3]
    if not orientation:
        out[:, :4] = (1.0, 0.0, 0.0, 0.0)
        return out
    norm = np.sqrt(np.sum(rows[:, 3:] ** 2, axis=1))
    out[:, :4] = xyzw_to_wxyz(rows[:, 3:] / norm[:, None])
    return out


def duration_seconds(msg: Duration) -> float:
    return float(msg.sec) + 1e-9 * float(msg.nanosec)


# --- arrays -> messages ------------------------------------------------------------------------


def fill_pose(msg: Pose, a) -> Pose:
    """Sets a Pose's fields from wxyz_xyz (7,) in place (builders that reuse messages); returns
    it."""
    w, x, y, z, px, py, pz = np.asarray(a, np.float64).tolist()
    p, o = msg.position, msg.orientation
    p.x, p.y, p.z, o.x, o.y, o.z, o.w = px, py, pz, x, y, z, w
    return msg


def wxyz_xyz_to_pose(a) -> Pose:
    return fill_pose(Pose(), a)


def seconds_to_duration(seconds: float) -> Duration:
    nanoseconds = round(seconds * 1e9)
    return Duration(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)
