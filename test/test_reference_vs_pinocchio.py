"""Cross-check the numpy reference FK against Pinocchio on every test robot.

Pinocchio (``pip install pin``) is an independent URDF parser (urdfdom) and FK implementation;
this validates test/reference_fk.py itself. Skipped when pinocchio is not installed.

Pinocchio specifics handled here:
* joint order is its own depth-first order -> q is filled by joint name;
* continuous joints are JointModelRUB* with nq = 2 (cos, sin);
* fixed joints become frames; link poses are the BODY frames' ``oMf``, in the root-link frame
  (no root joint is added, so the root link sits at the identity, like in the reference);
* ``mimic=False``: mimic joints are ordinary joints, we feed them the reference's mimic values;
  ``mimic=True``: pinocchio applies multiplier/offset itself (independent check of the
  reference's mimic semantics).
"""

from __future__ import annotations

import numpy as np
import pytest
import reference_fk as ref
from robot_cases import ROBOT_PATHS

pin = pytest.importorskip("pinocchio")

N_CONFIGS = 20
TOL = 1e-12


def _pin_q(model, values: dict[str, float], include_mimic: bool) -> np.ndarray:
    q = pin.neutral(model)
    for jid in range(1, model.njoints):
        joint = model.joints[jid]
        name = model.names[jid]
        if joint.nq == 0:  # mimic joint in mimic=True mode
            continue
        value = values[name]
        if joint.nq == 1:
            q[joint.idx_q] = value
        elif joint.nq == 2:  # continuous: (cos, sin)
            q[joint.idx_q], q[joint.idx_q + 1] = np.cos(value), np.sin(value)
        else:
            raise AssertionError(f"unexpected joint {name} {joint.shortname()} nq={joint.nq}")
    return q


@pytest.mark.parametrize("mimic", [False, True], ids=["mimic_as_joints", "pin_mimic"])
@pytest.mark.parametrize("robot", sorted(ROBOT_PATHS))
def test_reference_matches_pinocchio(robot, mimic):
    path = ROBOT_PATHS[robot]
    model_ref = ref.parse_urdf(path)
    try:
        model = pin.buildModelFromUrdf(str(path), mimic=mimic)
    except Exception as exc:  # pragma: no cover - depends on the pinocchio build
        if mimic:
            reason = " ".join(str(exc).split())[-160:]
            pytest.skip(f"pinocchio cannot build {robot} with mimic=True: ...{reason}")
        raise
    data = model.createData()
    names = ref.actuated_joint_names(model_ref)
    lower, upper = ref.actuated_joint_limits(model_ref)
    # Every movable reference joint is a pinocchio joint, and vice versa.
    movable = {j.name for j in model_ref.joints if j.type in ref.MOVABLE}
    assert set(model.names[1:]) == movable

    rng = np.random.default_rng(1234)
    worst = (0.0, 0.0)
    for _ in range(N_CONFIGS):
        q = rng.uniform(lower, upper)
        values = ref.joint_values(model_ref, q, names)
        poses = ref.reference_fk(model_ref, q, names)
        pin.framesForwardKinematics(model, data, _pin_q(model, values, mimic))
        for link in model_ref.links:
            fid = model.getFrameId(link, pin.FrameType.BODY)
            assert fid < len(model.frames), f"{robot}: no BODY frame for link {link}"
            t_pin = data.oMf[fid].homogeneous
            dp, dr = ref.pose_errors(poses[link], t_pin)
            worst = (max(worst[0], dp), max(worst[1], dr))
            assert dp < TOL and dr < TOL, f"{robot}/{link}: position {dp:.3g} m, angle {dr:.3g} rad"
    print(
        f"{robot} (mimic={mimic}): max position error {worst[0]:.2e} m, "
        f"max angle error {worst[1]:.2e} rad over {N_CONFIGS} configs x {len(model_ref.links)} links"
    )
