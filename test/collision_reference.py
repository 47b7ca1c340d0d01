"""Independent float64 reference for the collision distances (numpy only, no JAX, no pyroki_ros).

One configuration, one sphere, one obstacle at a time, written from the geometry:

* sphere centre in the root frame: ``T_link(q) @ [c; 1]`` with link poses from
  :func:`reference_fk.reference_fk`;
* sphere - sphere: ``|c - o| - r - r_o``;
* sphere - capsule: distance from ``c`` to the closest point of segment ``ab``, minus radii;
* sphere - box: signed distance of ``c`` to the box (outside: distance to the nearest surface
  point, found by clamping to the box; inside: minus the distance to the nearest face), minus r;
* sphere - half-space ``{x : n . x + d < 0}``: ``(n . c + d) / |n| - r``;
* sphere - finite cylinder (axis: the local z of its pose): in the plane of the axis and
  ``c`` (the solid is symmetric about its axis) the distance to the nearest point of the
  rectangle ``[0, radius] x [-h, h]``, found by clamping; inside: minus the depth to the
  nearer of the side and the caps; minus r;
* self-collision pairs: spheres on different rigid bodies (links merged across fixed joints)
  whose bodies are not joined by a joint, minus ignored link pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from reference_fk import parse_urdf, quat_wxyz_to_matrix, reference_fk, topological_links


def sphere_centers(urdf, links: Sequence[str], centers: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(S, 3) root-frame centres of spheres ``centers`` (S, 3) fixed to ``links``."""
    poses = reference_fk(urdf, np.asarray(q, np.float64))
    out = np.zeros((len(links), 3))
    for s, (link, c) in enumerate(zip(links, np.asarray(centers, np.float64))):
        out[s] = poses[link][:3, :3] @ c + poses[link][:3, 3]
    return out


def sphere_sphere(c, r, o, ro) -> float:
    return float(np.linalg.norm(np.subtract(c, o)) - r - ro)


def sphere_capsule(c, r, a, b, rc) -> float:
    c, a, b = (np.asarray(v, np.float64) for v in (c, a, b))
    ab = b - a
    denom = ab @ ab
    t = 0.0 if denom == 0 else min(1.0, max(0.0, (c - a) @ ab / denom))
    return float(np.linalg.norm(c - (a + t * ab)) - r - rc)


def sphere_box(c, r, pose_wxyz_xyz, half) -> float:
    pose = np.asarray(pose_wxyz_xyz, np.float64)
    quat = pose[:4] / np.linalg.norm(pose[:4])
    rot = quat_wxyz_to_matrix(quat)
    p = rot.T @ (np.asarray(c, np.float64) - pose[4:])
    half = np.asarray(half, np.float64)
    if np.all(np.abs(p) <= half):  # inside: depth to the nearest face
        return float(-np.min(half - np.abs(p)) - r)
    nearest = np.clip(p, -half, half)
    return float(np.linalg.norm(p - nearest) - r)


def sphere_halfspace(c, r, normal, offset) -> float:
    n = np.asarray(normal, np.float64)
    return float((n @ np.asarray(c, np.float64) + offset) / np.linalg.norm(n) - r)


def sphere_cylinder(c, r, pose_wxyz_xyz, radius, half_height) -> float:
    pose = np.asarray(pose_wxyz_xyz, np.float64)
    rot = quat_wxyz_to_matrix(pose[:4] / np.linalg.norm(pose[:4]))
    p = rot.T @ (np.asarray(c, np.float64) - pose[4:])
    rho, z = float(np.hypot(p[0], p[1])), float(p[2])
    if rho <= radius and abs(z) <= half_height:  # inside: depth to the side or a cap
        return float(-min(radius - rho, half_height - abs(z)) - r)
    nearest_rho, nearest_z = min(rho, radius), min(max(z, -half_height), half_height)
    return float(np.hypot(rho - nearest_rho, z - nearest_z) - r)


def world_distances(centers, radii, obstacles: dict) -> np.ndarray:
    """(S, N) with obstacles ordered spheres, capsules, boxes, half-spaces, cylinders;
    ``obstacles`` holds the same keys as ``World.create``'s arguments (missing kinds are
    empty)."""
    get = lambda key, tail: np.asarray(obstacles.get(key, np.zeros((0, *tail))), np.float64)
    rows = []
    for c, r in zip(np.asarray(centers, np.float64), np.asarray(radii, np.float64)):
        row = [
            sphere_sphere(c, r, o, ro)
            for o, ro in zip(get("sphere_centers", (3,)), get("sphere_radii", ()))
        ]
        row += [
            sphere_capsule(c, r, a, b, rc)
            for a, b, rc in zip(
                get("capsule_a", (3,)), get("capsule_b", (3,)), get("capsule_radii", ())
            )
        ]
        row += [
            sphere_box(c, r, p, h)
            for p, h in zip(get("box_poses", (7,)), get("box_half_extents", (3,)))
        ]
        row += [
            sphere_halfspace(c, r, n, d)
            for n, d in zip(get("halfspace_normals", (3,)), get("halfspace_offsets", ()))
        ]
        row += [
            sphere_cylinder(c, r, p, rc, h)
            for p, rc, h in zip(
                get("cylinder_poses", (7,)),
                get("cylinder_radii", ()),
                get("cylinder_half_heights", ()),
            )
        ]
        rows.append(row)
    return np.asarray(rows, np.float64).reshape(len(rows), -1)


def self_pairs(
    urdf, links: Sequence[str], ignore: Iterable[Sequence[str]] = ()
) -> set[tuple[int, int]]:
    """Sphere index pairs to check, from the URDF's joint structure."""
    model = parse_urdf(urdf)
    by_child = model.joint_by_child
    body = {}
    for link in topological_links(model):
        j = by_child.get(link)
        body[link] = body[j.parent] if j is not None and j.type == "fixed" else link
    joined = {frozenset((body[j.parent], body[j.child])) for j in model.joints if j.type != "fixed"}
    skip = {frozenset(p) for p in ignore}
    out = set()
    for i in range(len(links)):
        for k in range(i + 1, len(links)):
            a, b = links[i], links[k]
            if body[a] == body[b] or frozenset((body[a], body[b])) in joined:
                continue
            if frozenset((a, b)) in skip:
                continue
            out.add((i, k))
    return out


def self_distances(centers, radii, pairs) -> np.ndarray:
    centers, radii = np.asarray(centers, np.float64), np.asarray(radii, np.float64)
    return np.asarray(
        [sphere_sphere(centers[i], radii[i], centers[j], radii[j]) for i, j in pairs], np.float64
    )
