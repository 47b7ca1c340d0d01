"""The node's persistent compilation cache over DDS: the programs a model's load compiles are
written, those first compiled while serving only with ``cache_serving_compiles`` (a write
holds Python's lock ~0.1 s while other requests wait: ros/model.py ``cache_writes``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("rclpy")

import reference_fk as ref
from builtin_interfaces.msg import Duration
from node_helpers import JOINTS, MODEL, STATE, panda_node, pose_stamped
from pyroki_ros.msg import IKObjective
from pyroki_ros.srv import SolveIK


def entries(cache: Path) -> set[str]:
    """The cache's programs (JAX may add access-time files beside them)."""
    return {p.name for p in cache.iterdir() if not p.name.endswith("atime")}


@pytest.mark.parametrize("serving", [False, True], ids=["default", "cache_serving_compiles"])
def test_programs_compiled_while_serving_are_cached_only_when_asked(tmp_path_factory, serving):
    cache = tmp_path_factory.mktemp("node_cache")
    params = (
        f"compilation_cache_dir:={cache}",
        f"cache_serving_compiles:={str(serving).lower()}",
    )
    with panda_node(tmp_path_factory, f"cache_{serving}", params=params) as node:
        loaded = entries(cache)
        assert loaded, "the model's load wrote no programs"
        # An objective combination no load compiles: its program compiles now, while serving.
        poses = ref.reference_fk(MODEL, STATE, JOINTS)
        objectives = [
            IKObjective(
                type=IKObjective.ORIENTATION,
                link="panda_link4",
                target=pose_stamped(poses["panda_link4"]),
            ),
            IKObjective(
                type=IKObjective.POSITION,
                link="panda_link6",
                target=pose_stamped(poses["panda_link6"]),
            ),
        ]
        request = SolveIK.Request(objectives=objectives, timeout=Duration(sec=60))
        response = node.call(SolveIK, "solve_ik", request, timeout=120.0)
        assert response.success, response.message
        new = entries(cache) - loaded
        if serving:
            assert new, "cache_serving_compiles: the new program was not written"
        else:
            assert not new, f"written while serving: {sorted(new)}"
