"""Independent checks of planned paths (numpy float64, reference_fk and collision_reference;
no pyroki_ros kinematics): clearances at a dense interpolation of the knots, limits, goals,
and timed-trajectory limits."""

from __future__ import annotations

import numpy as np
from collision_reference import self_pairs, sphere_centers, world_distances
from reference_fk import actuated_joint_limits, actuated_joint_names, parse_urdf, reference_fk

from pyroki_ros.robots import urdf_path

PANDA_URDF = urdf_path("panda").read_text()
PANDA = parse_urdf(PANDA_URDF)
JOINTS = actuated_joint_names(PANDA)
LOWER, UPPER = (np.asarray(x) for x in actuated_joint_limits(PANDA))


class SphereModel:
    """The sphere data (link, centre, radius, role) of a RobotSpheres, with the pairs
    recomputed from the URDF: spheres of role "self" are not checked against obstacles, those
    of role "world" are in no self pair."""

    def __init__(self, spheres, urdf: str = PANDA_URDF):
        self.links = list(spheres.link_names)
        self.centers = np.asarray(spheres.centers, np.float64)
        self.radii = np.asarray(spheres.radii, np.float64)
        roles = list(spheres.roles) or ["both"] * len(self.links)
        self.world = np.array([role != "self" for role in roles], bool)
        mine = [i for i, role in enumerate(roles) if role != "world"]
        pairs = self_pairs(urdf, [self.links[i] for i in mine], spheres.ignore)
        self.pairs = np.asarray(sorted((mine[a], mine[b]) for a, b in pairs), int).reshape(-1, 2)
        self.urdf = parse_urdf(urdf)

    def clearances(self, q: np.ndarray, obstacles: dict) -> tuple[float, float]:
        """(smallest obstacle clearance, smallest self clearance) at one configuration."""
        c = sphere_centers(self.urdf, self.links, self.centers, q)
        world = world_distances(c[self.world], self.radii[self.world], obstacles)
        world_min = float(world.min()) if world.size else np.inf
        i, j = self.pairs[:, 0], self.pairs[:, 1]
        gaps = np.linalg.norm(c[i] - c[j], axis=1) - self.radii[i] - self.radii[j]
        return world_min, float(gaps.min()) if len(gaps) else np.inf


def dense(path: np.ndarray, samples: int) -> np.ndarray:
    """Knots plus ``samples`` evenly spaced points inside every segment."""
    f = np.arange(samples + 1) / (samples + 1)
    inner = path[:-1, None] + f[None, :, None] * (path[1:] - path[:-1])[:, None]
    return np.concatenate([inner.reshape(-1, path.shape[1]), path[-1:]])


def path_clearance(model: SphereModel, path, obstacles: dict, samples: int = 10):
    values = np.array([model.clearances(q, obstacles) for q in dense(np.asarray(path), samples)])
    return float(values[:, 0].min()), float(values[:, 1].min())


def link_pose(q, link: str) -> np.ndarray:
    return reference_fk(PANDA, np.asarray(q, np.float64), JOINTS)[link]


def within_limits(path, slack: float = 1e-6) -> bool:
    path = np.asarray(path)
    return bool(np.all(path >= LOWER - slack) and np.all(path <= UPPER + slack))
