#!/usr/bin/env python3
"""Generate the mesh-free robot URDFs shipped with pyroki_ros and used by its tests.

The inputs come from the PyPI wheel ``example-robot-data==6.0.0``::

    pip download --no-deps example-robot-data==6.0.0 -d /tmp/erd
    unzip -q /tmp/erd/example_robot_data-6.0.0-0-py3-none-any.whl -d /tmp/erd/wheel
    python3 tools/make_mesh_free_urdfs.py \\
        /tmp/erd/wheel/cmeel.prefix/share/example-robot-data \\
        --dist-info /tmp/erd/wheel/example_robot_data-6.0.0.dist-info

For every robot listed in ``ROBOTS`` the URDF is read with ``xml.etree``, then:

* every ``<visual>`` is removed (they only reference meshes/materials);
* ``<collision>`` elements whose geometry is a primitive (box, cylinder, sphere, capsule) are
  kept, mesh collisions are dropped. The collision-avoidance work fits spheres to the links later
  anyway, so the only collision information worth carrying is what is already analytic;
* top-level ``<gazebo>``, ``<transmission>``, ``<ros2_control>`` and ``<material>`` elements are
  removed (materials are only referenced by visuals);
* non-standard link children (Gazebo leftovers such as ``<kinematic>``, ``<gravity>``,
  ``<surface>``) are removed;
* everything kinematic is kept verbatim: links, joints and all joint children (origin, parent,
  child, axis, limit, mimic, dynamics, safety_controller, calibration), plus ``<inertial>``.
  Attribute strings are copied unchanged, so limits keep their exact text.

A header comment in every output names the source file and the license of that description.
The script also writes the license texts and ``test/data/robots/README.md`` (joint-type table).
The output is deterministic: running it twice gives byte-identical files.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys
import xml.etree.ElementTree as ET

ERD_VERSION = "6.0.0"
PRIMITIVE_GEOMETRIES = {"box", "cylinder", "sphere", "capsule"}
DROPPED_TOP_LEVEL = {"gazebo", "transmission", "ros2_control", "material"}
KEPT_LINK_CHILDREN = {"inertial", "collision"}  # <visual> always goes

# The license of each robot description, as stated in the description's README.md inside
# example-robot-data (package.xml of example-robot-data agrees except for Talos, see README).
UPSTREAM = {
    "panda_description": ("franka_ros/franka_description (Franka Emika)", "Apache-2.0"),
    "ur_description": ("ros-industrial/universal_robot ur_description", "BSD"),
    "kinova_description": ("Kinovarobotics/kinova-ros kinova_description", "BSD"),
    "baxter_description": ("RethinkRobotics/baxter_common baxter_description", "BSD (3-clause)"),
    "tiago_description": ("pal-robotics/tiago_robot tiago_description", "Apache-2.0"),
    "tiago_pro_description": ("PAL Robotics TIAGo Pro", "Apache-2.0"),
    "talos_data": ("pal-robotics/talos_robot", "Apache-2.0 (README) / BSD-3-Clause (package.xml)"),
    "pr2_description": ("pr2/pr2_common pr2_description", "BSD"),
    "xarm_description": ("xArm-Developer/xarm_ros2 xarm_description", "BSD-3-Clause"),
    "so_arm_description": ("TheRobotStudio/SO-ARM100", "Apache-2.0"),
}


# name -> (source path relative to the share dir, output path relative to the repo root,
#          keep <inertial>, what the robot is in the test set for)
ROBOTS: dict[str, tuple[str, str, bool, str]] = {
    "panda": (
        "robots/panda_description/urdf/panda.urdf",
        "pyroki_ros/robots/panda.urdf",
        True,
        "7-DoF arm, prismatic fingers, mimic (multiplier default 1), safety_controller",
    ),
    "ur5": (
        # ur5_robot.urdf has the hardware limits (+-2pi, elbow +-pi);
        # ur5_joint_limited_robot.urdf differs only by +-pi on every joint.
        "robots/ur_description/urdf/ur5_robot.urdf",
        "pyroki_ros/robots/ur5.urdf",
        True,
        "6-DoF arm, root link 'world'",
    ),
    "kinova": (
        "robots/kinova_description/robots/kinova.urdf",
        "test/data/robots/kinova.urdf",
        True,
        "continuous joints carrying +-2pi <limit> tags",
    ),
    "baxter": (
        "robots/baxter_description/urdf/baxter.urdf",
        "test/data/robots/baxter.urdf",
        True,
        "two arms, prismatic gripper fingers, mimic with multiplier -1",
    ),
    "tiago": (
        "robots/tiago_description/robots/tiago.urdf",
        "test/data/robots/tiago.urdf",
        True,
        "prismatic torso, continuous wheels, 5-finger hand (48 DoF total)",
    ),
    "tiago_pro": (
        "robots/tiago_pro_description/robots/tiago_pro.urdf",
        "test/data/robots/tiago_pro.urdf",
        True,
        "prismatic torso, 4 continuous wheels, mimic joint listed BEFORE its source joint",
    ),
    "talos": (
        "robots/talos_data/robots/talos_full_v2.urdf",
        "test/data/robots/talos.urdf",
        True,
        "humanoid, 60 links, revolute gripper mimic chains",
    ),
    "talos_reduced": (
        "robots/talos_data/robots/talos_reduced.urdf",
        "test/data/robots/talos_reduced.urdf",
        True,
        "edge case: FIXED joints that still carry <axis>/<limit>/<mimic>",
    ),
    "pr2": (
        "robots/pr2_description/urdf/pr2.urdf",
        "test/data/robots/pr2.urdf",
        True,
        (
            "prismatic torso, continuous rolls, 10 mimic joints, joints without <origin>, "
            "document order != topological order"
        ),
    ),
    "xarm7": (
        "robots/xarm_description/urdf/xarm7.urdf",
        "test/data/robots/xarm7.urdf",
        True,
        "plain 7-DoF arm, root link 'world'",
    ),
    "so100": (
        "robots/so_arm_description/urdf/so100.urdf",
        "test/data/robots/so100.urdf",
        True,
        "5-DoF + gripper hobby arm, no fixed joints",
    ),
}

SHIPPED = ("panda", "ur5")

# Observations about the source URDFs, written into the README.
NOTES = (
    (
        "Every robot has exactly one root link. `ur5` and `xarm7` are rooted at a `world` link "
        "(fixed `world_joint`), `tiago`, `tiago_pro` and `pr2` at `base_footprint`."
    ),
    (
        "`ur5`: both `ur5_robot.urdf` and `ur5_joint_limited_robot.urdf` have `<limit>` on every "
        "joint; they differ only in range (+-2pi except the elbow's +-pi, vs +-pi everywhere). "
        "`ur5_robot.urdf` (the hardware ranges) is used. Its revolute joints span 4pi, as do "
        "`xarm7` joints 1/3/5/7."
    ),
    (
        "`panda`: `<safety_controller>` soft limits equal the `<limit>` values on joints 1-7 and are "
        "kept verbatim; the fingers have none. `panda_finger_joint2` mimics `panda_finger_joint1` "
        "(multiplier 1, axis 0 -1 0). `panda_hand_tcp` is a fixed frame below `panda_hand`."
    ),
    (
        "`kinova`: the three continuous joints carry `<limit lower=-2pi upper=2pi>`; per the URDF "
        "spec those bounds are ignored for continuous joints (reported as [-pi, pi])."
    ),
    (
        "`baxter`: the prismatic right finger of each gripper mimics the left one with "
        "multiplier -1; its own limits are [-0.020833, 0]."
    ),
    (
        "`tiago`: no mimic joints at all; the hand's `*_virtual_*` joints are ordinary actuated "
        "revolute joints (48 DoF in total), and `hand_thumb/index/mrl_joint` span more than 2pi "
        "(upper limit up to 9.25 rad)."
    ),
    "`tiago_pro`: gripper mimic joints are listed before their source joint in the document.",
    (
        "`talos` (`talos_full_v2.urdf`): 12 revolute gripper mimic joints (multipliers +-1), "
        "sources in sibling branches. Pinocchio 4.1 refuses it with `mimic=True` ('The parent "
        "joint of the mimic joint is not in the kinematic tree'); it loads fine with mimic=False."
    ),
    (
        '`talos_reduced`: the same 12 gripper joints are `type="fixed"` but still carry '
        "`<axis>`, `<limit>` and `<mimic>`; they must be treated as fixed."
    ),
    (
        "`pr2`: `r_forearm_roll_joint` is listed before its parent `r_elbow_flex_joint` (document "
        "order != tree order); fixed `r/l_gripper_joint` have no `<origin>` but a `<limit>` and a "
        "`<safety_controller>` whose soft range exceeds the hard one; 14 links have no inertial."
    ),
    (
        "Licenses: the wheel's metadata says BSD-3-Clause while its LICENSE file is BSD-2-Clause; "
        "per-description licenses differ (Apache-2.0 for panda, tiago, tiago_pro, so_arm; BSD for "
        "ur, kinova, baxter, pr2; BSD-3-Clause for xarm). For Talos the description README says "
        "Apache-2.0 while example-robot-data's package.xml lists it under BSD-3-Clause."
    ),
)


def _description_dir(source: str) -> str:
    return source.split("/")[1]


def _header(name: str, source: str) -> str:
    upstream, lic = UPSTREAM[_description_dir(source)]
    lines = [
        f"Mesh-free URDF '{name}' generated by tools/make_mesh_free_urdfs.py.",
        f"Derived from example-robot-data {ERD_VERSION} (PyPI wheel",
        f"example_robot_data-{ERD_VERSION}-0-py3-none-any.whl, https://github.com/Gepetto/example-robot-data),",
        f"file share/example-robot-data/{source}.",
        f"Upstream robot description: {upstream}; license of the description: {lic}.",
        "example-robot-data itself: BSD-2-Clause (LICENSE file) / BSD-3-Clause (wheel metadata).",
        "See LICENSE-example-robot-data.txt next to this file.",
        "Modified: all visual elements and all mesh references were removed (mesh collision",
        "geometry dropped, primitive collision geometry kept), as were gazebo, transmission,",
        "ros2_control and material elements. Links, joints, origins, axes, limits, mimic,",
        "dynamics, safety_controller, calibration and inertial data are unchanged.",
    ]
    return "<!--\n" + "\n".join("  " + s for s in lines) + "\n-->\n"


def _is_primitive_collision(collision: ET.Element) -> bool:
    geometry = collision.find("geometry")
    if geometry is None:
        return False
    shapes = [child.tag for child in geometry]
    return len(shapes) == 1 and shapes[0] in PRIMITIVE_GEOMETRIES


def strip_urdf(root: ET.Element, keep_inertial: bool) -> collections.Counter:
    """Strip ``root`` in place; returns a counter of what was removed."""
    removed: collections.Counter = collections.Counter()
    for child in list(root):
        if child.tag in ("link", "joint"):
            continue
        # Comments are not kept by the default parser; anything else non-kinematic goes too.
        removed[f"<{child.tag}>"] += 1
        root.remove(child)
    for link in root.findall("link"):
        for child in list(link):
            drop = child.tag not in KEPT_LINK_CHILDREN
            drop |= child.tag == "collision" and not _is_primitive_collision(child)
            drop |= child.tag == "inertial" and not keep_inertial
            if drop:
                removed[f"link/<{child.tag}>"] += 1
                link.remove(child)
    for elem in root.iter():
        if elem.tag == "mesh" or "filename" in elem.attrib:
            raise AssertionError(f"mesh reference survived stripping: {elem.tag} {elem.attrib}")
    return removed


def joint_type_counts(root: ET.Element) -> dict[str, int]:
    """Counts by URDF ``type``; ``mimic`` counts the movable joints with a <mimic> tag (a subset of
    revolute/continuous/prismatic), ``fixed_with_mimic_tag`` fixed joints carrying one."""
    counts: collections.Counter = collections.Counter()
    for joint in root.findall("joint"):
        jtype = joint.get("type")
        counts[jtype] += 1
        if joint.find("mimic") is not None:
            counts["mimic" if jtype != "fixed" else "fixed_with_mimic_tag"] += 1
    return dict(counts)


def root_links(root: ET.Element) -> list[str]:
    children = {j.find("child").get("link") for j in root.findall("joint")}
    return [l.get("name") for l in root.findall("link") if l.get("name") not in children]


def write_urdf(root: ET.Element, header: str, out: pathlib.Path) -> None:
    for elem in root.iter():  # drop the original whitespace, then re-indent uniformly
        elem.text = None if (elem.text or "").strip() == "" else elem.text
        elem.tail = None
    ET.indent(root, space="  ")
    body = ET.tostring(root, encoding="unicode", short_empty_elements=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text('<?xml version="1.0"?>\n' + header + body + "\n", encoding="utf-8")


def _license_text(share: pathlib.Path, dist_info: pathlib.Path | None) -> str:
    candidates = []
    if dist_info is not None:
        candidates += [dist_info / "licenses" / "LICENSE", dist_info / "LICENSE"]
    candidates += [share / "LICENSE", share.parent.parent / "LICENSE"]
    pkg_license = next((p for p in candidates if p.is_file()), None)
    if pkg_license is None:
        raise SystemExit("cannot find the example-robot-data LICENSE; pass --dist-info")
    apache = share / "robots/panda_description/LICENSE"
    baxter = share / "robots/baxter_description/LICENSE"
    rule = "=" * 78 + "\n"
    parts = [
        "Robot descriptions in this directory are derived from example-robot-data "
        f"{ERD_VERSION}\n(https://github.com/Gepetto/example-robot-data, PyPI "
        "'example-robot-data'), with\nall mesh references and visual elements removed by "
        "tools/make_mesh_free_urdfs.py.\n\n"
        "example-robot-data's package.xml and the per-robot README.md files give these\n"
        "licenses for the descriptions used by pyroki_ros:\n\n"
        + "".join(
            f"  {d:24s} {lic:22s} upstream: {up}\n" for d, (up, lic) in sorted(UPSTREAM.items())
        )
        + "\nThe wheel metadata says 'License-Expression: BSD-3-Clause'; the LICENSE file\n"
        "shipped in the wheel (reproduced first below) is BSD-2-Clause.\n"
        "For the Apache-2.0 descriptions the Apache License 2.0 text follows; the\n"
        "modifications are stated in the header comment of every derived URDF.\n"
        "For the Baxter description the Rethink Robotics BSD license text follows.\n",
        rule
        + f"example-robot-data LICENSE ({pkg_license.name} from the {ERD_VERSION} wheel)\n"
        + rule
        + pkg_license.read_text(encoding="utf-8"),
    ]
    if apache.is_file():
        parts.append(
            rule
            + "robots/panda_description/LICENSE (Apache License 2.0)\n"
            + rule
            + apache.read_text(encoding="utf-8")
        )
    if baxter.is_file():
        parts.append(
            rule + "robots/baxter_description/LICENSE\n" + rule + baxter.read_text(encoding="utf-8")
        )
    return "\n".join(p if p.endswith("\n") else p + "\n" for p in parts)


def _readme(rows: list[dict]) -> str:
    kinds = ["revolute", "continuous", "prismatic", "fixed", "mimic"]
    out = [
        "# Mesh-free test robots",
        "",
        (
            "Generated by `tools/make_mesh_free_urdfs.py` from example-robot-data "
            f"{ERD_VERSION} (PyPI wheel)."
        ),
        "Visual elements, mesh collision geometry and gazebo/transmission/ros2_control/material",
        "elements are removed; kinematics (and inertial data) are unchanged.",
        "`panda` and `ur5` live in `pyroki_ros/robots/` (shipped with the package) and are",
        "reused by the tests; the others are test data only.",
        "",
        "Joint counts are by URDF `type`. `mimic` counts the movable joints that carry a",
        "`<mimic>` tag (a subset of revolute/continuous/prismatic; they are not actuated);",
        "`fixed w/ mimic tag` counts fixed joints carrying a `<mimic>` tag (no effect).",
        "`act` = actuated DoF = movable joints minus mimic joints, in URDF document order.",
        "",
        "| robot | file | source (share/example-robot-data/...) | links | "
        + " | ".join(kinds)
        + " | act | root | license | fixed w/ mimic tag | notes |",
        "|---" * (len(kinds) + 9) + "|",
    ]
    for r in rows:
        c = r["counts"]
        act = sum(c.get(k, 0) for k in ("revolute", "continuous", "prismatic")) - c.get("mimic", 0)
        out.append(
            f"| {r['name']} | `{r['out']}` | `{r['source']}` | {r['links']} | "
            + " | ".join(str(c.get(k, 0)) for k in kinds)
            + f" | {act} | `{r['root']}` | {r['license']} | {c.get('fixed_with_mimic_tag', 0)} "
            f"| {r['notes']} |"
        )
    out += [
        "",
        "License texts: `LICENSE-example-robot-data.txt` (a copy of",
        "`pyroki_ros/robots/LICENSE-example-robot-data.txt`).",
        "Not used on purpose: `alex_description` (CC-BY-NC-ND-4.0), `icub_description`",
        "(CC-BY-SA-4.0), `z1_description` (MPL-2.0); `ur_description/urdf/ur3.urdf` is an",
        "empty file in 6.0.0.",
        "",
        "`synthetic.urdf` is hand-written (not generated, not from example-robot-data): oblique",
        "and unnormalized axes, mimic offsets, a mimic of a mimic across joint types, a mimic",
        "listed before its source, the root link not first in the document, rpy at gimbal lock.",
        "None of the real robots above has any of these (all their axes are +-x/y/z unit",
        "vectors and all their mimic offsets are 0).",
        "",
        "## Things to know about these URDFs",
        "",
        *(f"* {note}" for note in NOTES),
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "share",
        type=pathlib.Path,
        help="path to .../share/example-robot-data from the example-robot-data wheel",
    )
    parser.add_argument(
        "--dist-info",
        type=pathlib.Path,
        default=None,
        help="the wheel's example_robot_data-*.dist-info (for its LICENSE file); "
        "found automatically when it sits next to cmeel.prefix",
    )
    parser.add_argument(
        "--repo",
        type=pathlib.Path,
        default=pathlib.Path(__file__).resolve().parent.parent,
        help="repository root to write into (default: this checkout)",
    )
    args = parser.parse_args(argv)
    share: pathlib.Path = args.share.resolve()
    if not (share / "robots").is_dir():
        raise SystemExit(f"{share} does not look like share/example-robot-data (no robots/)")
    dist_info = args.dist_info
    if dist_info is None:
        wheel_root = share.parent.parent.parent  # .../cmeel.prefix/share/example-robot-data
        found = sorted(wheel_root.glob("example_robot_data-*.dist-info"))
        dist_info = found[0] if found else None

    rows = []
    for name, (source, out, keep_inertial, notes) in ROBOTS.items():
        src = share / source
        root = ET.parse(src).getroot()
        removed = strip_urdf(root, keep_inertial)
        counts = joint_type_counts(root)
        roots = root_links(root)
        if len(roots) != 1:
            raise SystemExit(f"{name}: expected one root link, found {roots}")
        write_urdf(root, _header(name, source), args.repo / out)
        size = (args.repo / out).stat().st_size
        print(
            f"{name:14s} -> {out:40s} {size / 1024:6.1f} KiB  joints {counts}  "
            f"removed {dict(sorted(removed.items()))}",
            file=sys.stderr,
        )
        rows.append(
            {
                "name": name,
                "out": out,
                "source": source,
                "links": len(root.findall("link")),
                "counts": counts,
                "root": roots[0],
                "notes": notes,
                "license": UPSTREAM[_description_dir(source)][1],
            }
        )

    license_text = _license_text(share, dist_info)
    for d in ("pyroki_ros/robots", "test/data/robots"):
        (args.repo / d).mkdir(parents=True, exist_ok=True)
        (args.repo / d / "LICENSE-example-robot-data.txt").write_text(
            license_text, encoding="utf-8"
        )
    (args.repo / "test/data/robots/README.md").write_text(_readme(rows), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
