"""Mesh-free robot descriptions shipped with pyroki_ros.

The URDFs are derived from example-robot-data 6.0.0 by ``tools/make_mesh_free_urdfs.py``; see
``LICENSE-example-robot-data.txt`` in this directory for their licenses.
"""

from __future__ import annotations

import pathlib

AVAILABLE = ("panda", "ur5")

_DIR = pathlib.Path(__file__).resolve().parent


def urdf_path(name: str) -> pathlib.Path:
    """Path of the bundled URDF for robot ``name`` (one of :data:`AVAILABLE`)."""
    if name not in AVAILABLE:
        raise ValueError(f"unknown robot {name!r}; available: {', '.join(AVAILABLE)}")
    return _DIR / f"{name}.urdf"
