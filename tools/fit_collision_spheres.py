#!/usr/bin/env python3
"""Fit the fine collision spheres bundled with pyroki_ros
(``pyroki_ros/robots/<robot>_spheres_fine.yaml``; ``RobotSpheres.embedded(name, fine=True)``).

The default sets (``<robot>_spheres.yaml``, 4 spheres per mesh, fast) were made by this tool as
of commit 31383d5 (k-means on the surface samples): ``git show
31383d5:tools/fit_collision_spheres.py`` reproduces them; their ignore lists follow the rule
below.

The shipped URDFs are mesh-free (see tools/make_mesh_free_urdfs.py), so the spheres are fitted
to the collision meshes of the ORIGINAL descriptions in example-robot-data 6.0.0 (PyPI wheel)::

    pip download --no-deps example-robot-data==6.0.0 -d /tmp/erd
    unzip -q /tmp/erd/example_robot_data-6.0.0-0-py3-none-any.whl -d /tmp/erd/w
    .venv/bin/python tools/fit_collision_spheres.py /tmp/erd/w/cmeel.prefix/share

For every robot in ``ROBOTS``: the original URDF is read with
:meth:`pyroki_ros.collision.RobotSpheres.from_urdf`, whose ``package://`` look-up finds the
meshes under the share folder (collision ``<origin>`` and mesh ``scale`` are applied). Each
mesh gets at most ``SPHERES_PER_MESH`` spheres from
:func:`pyroki_ros.collision.fitting.fit_mesh_spheres`: centres inside the mesh (greedy cover,
then gradient descent) minimising how far any sphere reaches beyond the mesh, radii covering
vertices and surface samples exactly plus 1 mm; fewer spheres when the overshoot bound is
already <= ``TOLERANCE`` (a target, not a guarantee: :func:`~pyroki_ros.collision.fitting.mesh_overshoot`
measures a fit's bound; this tool does not print it). Primitive collision geometry is covered exactly by :func:`pyroki_ros.collision.cover_box`
and friends, except the boxes of ``BOX_LINKS`` (the Panda's fingers), which stay boxes; the
meshes of ``HULL_LINKS`` (the Panda's hand) are kept as their convex hulls instead. Link names
and frames of the original and the mesh-free URDF are the same (checked).

Links in ``COARSE_LINKS`` keep the default set's spheres (see there). The tight spheres are
checked against obstacles only. Self-collision uses the default set's
spheres (``self_spheres`` in the file, role "self"): self pairs grow with the square of the
sphere count (238 tight Panda spheres, every link fitted, would make 18,665 pairs; the
default set makes 752), and a plan's links keep centimetres from each other anyway. ``SPHERES_PER_MESH`` and
``TOLERANCE`` were chosen on the generated MotionBenchMaker set: the problems with at least
one of their own goal configurations clear for the obstacle spheres (the benchmark's "own
goals clear" column) went from 56 of 70 (12 spheres per mesh at 1 cm) to 64 (24 at 5 mm).

Default self-collision ignore list. Pairs of adjacent links (parent/child across a moving
joint, links joined by fixed joints count as one body) are never checked. Of the remaining
link pairs, one is ignored when its spheres overlap at the centre of the joint limits
(``Robot.center()``), or come closer than ``CLOSE`` (2 cm, the planner's default margin) in
more than ``IGNORE_FRACTION`` (50 %) of ``N_RANDOM`` uniformly random configurations inside
the limits (key 0): pairs that the sphere approximation makes touch at rest or sit within
the margin almost always would make every plan infeasible, or keep its collision costs
active on every knot (the Panda's wrist links link5 and link7 sit that close in most
configurations). ``EXTRA_IGNORE`` adds pairs by hand, each with its reason (the
Panda's fingers touch each other when closed, by design; its SRDF disables them too).
The output is deterministic.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import jax
import numpy as np
import trimesh

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pyroki_ros import collision
from pyroki_ros.collision import fitting
from pyroki_ros.model.robot import Robot

ERD_VERSION = "6.0.0"
SPHERES_PER_MESH = 24
TOLERANCE = 0.005  # m; also the primitives' tolerance
N_RANDOM = 2000
IGNORE_FRACTION = 0.5
CLOSE = 0.02  # m

EXTRA_IGNORE = {"panda": [("panda_leftfinger", "panda_rightfinger")], "ur5": []}

# Links whose obstacle spheres stay the default set's (4 per mesh; radii grown to contain
# every surface sample, as the fitted ones do: grown()): the base and upper arm, which stay
# out of the clutter the wrist and hand reach into. Fitting them finely made no goal
# reachable and cost time. Chosen on the tuning set of MotionBenchMaker problems
# (test/data/mbm/generated_seed1.yaml, not the evaluation set): every link fitted (238
# spheres) and the shipped file (142) both plan 63 of 70, median 229 / 175 ms, p95 1.21 /
# 0.99 s (docs/benchmarks/mbm_fine_238.md and mbm_fine_tuning.md; one run each, runs on a
# shared 2-core machine vary by 20-30 %). Leaving panda_link5 and panda_link6 coarse too
# lost 4 problems with a clear own goal (probe runs, in the 2026-11-27 note on issue 16).
MESH_PADDING = 1e-3  # m, as RobotSpheres.from_urdf's (the fitted spheres' radii get it too)
# Surface samples per mesh for grown(): ~1.5 mm apart on the Panda's links. A k-means sphere's
# boundary can cross the surface steeply, so 4,000 samples (~5 mm apart) left it up to 1 mm
# short between them.
SURFACE_SAMPLES = 50_000
COARSE_LINKS = {"panda": tuple(f"panda_link{i}" for i in range(5)), "ur5": ()}
# Links whose URDF <box> elements stay boxes (RobotSpheres.with_boxes, checked against
# obstacles by collision.boxes' conservative distance) instead of spheres around them, which
# reach past the faces: the Panda's fingers, whose real boxes pass 0.1-4.5 mm from the objects
# of MotionBenchMaker grasps (docs/benchmarks/mbm_exact_links.md: goals clear on the
# tuning and evaluation sets 125 -> 131 of 140 by the real finger boxes).
BOX_LINKS = {"panda": ("panda_leftfinger", "panda_rightfinger"), "ur5": ()}
# Links checked as the convex hull of their collision mesh (RobotSpheres.with_boxes' hulls:
# its vertices, by collision.boxes' conservative distance, exact when apart: GJK) instead of
# spheres. The Panda's hand passes 0.3-1.5 mm from the objects of some MotionBenchMaker
# grasps: its spheres, and then 4 boxes around it (the file at commit 7733759), reached
# 1.6-5.8 mm past the mesh there (table_pick/5 of the tuning set, table_pick/9 of the
# second set: every goal configuration in collision).
HULL_LINKS = {"panda": ("panda_hand",), "ur5": ()}
# Links that keep their spheres and whose mesh hull is written as ``exact_hulls``: the exact
# model a planner falls back to when the spheres put every goal configuration in collision
# (RobotSpheres.from_yaml(exact=True)). The Panda's forearm spheres overlap cage walls by
# 2.2-6.6 mm at goals where the real forearm is 1.3-2.9 mm clear; as its hull everywhere
# (commit ce36b89) its paths passed as near obstacles as the real forearm may, where the
# judge's (robometrics') forearm spheres reach up to 6.4 mm further: 2 false successes in
# 75 on the evaluation set (README, "The forearm"; docs/benchmarks/mbm_forearm_hull.md).
EXACT_HULL_LINKS = {"panda": ("panda_link5",), "ur5": ()}
# Extra self-collision clearance per link (RobotSpheres.create's self_buffer), m: the Panda's
# base and shoulder links kept 5 cm further from the rest of the arm, the convention of
# robometrics' and cuRobo's Franka files that MotionBenchMaker plans are judged by. On 100,000
# random configurations (docs/benchmarks/self_collision_agreement.md) it cuts the
# configurations these spheres call clear and that rule does not from 1.6 % to 0.3 %; a
# buffer on panda_link2 would also grow its pair with panda_link4, which that rule ignores.
SELF_BUFFER = {"panda": {"panda_link0": 0.05, "panda_link1": 0.05}, "ur5": {}}
# Extra self-collision clearance per link pair (RobotSpheres.create's self_pair_buffer), m:
# that rule's 5 cm on panda_link2 against the links of the wrist and hand, and its 2 cm on
# the fingers against the base and shoulder, pair by pair, where a link buffer would also grow
# pairs the rule ignores. On the same configurations the miss rate falls from 0.27 % to
# 0.02 % for 0.27 % more refused (self_collision_agreement.md); a path of the second
# evaluation set brought panda_link2 6.6 mm inside the rule's reach of the hand without it.
SELF_PAIR_BUFFER = {
    "panda": [
        *(("panda_link2", link, 0.05) for link in ("panda_link6", "panda_link7", "panda_hand")),
        *(("panda_link2", f, 0.05) for f in ("panda_leftfinger", "panda_rightfinger")),
        *((b, f, 0.02) for b in ("panda_link0", "panda_link1")
          for f in ("panda_leftfinger", "panda_rightfinger")),
    ],
    "ur5": [],
}  # fmt: skip

# name -> original URDF relative to the share folder
ROBOTS = {
    "panda": "example-robot-data/robots/panda_description/urdf/panda.urdf",
    "ur5": "example-robot-data/robots/ur_description/urdf/ur5_robot.urdf",
}


def link_pair_collision_fraction(
    robot: Robot, spheres: collision.RobotSpheres, q: np.ndarray, closer_than: float = 0.0
) -> dict[tuple[str, str], float]:
    """Fraction of configurations ``q`` (n, n_joints) in which each checked link pair comes
    closer than ``closer_than`` (m; 0: overlaps)."""
    centers = collision.sphere_centers(robot, spheres, q)
    d = np.asarray(collision.self_distances(centers, spheres))  # (n, P)
    pairs = np.asarray(spheres.self_pairs)
    out: dict[tuple[str, str], np.ndarray] = {}
    for p, (i, j) in enumerate(pairs):
        key = tuple(sorted((spheres.link_names[i], spheres.link_names[j])))
        hit = d[:, p] < closer_than
        out[key] = hit if key not in out else out[key] | hit
    return {key: float(hit.mean()) for key, hit in out.items()}


def default_ignore(robot: Robot, spheres: collision.RobotSpheres) -> list[tuple[str, str]]:
    at_center = link_pair_collision_fraction(robot, spheres, np.asarray(robot.center())[None])
    q = np.asarray(robot.random_configurations(jax.random.PRNGKey(0), (N_RANDOM,)))
    fraction = link_pair_collision_fraction(robot, spheres, q, CLOSE)
    found = {key for key in fraction if at_center[key] > 0 or fraction[key] > IGNORE_FRACTION}
    return sorted(found | {tuple(sorted(p)) for p in EXTRA_IGNORE.get(robot.name, [])})


def grown(rows: list[list[float]], points: np.ndarray) -> list[list[float]]:
    """Spheres ``rows`` ([x, y, z, r]) with radii grown where needed so that every point lies
    ``MESH_PADDING`` inside the sphere it is deepest in (the default set's k-means spheres
    miss some surface samples by up to ~1 mm), rounded up to the file's 0.1 mm."""
    spheres = np.asarray(rows, np.float64)
    radii = fitting.covering_radii(points, spheres[:, :3], spheres[:, 3], MESH_PADDING)
    spheres[:, 3] = np.where(radii > spheres[:, 3], np.ceil(radii * 1e4) / 1e4, spheres[:, 3])
    return spheres.tolist()


def write_yaml(path: pathlib.Path, name: str, source: str, spheres, ignore, exact_hulls) -> None:
    # JSON-style (flow) YAML: pyroki_ros reads it without PyYAML.
    kept = ", ".join(COARSE_LINKS[name])
    lines = [
        f"# Fine collision spheres for the embedded '{name}' (pyroki_ros/robots/{name}.urdf):",
        f"# RobotSpheres.embedded('{name}', fine=True) / node parameter collision_spheres: fine.",
        "# Generated by tools/fit_collision_spheres.py from the collision geometry of",
        f"# example-robot-data {ERD_VERSION}, {source}",
        "# (see LICENSE-example-robot-data.txt). Per link: [x, y, z, radius] in the link frame, m.",
        "# spheres: checked against obstacles; boxes ([qw, qx, qy, qz, x, y, z, hx, hy, hz] in",
        "# the link frame: URDF <box> elements kept as boxes, BOX_LINKS) and hulls ([x, y, z]",
        "# in the link frame: the vertices of a collision mesh's convex hull, HULL_LINKS) too,",
        "# by a conservative distance; exact_hulls: the mesh hulls of links that keep their",
        "# spheres, for the exact model (EXACT_HULL_LINKS); self_spheres: checked for",
        f"# self-collision (the default set, {name}_spheres.yaml); ignore: link pairs left out",
        "# of self-collision checking (rule in the tool's docstring); self_buffer: extra",
        "# self-collision clearance per link, m (SELF_BUFFER in the tool); self_pair_buffer:",
        "# extra clearance per link pair, m (SELF_PAIR_BUFFER).",
        *([f"# Obstacle spheres of {kept}: the default set's,"] if kept else []),
        *(["# radii grown to contain the mesh (COARSE_LINKS in the tool)."] if kept else []),
        "{",
    ]
    mappings = [
        ("spheres", spheres.to_config("world"), ".4f"),
        ("self_spheres", spheres.to_config("self"), ".4f"),
        ("boxes", spheres.boxes_config(), ".6g"),
        ("hulls", spheres.hulls_config(), ".6g"),
        ("exact_hulls", exact_hulls, ".6g"),
    ]
    for key, config, form in mappings:
        if not config and key in ("boxes", "hulls", "exact_hulls"):
            continue
        lines.append(f'  "{key}": {{')
        for n, (link, rows) in enumerate(config.items()):
            body = ", ".join("[" + ", ".join(f"{v:{form}}" for v in row) + "]" for row in rows)
            lines.append(f'    "{link}": [{body}]' + ("," if n + 1 < len(config) else ""))
        lines.append("  },")
    if spheres.self_buffer:
        body = ", ".join(f'"{link}": {value:g}' for link, value in spheres.self_buffer)
        lines.append(f'  "self_buffer": {{{body}}},')
    if spheres.self_pair_buffer:
        body = ", ".join(f'["{a}", "{b}", {m:g}]' for a, b, m in spheres.self_pair_buffer)
        lines.append(f'  "self_pair_buffer": [{body}],')
    lines.append('  "ignore": [')
    for n, (a, b) in enumerate(ignore):
        lines.append(f'    ["{a}", "{b}"]' + ("," if n + 1 < len(ignore) else ""))
    lines += ["  ]", "}", ""]
    text = "\n".join(lines)
    json.loads("\n".join(line for line in lines if not line.startswith("#")))  # well-formed
    path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("share", type=pathlib.Path, help="cmeel.prefix/share of the wheel")
    args = parser.parse_args()
    for name, rel in ROBOTS.items():
        source = args.share / rel
        if not source.is_file():
            print(f"{name}: {source} not found, skipped")
            continue
        embedded = REPO / "pyroki_ros" / "robots" / f"{name}.urdf"
        robot = Robot.from_urdf(embedded)
        original = Robot.from_urdf(source)
        if original.link_names != robot.link_names or original.parent_index != robot.parent_index:
            raise SystemExit(f"{name}: the original and the embedded URDF differ in links")
        spheres = collision.RobotSpheres.from_urdf(
            robot,
            source,
            package_dirs=[args.share],
            spheres_per_mesh=SPHERES_PER_MESH,
            tolerance=TOLERANCE,
            box_links=BOX_LINKS[name],
        )
        coarse = collision.RobotSpheres.embedded(name, robot)
        tight = {
            k: grown(
                coarse.to_config()[k],
                fitting.collision_mesh_points(source, k, [args.share], SURFACE_SAMPLES),
            )
            if k in COARSE_LINKS[name]
            else np.round(v, 4).tolist()
            for k, v in spheres.to_config().items()
        }
        # Self-collision exactly as with the default set: its spheres and its ignore list
        # (the rule above, re-run here, is printed where it now differs from that list).
        ignore = list(coarse.ignore)
        rule = default_ignore(robot, collision.RobotSpheres.from_config(robot, coarse.to_config()))
        if [tuple(p) for p in rule] != ignore:
            print(f"{name}: the rule now gives {rule}, the default set lists {ignore}")
        hulls, exact_hulls = {}, {}
        for link in HULL_LINKS[name] + EXACT_HULL_LINKS[name]:
            points = fitting.collision_mesh_points(source, link, [args.share], 0)
            hull = np.round(trimesh.convex.convex_hull(points).vertices, 6).tolist()
            if link in HULL_LINKS[name]:
                hulls[link] = hull
                tight.pop(link)
            else:
                exact_hulls[link] = hull
        final = collision.RobotSpheres.from_config(
            robot, tight, ignore, coarse.to_config(), SELF_BUFFER[name], SELF_PAIR_BUFFER[name]
        ).with_boxes(robot, spheres.boxes_config(), hulls)
        out = REPO / "pyroki_ros" / "robots" / f"{name}_spheres_fine.yaml"
        write_yaml(out, name, rel.removeprefix("example-robot-data/"), final, ignore, exact_hulls)
        print(
            f"{name}: {int(final.world_mask.sum())} spheres and {final.n_boxes} boxes for "
            "obstacles and "
            f"{int((~final.world_mask).sum())} for self-collision on "
            f"{len(set(final.link_names))} links, {len(ignore)} ignored link pairs, "
            f"{final.n_pairs} self pairs -> {out.relative_to(REPO)}"
        )


if __name__ == "__main__":
    main()
