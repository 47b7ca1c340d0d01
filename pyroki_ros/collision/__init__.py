"""Collision model: the robot as spheres fixed to its links, the world as primitive obstacles.

Everything is expressed in the robot's root frame (REP-103: x forward, y left, z up, metres).
The robot is approximated by a union of spheres per link (from URDF collision geometry, from a
config mapping, or from a bundled set fitted offline); obstacles are spheres, capsules,
oriented boxes, half-spaces and finite cylinders (in that order, ``KINDS``). All distances
are *signed*: positive is clearance between the two surfaces, negative is penetration depth
(exact for sphere-sphere, sphere-capsule, sphere-half-space; for boxes and cylinders the
exact signed distance of the sphere centre minus its radius).

The distance functions are pure JAX, batch over leading dimensions and are safe under
``jit``, ``vmap``, ``grad`` and ``jacfwd``: norms use a double ``where`` so a zero distance
gives a zero gradient instead of NaN.

Compile once: :meth:`World.padded` rounds the obstacle count of every kind up to a bucket
with inert dummies (far away, zero size), so a jitted planner sees the same shapes for
different scenes.

Links may also carry exact boxes (``RobotSpheres.with_boxes``, e.g. the Panda's finger
boxes), checked against obstacles by a conservative separating-axis distance (``boxes``).

Package layout: ``geometry`` (RobotSpheres, World, padding), ``fitting`` (spheres from URDF
geometry), ``rules`` (which contacts are checked), ``distance`` (distances, gradients),
``boxes`` (robot boxes against obstacles), ``jacobians`` (collision rows and their Jacobians
for the trajectory optimiser).
"""

from pyroki_ros.collision.boxes import (
    box_distances,
    box_frames_at,
    box_obstacle_terms,
    robot_box_distances,
)
from pyroki_ros.collision.distance import (
    collision_distances,
    min_distance,
    nearest_obstacle_t,
    obstacle_clearance_t,
    self_distances,
    sphere_centers,
    world_distances,
)
from pyroki_ros.collision.geometry import (
    COARSE_WORLD_BUCKETS,
    FAR,
    KINDS,
    WORLD_BUCKETS,
    RobotSpheres,
    World,
    embedded_path,
    exact_hull_links,
)
from pyroki_ros.collision.jacobians import CollisionTerms, self_pair_groups
from pyroki_ros.collision.rules import (
    DEFAULT_CONTACTS,
    ContactRules,
    checked_pairs,
)

__all__ = [
    "COARSE_WORLD_BUCKETS",
    "DEFAULT_CONTACTS",
    "FAR",
    "KINDS",
    "WORLD_BUCKETS",
    "CollisionTerms",
    "ContactRules",
    "RobotSpheres",
    "World",
    "box_distances",
    "box_frames_at",
    "box_obstacle_terms",
    "checked_pairs",
    "collision_distances",
    "embedded_path",
    "exact_hull_links",
    "min_distance",
    "nearest_obstacle_t",
    "obstacle_clearance_t",
    "robot_box_distances",
    "self_distances",
    "self_pair_groups",
    "sphere_centers",
    "world_distances",
]
