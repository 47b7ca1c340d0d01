"""The robots used by the FK accuracy tests (mesh-free URDFs, see test/data/robots/README.md)."""

from __future__ import annotations

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]
DATA = REPO / "test" / "data" / "robots"
SHIPPED = REPO / "pyroki_ros" / "robots"

ROBOT_PATHS: dict[str, pathlib.Path] = {
    "panda": SHIPPED / "panda.urdf",
    "ur5": SHIPPED / "ur5.urdf",
    "kinova": DATA / "kinova.urdf",
    "baxter": DATA / "baxter.urdf",
    "tiago": DATA / "tiago.urdf",
    "tiago_pro": DATA / "tiago_pro.urdf",
    "talos": DATA / "talos.urdf",
    "talos_reduced": DATA / "talos_reduced.urdf",
    "pr2": DATA / "pr2.urdf",
    "xarm7": DATA / "xarm7.urdf",
    "so100": DATA / "so100.urdf",
    # hand-written: oblique axes, mimic offsets, mimic of a mimic, root not first, gimbal lock
    "synthetic": DATA / "synthetic.urdf",
}

# Robots for the Jacobian checks: (robot, link) pairs covering revolute chains, mimic joints
# (baxter fingers: prismatic mimic with multiplier -1; pr2/talos: revolute mimic chains) and
# prismatic joints (panda fingers, tiago/pr2 torso lift).
JACOBIAN_CASES: tuple[tuple[str, str], ...] = (
    ("panda", "panda_hand"),
    ("panda", "panda_rightfinger"),
    ("baxter", "r_gripper_r_finger"),
    ("pr2", "r_gripper_r_finger_tip_link"),
    ("talos", "gripper_left_fingertip_3_link"),
    ("tiago", "arm_7_link"),
    ("tiago_pro", "gripper_left_fingertip_left_link"),
    ("kinova", "j2s6s200_link_6"),
    ("synthetic", "l_m2"),
    ("synthetic", "tip"),
)
