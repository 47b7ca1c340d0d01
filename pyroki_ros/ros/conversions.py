"""Conversions between ROS messages and the core's numpy arrays, checked at the boundary.

Quaternion order: ROS messages store ``(x, y, z, w)``; the core (jaxlie) uses ``(w, x, y, z)``.
Every conversion between the two goes through :func:`xyzw_to_wxyz` / :func:`wxyz_to_xyzw`.

Poses as arrays are ``wxyz_xyz`` (7,) float64: unit quaternion (w, x, y, z), then translation.
The small rigid-transform helpers below work on such arrays (or batches ``(..., 7)``) in
float64 numpy, on the host, so that moving a target between frames costs microseconds and no
JAX dispatch.

Bad values raise :class:`RequestError` carrying a ``pyroki_ros/ErrorCode`` value and a message
for a person; the node turns it into ``success = false`` + ``error_code`` + ``message``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Point, Pose, Quaternion, Vector3
from sensor_msgs.msg import JointState

from pyroki_ros.msg import ErrorCode

# Below this norm a quaternion / axis cannot be normalised meaningfully.
MIN_NORM = 1e-6
# Largest coordinate (m), quaternion component or joint position accepted: finite numbers
# beyond it (1e300) would overflow into inf / NaN inside the solver. 1e6 m is far past any
# robot's workspace, yet squares and products of it stay far from float64 overflow.
MAX_COORDINATE = 1e6
# Names quoted in one error message; the rest are counted ("... and N more").
MAX_QUOTED = 10


class RequestError(Exception):
    """A request the node refuses: ``code`` is an ErrorCode value, ``message`` says why."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = int(code)
        self.message = message


# --- quaternion order and rigid transforms (float64 numpy, wxyz_xyz) ------------------------


def xyzw_to_wxyz(xyzw) -> np.ndarray:
    """ROS order (x, y, z, w) -> core order (w, x, y, z); works on (..., 4)."""
    q = np.asarray(xyzw, np.float64)
    return np.concatenate([q[..., 3:4], q[..., 0:3]], axis=-1)


def wxyz_to_xyzw(wxyz) -> np.ndarray:
    """Core order (w, x, y, z) -> ROS order (x, y, z, w); works on (..., 4)."""
    q = np.asarray(wxyz, np.float64)
    return np.concatenate([q[..., 1:4], q[..., 0:1]], axis=-1)


def quat_multiply(a, b) -> np.ndarray:
    """Hamilton product of wxyz quaternions (..., 4): the rotation ``a`` after ``b``."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    aw, ax, ay, az = (a[..., i] for i in range(4))
    bw, bx, by, bz = (b[..., i] for i in range(4))
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_conjugate(q) -> np.ndarray:
    q = np.asarray(q, np.float64)
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def quat_rotate(q, v) -> np.ndarray:
    """Rotates vectors (..., 3) by unit wxyz quaternions (..., 4)."""
    q, v = np.asarray(q, np.float64), np.asarray(v, np.float64)
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def pose_compose(a, b) -> np.ndarray:
    """``a * b`` for wxyz_xyz poses (..., 7): b expressed in a's parent frame."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.concatenate(
        [quat_multiply(a[..., :4], b[..., :4]), quat_rotate(a[..., :4], b[..., 4:]) + a[..., 4:]],
        axis=-1,
    )


def pose_inverse(a) -> np.ndarray:
    a = np.asarray(a, np.float64)
    conj = quat_conjugate(a[..., :4])
    return np.concatenate([conj, -quat_rotate(conj, a[..., 4:])], axis=-1)


def pose_to_matrix(a) -> np.ndarray:
    """wxyz_xyz (7,) -> 4x4 homogeneous matrix."""
    w, x, y, z = np.asarray(a[:4], np.float64)
    rot = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
    out = np.eye(4)
    out[:3, :3] = rot
    out[:3, 3] = a[4:]
    return out


# --- messages -> arrays ------------------------------------------------------------------------


# Single poses and vectors are checked with plain float math: numpy's reductions (and BLAS,
# for norms) cost microseconds each on 3-4 numbers, and a request has a dozen of them.


def quoted(names: Sequence[str]) -> str:
    """At most MAX_QUOTED names for a message, then how many more."""
    shown = ", ".join(str(n)[:100] for n in names[:MAX_QUOTED])
    more = len(names) - MAX_QUOTED
    return shown + (f" ... and {more} more" if more > 0 else "")


def _check_numbers(values: Sequence[float], what: str, code: int = ErrorCode.INVALID_POSE):
    """``code`` unless every value is finite and within MAX_COORDINATE."""
    if not all(map(math.isfinite, values)):
        raise RequestError(code, f"{what} contains NaN or infinite values: {list(values)}")
    if not all(abs(v) <= MAX_COORDINATE for v in values):
        raise RequestError(code, f"{what} has values beyond +-{MAX_COORDINATE:g}: {list(values)}")


def vector(msg: Point | Vector3, what: str) -> np.ndarray:
    """(3,) float64 from a Point / Vector3; INVALID_POSE if not finite or beyond
    MAX_COORDINATE."""
    x, y, z = msg.x, msg.y, msg.z
    _check_numbers((x, y, z), what)
    return np.array((x, y, z), np.float64)


def unit_vector(msg: Vector3, what: str, default: Sequence[float] | None = None) -> np.ndarray:
    """Normalised (3,) vector. A zero vector is ``default`` if given, else INVALID_REQUEST."""
    v = vector(msg, what)
    norm = math.sqrt(msg.x * msg.x + msg.y * msg.y + msg.z * msg.z)
    if norm < MIN_NORM:
        if default is not None:
            return np.asarray(default, np.float64)
        raise RequestError(ErrorCode.INVALID_REQUEST, f"{what} must be a non-zero vector")
    return v / norm


def quaternion_wxyz(msg: Quaternion, what: str) -> np.ndarray:
    """Normalised wxyz (4,) from a ROS (xyzw) quaternion; INVALID_POSE if NaN/inf or ~zero."""
    x, y, z, w = msg.x, msg.y, msg.z, msg.w
    _check_numbers((x, y, z, w), f"{what} orientation")
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    if norm < MIN_NORM:
        raise RequestError(
            ErrorCode.INVALID_POSE,
            f"{what} orientation is a zero quaternion (x y z w = {[x, y, z, w]}); "
            "give a unit quaternion, e.g. w = 1 for no rotation",
        )
    return np.array((w / norm, x / norm, y / norm, z / norm), np.float64)


def pose_to_wxyz_xyz(msg: Pose, what: str, *, orientation: bool = True) -> np.ndarray:
    """wxyz_xyz (7,) float64 from a Pose.

    With ``orientation=False`` (objectives that ignore the target orientation) the quaternion
    is not used: it only has to be finite, and the result carries the identity rotation.
    """
    position = vector(msg.position, f"{what} position")
    if orientation:
        wxyz = quaternion_wxyz(msg.orientation, what)
    else:
        o = msg.orientation
        _check_numbers((o.x, o.y, o.z, o.w), f"{what} orientation")
        wxyz = np.array([1.0, 0.0, 0.0, 0.0])
    return np.concatenate([wxyz, position])


def pose_rows(poses: Sequence[Pose]) -> np.ndarray:
    """(N, 7) rows [x, y, z, qx, qy, qz, qw] (geometry_msgs order) from Pose messages, unchecked
    (see :func:`pose_rows_to_wxyz_xyz`)."""
    return np.array(
        [
            (
                p.position.x,
                p.position.y,
                p.position.z,
                p.orientation.x,
                p.orientation.y,
                p.orientation.z,
                p.orientation.w,
            )
            for p in poses
        ],
        np.float64,
    ).reshape(-1, 7)


def pose_rows_to_wxyz_xyz(rows, what: str, *, orientation: bool = True) -> np.ndarray:
    """(N, 7) wxyz_xyz from rows [x, y, z, qx, qy, qz, qw], checked and normalised as
    :func:`pose_to_wxyz_xyz` does one pose, in a few array operations. Errors name the first
    bad row as ``what[i]``."""
    rows = np.asarray(rows, np.float64).reshape(-1, 7)
    finite = np.isfinite(rows)
    bounded = np.abs(rows) <= MAX_COORDINATE  # False for NaN too
    for columns, part in ((slice(0, 3), "position"), (slice(3, 7), "orientation")):
        for good, problem in (
            (finite, "contains NaN or infinite values"),
            (bounded, f"has values beyond +-{MAX_COORDINATE:g}"),
        ):
            bad = np.flatnonzero(~good[:, columns].all(axis=1))
            if len(bad):
                raise RequestError(
                    ErrorCode.INVALID_POSE,
                    f"{what}[{bad[0]}] {part} {problem} ({len(bad)} target(s) affected)",
                )
    out = np.empty_like(rows)
    out[:, 4:] = rows[:, :3]
    if not orientation:
        out[:, :4] = (1.0, 0.0, 0.0, 0.0)
        return out
    norm = np.sqrt(np.sum(rows[:, 3:] ** 2, axis=1))
    bad = np.flatnonzero(norm < MIN_NORM)
    if len(bad):
        raise RequestError(
            ErrorCode.INVALID_POSE,
            f"{what}[{bad[0]}] orientation is a zero quaternion; give a unit quaternion, e.g. "
            "w = 1 for no rotation",
        )
    out[:, :4] = xyzw_to_wxyz(rows[:, 3:] / norm[:, None])
    return out


def duration_seconds(msg: Duration) -> float:
    return float(msg.sec) + 1e-9 * float(msg.nanosec)


def joint_state_positions(msg: JointState, what: str) -> dict[str, float]:
    """{name: position} from a JointState; INVALID_JOINT_STATE for inconsistent / NaN values."""
    names, positions = list(msg.name), list(msg.position)
    if len(names) != len(positions):
        raise RequestError(
            ErrorCode.INVALID_JOINT_STATE,
            f"{what} has {len(names)} names but {len(positions)} positions",
        )
    positions_of = dict(zip(names, positions))
    if len(positions_of) != len(names):  # linear: a dict, not a count per name
        duplicates = sorted(n for n, k in Counter(names).items() if k > 1)
        raise RequestError(
            ErrorCode.INVALID_JOINT_STATE, f"{what} names joints twice: {quoted(duplicates)}"
        )
    values = np.asarray(positions, np.float64)
    for bad, problem in (
        (~np.isfinite(values), "NaN or infinite positions"),
        (np.abs(values) > MAX_COORDINATE, f"positions beyond +-{MAX_COORDINATE:g}"),
    ):
        if bad.any():
            listed = [f"{names[i]} = {values[i]}" for i in np.flatnonzero(bad)]
            raise RequestError(
                ErrorCode.INVALID_JOINT_STATE, f"{what} has {problem}: {quoted(listed)}"
            )
    return positions_of


# --- arrays -> messages ------------------------------------------------------------------------


def wxyz_xyz_to_pose(a) -> Pose:
    a = np.asarray(a, np.float64)
    x, y, z, w = wxyz_to_xyzw(a[:4]).tolist()
    px, py, pz = a[4:7].tolist()
    return Pose(position=Point(x=px, y=py, z=pz), orientation=Quaternion(x=x, y=y, z=z, w=w))


def joint_state(names: Iterable[str], q, stamp=None) -> JointState:
    msg = JointState(name=list(names), position=np.asarray(q, np.float64).tolist())
    if stamp is not None:
        msg.header.stamp = stamp
    return msg


def seconds_to_duration(seconds: float) -> Duration:
    nanoseconds = round(seconds * 1e9)
    return Duration(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def fixed_frame_table(text: str) -> dict[str, tuple[str, np.ndarray]]:
    """The ``fixed_frames`` parameter: "name parent x y z qx qy qz qw; ..." (ROS order, the
    frame's pose in its parent link's frame, m) -> {name: (parent, wxyz_xyz (7,))}.

    Raises:
        ValueError: a malformed entry, non-finite numbers, a zero quaternion, a name twice.
    """
    table: dict[str, tuple[str, np.ndarray]] = {}
    for entry in filter(None, (e.strip() for e in text.split(";"))):
        name, *fields = entry.split()
        if len(fields) != 8:
            raise ValueError(f"fixed_frames entry '{entry}' is not 'name parent x y z qx qy qz qw'")
        try:
            numbers = np.array([float(v) for v in fields[1:]])
        except ValueError:
            raise ValueError(f"fixed_frames entry '{entry}': a value is not a number") from None
        quat = xyzw_to_wxyz(numbers[3:])
        if not np.all(np.isfinite(numbers)) or np.linalg.norm(quat) < 1e-9:
            raise ValueError(f"fixed_frames entry '{entry}': non-finite value or zero quaternion")
        if name in table:
            raise ValueError(f"fixed_frames names '{name}' twice")
        table[name] = (fields[0], np.concatenate([quat / np.linalg.norm(quat), numbers[:3]]))
    return table
