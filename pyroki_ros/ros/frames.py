"""Rigid transforms of wxyz_xyz poses on the host, float64 numpy, for the ROS layer.

Why not jaxlie here: with JAX's x64 off (the node's default) jaxlie computes in float32, and
every operation is a JAX dispatch. The node moves request targets between frames and answers
``~/compute_fk`` in other frames on its request thread: those must stay float64 (a float32
round trip moves a pose by ~1e-7 of its size before the solver sees it, and ComputeFK answers
"exactly this state") and cost microseconds. The arithmetic itself is not written again: it is
the core's quaternion algebra on component tuples (:mod:`pyroki_ros.model.kinematics`), which
is plain ``*`` / ``+`` and so runs on numpy float64 arrays as it does on JAX arrays.

A pose is ``(..., 7)``: unit quaternion (w, x, y, z), then translation (x, y, z).
"""

from __future__ import annotations

import numpy as np

from pyroki_ros.model import kinematics as K


def _parts(pose) -> tuple[tuple, tuple]:
    pose = np.asarray(pose, np.float64)
    return tuple(pose[..., i] for i in range(4)), tuple(pose[..., 4 + i] for i in range(3))


def _vec(v) -> tuple:
    v = np.asarray(v, np.float64)
    return tuple(v[..., i] for i in range(3))


def compose(a, b) -> np.ndarray:
    """``a * b`` (..., 7): ``b`` given in ``a``'s frame, expressed in ``a``'s parent."""
    q, p = K.compose(_parts(a), _parts(b))
    return np.stack((*q, *p), axis=-1)


def inverse(a) -> np.ndarray:
    """The inverse of poses (..., 7)."""
    q, p = _parts(a)
    conj = K.qconj(q)
    t = K.rotate(conj, p)
    return np.stack((*conj, -t[0], -t[1], -t[2]), axis=-1)


def rotate(wxyz, v) -> np.ndarray:
    """Vectors (..., 3) rotated by unit wxyz quaternions (..., 4)."""
    wxyz = np.asarray(wxyz, np.float64)
    return np.stack(K.rotate(tuple(wxyz[..., i] for i in range(4)), _vec(v)), axis=-1)


def apply(pose, points) -> np.ndarray:
    """Points (..., 3) given in the frame ``pose`` (7,) or (..., 7), in its parent."""
    pose = np.asarray(pose, np.float64)
    return rotate(pose[..., :4], points) + pose[..., 4:]
