"""Which contacts count as collisions: rigid bodies, the self-collision pairs of a sphere set
and the contact rules (:class:`ContactRules`) that :func:`checked_pairs` applies for planning."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from pyroki_ros.model.robot import FIXED, Robot

if TYPE_CHECKING:
    from pyroki_ros.collision.geometry import RobotSpheres, World


def bodies(robot: Robot) -> tuple[int, ...]:
    """Body id of every link: links joined by fixed joints form one rigid body, whose id is
    the index of its top link (the one moved by a non-fixed joint, or the root)."""
    body: list[int] = []
    for i, parent in enumerate(robot.parent_index):  # breadth-first: parents come first
        fixed_to_parent = parent >= 0 and robot.joint_type[i] == FIXED
        body.append(body[parent] if fixed_to_parent else i)
    return tuple(body)


def self_collision_pairs(
    robot: Robot,
    link_indices: Sequence[int],
    ignore: Iterable[Sequence[str]] = (),
    eligible: Sequence[bool] | None = None,
) -> list[tuple[int, int]]:
    """Sphere pairs ``(i, j)``, ``i < j``, to check for self-collision.

    A pair is checked when both spheres are ``eligible`` (default all; the spheres whose role
    includes self-collision), they are on different rigid bodies (see :func:`bodies`), the
    bodies are not adjacent (neither body's top link is moved by a joint whose parent link is
    on the other body) and the link pair is not in ``ignore``.
    """
    body = bodies(robot)
    adjacent = set()
    for i, parent in enumerate(robot.parent_index):
        if parent >= 0 and body[i] == i:
            adjacent.add(frozenset((i, body[parent])))
    ignored = {frozenset((robot.link_index(a), robot.link_index(b))) for a, b in ignore}
    eligible = [True] * len(link_indices) if eligible is None else list(eligible)
    pairs = []
    for i, li in enumerate(link_indices):
        if not eligible[i]:
            continue
        for j in range(i + 1, len(link_indices)):
            if not eligible[j]:
                continue
            lj = link_indices[j]
            bi, bj = body[li], body[lj]
            if bi == bj or frozenset((bi, bj)) in adjacent or frozenset((li, lj)) in ignored:
                continue
            pairs.append((i, j))
    return pairs


def _check_ignore(robot: Robot, ignore: Iterable[Sequence[str]]) -> tuple[tuple[str, str], ...]:
    out = set()
    for entry in ignore:
        entry = tuple(entry)
        if len(entry) != 2 or not all(isinstance(n, str) for n in entry):
            raise ValueError(f"an ignore entry must be a pair of link names, got {entry!r}")
        for n in entry:
            robot.link_index(n)  # ValueError naming an unknown link
        out.add(tuple(sorted(entry)))
    return tuple(sorted(out))


@dataclasses.dataclass(frozen=True)
class ContactRules:
    """Contacts that are not collisions (applied by :func:`checked_pairs`).

    Attributes:
        allowed: (link, obstacle name) or (link, link) pairs, either order, that may touch
            (a gripper and the object it holds, a link and the table it rests on).
        check_fixed_links: also check links that cannot move against the world (by default
            they are not: a robot mounted on a stand always touches it).
    """

    allowed: tuple[tuple[str, str], ...] = ()
    check_fixed_links: bool = False

    def __post_init__(self):
        pairs = tuple(tuple(entry) for entry in self.allowed)
        for entry in pairs:
            if len(entry) != 2 or not all(isinstance(n, str) and n for n in entry):
                raise ValueError(f"an allowed contact must be a pair of names, got {entry!r}")
        object.__setattr__(self, "allowed", pairs)


# The default rules: nothing allowed but the contacts of links that cannot move.
DEFAULT_CONTACTS = ContactRules()


def checked_pairs(
    robot: Robot,
    spheres: RobotSpheres,
    world: World,
    rules: ContactRules = DEFAULT_CONTACTS,
    moving: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Which contacts count as collisions: the one rule for planning, goal IK and checks.

    Not checked: (0) spheres for self-collision only (role "self") against the world;
    (1) spheres on links that cannot move (no ``moving`` joint between them and
    the root: the root, links fixed to it, links whose joints are all held in this problem)
    against the world, unless ``rules.check_fixed_links`` (a robot standing on a table
    touches it, whatever the plan); pairs of two such spheres for self-collision (their
    distance cannot change); (2) the ``rules.allowed`` pairs.

    Args:
        moving: (n_joints,) bool, joints that may move; default all.

    Returns:
        world (S + X, O) bool (the spheres, then the boxes) over ``world``'s obstacles in
        its order, and self (P,) bool over ``spheres.self_pairs``: True where the pair is
        checked.

    Raises:
        ValueError: an allowed name that is neither a link nor an obstacle (or is both), or a
            pair of two obstacles.
    """
    links = np.asarray(spheres.link_indices, int)
    moving = np.ones(robot.n_joints, bool) if moving is None else np.asarray(moving, bool)
    q_index = np.asarray(robot.q_index)
    movable_link = np.array(
        [
            any(q_index[a] >= 0 and moving[q_index[a]] for a in robot.ancestors(i))
            for i in range(robot.n_links)
        ],
        bool,
    )
    # World rows: the spheres, then the boxes (obstacles only).
    world_links = np.concatenate([links, np.asarray(spheres.box_link_indices, int)])
    world_movable = movable_link[world_links] if len(world_links) else np.zeros(0, bool)
    movable = world_movable[: len(links)]
    world_ok = np.ones((len(world_links), world.n_obstacles), bool)
    world_ok[: len(links)][~spheres.world_mask] = False
    pairs = np.asarray(spheres.self_pairs, int).reshape(-1, 2)
    self_ok = np.ones(len(pairs), bool)
    if not rules.check_fixed_links:
        world_ok[~world_movable] = False
        self_ok &= movable[pairs[:, 0]] | movable[pairs[:, 1]]
    obstacle = {name: i for i, name in enumerate(world.names)}
    link_set = set(robot.link_names)
    for entry in rules.allowed:
        for name in entry:
            if name in link_set and name in obstacle:
                raise ValueError(f"allowed contact: '{name}' is both a link and an obstacle")
            if name not in link_set and name not in obstacle:
                raise ValueError(
                    f"allowed contact: '{name}' is neither a link of robot '{robot.name}' "
                    f"nor a named obstacle"
                )
        a, b = entry
        if a in obstacle and b in obstacle:
            raise ValueError(f"allowed contact ({a}, {b}) names two obstacles, no link")
        if a in obstacle:
            a, b = b, a
        on_a = links == robot.link_index(a)
        if b in obstacle:
            world_ok[world_links == robot.link_index(a), obstacle[b]] = False
        else:
            on_b = links == robot.link_index(b)
            self_ok &= ~(
                (on_a[pairs[:, 0]] & on_b[pairs[:, 1]]) | (on_b[pairs[:, 0]] & on_a[pairs[:, 1]])
            )
    return world_ok, self_ok
