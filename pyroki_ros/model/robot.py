"""The robot model: a URDF kinematic tree as a JAX pytree.

Every link has at most one parent joint, so the tree is stored per link: ``links[i]`` is
moved by the joint whose child it is (the root link's "joint" is the identity). Static
structure (names, parent indices, joint types) and the position limits (:class:`JointLimits`,
float64 as written) live in the pytree's metadata: a jitted function recompiles for a new robot
structure or limits, never for new origins; solvers take per-solve limits as arrays
(:meth:`JointLimits.narrowed`), without a recompile.
"""

from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp
import jaxlie
import numpy as np

from pyroki_ros.model.limits import JointLimits
from pyroki_ros.model.urdf import URDFDescription, read_urdf

FIXED, REVOLUTE, PRISMATIC = 0, 1, 2
_TYPE_CODE = {"fixed": FIXED, "revolute": REVOLUTE, "continuous": REVOLUTE, "prismatic": PRISMATIC}


def _static(**kwargs):
    return dataclasses.field(metadata={"static": True}, **kwargs)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Robot:
    """A kinematic tree with ``n_links`` links and ``n_joints`` actuated joints.

    Actuated joints are the revolute, continuous and prismatic joints that do not mimic
    another joint, in URDF document order; this is the order of every configuration
    vector ``q`` (rad for revolute joints, m for prismatic joints).
    """

    # Per link (n_links, ...), in breadth-first order from the root:
    origins: jax.Array  # (n_links, 7) wxyz_xyz, parent link frame -> joint frame at q = 0
    axes: jax.Array  # (n_links, 3) joint axis in the joint (= child link) frame
    multipliers: jax.Array  # (n_links,) joint value = multiplier * q[q_index] + offset
    offsets: jax.Array  # (n_links,)
    # Per actuated joint (n_joints,):
    velocity_limits: jax.Array  # rad/s or m/s; inf where the URDF sets none
    effort_limits: jax.Array  # N m or N; inf where the URDF sets none

    name: str = _static()
    link_names: tuple[str, ...] = _static()
    joint_names: tuple[str, ...] = _static()  # actuated joints
    parent_index: tuple[int, ...] = _static()  # (n_links,) -1 for the root
    joint_type: tuple[int, ...] = _static()  # (n_links,) FIXED, REVOLUTE or PRISMATIC
    q_index: tuple[int, ...] = _static()  # (n_links,) actuated joint driving the link, or -1
    link_joint_names: tuple[str, ...] = _static()  # (n_links,) URDF joint name, "" for the root
    mimic_joint_names: tuple[str, ...] = _static()
    # Position limits as written in the URDF (float64: a float32 copy can round past them).
    limits: JointLimits = dataclasses.field(metadata={"static": True})

    @staticmethod
    def from_urdf(source: str | os.PathLike, dtype: jnp.dtype = jnp.float32) -> Robot:
        """Builds the model from a URDF file path or URDF XML text (``robot_description``).

        Args:
            source: a path to a ``.urdf`` file, or the XML itself.
            dtype: ``jnp.float32`` (default) or ``jnp.float64`` (needs ``jax_enable_x64``).

        Raises:
            URDFError: the URDF is malformed; the message says where.
        """
        description, _ = read_urdf(source)
        return Robot.from_description(description, dtype)

    @staticmethod
    def from_description(description: URDFDescription, dtype: jnp.dtype = jnp.float32) -> Robot:
        dtype = jnp.dtype(dtype)
        if dtype == jnp.float64 and not jax.config.jax_enable_x64:
            raise ValueError(
                "float64 needs jax_enable_x64: call jax.config.update('jax_enable_x64', True) first"
            )
        if dtype not in (jnp.float32, jnp.float64):
            raise ValueError(f"dtype must be float32 or float64, got {dtype}")

        by_name = {j.name: j for j in description.joints}
        by_child = {j.child: j for j in description.joints}
        actuated = [j for j in description.joints if j.type != "fixed" and j.mimic_joint is None]
        actuated_index = {j.name: i for i, j in enumerate(actuated)}
        link_index = {name: i for i, name in enumerate(description.link_names)}

        joints = [by_child[link] for link in description.link_names[1:]]  # [0] is the root
        n_links = len(description.link_names)
        origins = np.tile([1.0, 0, 0, 0, 0, 0, 0], (n_links, 1))
        axes = np.tile([1.0, 0, 0], (n_links, 1))
        multipliers, offsets = np.ones(n_links), np.zeros(n_links)
        # per link; the root's entries (and a fixed joint's type and q_index) stay as set here
        joint_type, q_index = [FIXED] * n_links, [-1] * n_links
        for i, joint in enumerate(joints, start=1):
            origins[i] = jaxlie.SE3.from_matrix(joint.origin).wxyz_xyz
            axes[i] = joint.axis
            if joint.type == "fixed":
                continue
            joint_type[i] = _TYPE_CODE[joint.type]
            # Resolve mimic chains down to the actuated joint that drives them.
            source, multiplier, offset = joint, 1.0, 0.0
            while source.mimic_joint is not None:
                offset += multiplier * source.offset
                multiplier *= source.multiplier
                source = by_name[source.mimic_joint]
            q_index[i] = actuated_index[source.name]
            multipliers[i], offsets[i] = multiplier, offset

        limits = JointLimits.create(
            [j.lower for j in actuated],
            [j.upper for j in actuated],
            [j.type == "continuous" for j in actuated],
        )
        return Robot(
            origins=jnp.asarray(origins, dtype),
            axes=jnp.asarray(axes, dtype),
            multipliers=jnp.asarray(multipliers, dtype),
            offsets=jnp.asarray(offsets, dtype),
            velocity_limits=jnp.asarray([j.velocity for j in actuated], dtype),
            effort_limits=jnp.asarray([j.effort for j in actuated], dtype),
            name=description.name,
            link_names=description.link_names,
            joint_names=tuple(j.name for j in actuated),
            parent_index=(-1, *(link_index[j.parent] for j in joints)),
            joint_type=tuple(joint_type),
            q_index=tuple(q_index),
            link_joint_names=("", *(j.name for j in joints)),
            mimic_joint_names=tuple(
                j.name for j in description.joints if j.type != "fixed" and j.mimic_joint
            ),
            limits=limits,
        )

    # --- sizes and look-ups -------------------------------------------------------------

    @property
    def n_joints(self) -> int:
        return len(self.joint_names)

    @property
    def n_links(self) -> int:
        return len(self.link_names)

    @property
    def lower(self) -> jax.Array:
        """(n_joints,) lower position limits in the model's dtype (rounded inwards, see
        :class:`JointLimits`); continuous joints read -pi."""
        return jnp.asarray(self.limits.inner(self.dtype)[0])

    @property
    def upper(self) -> jax.Array:
        """(n_joints,) upper position limits, as :attr:`lower`."""
        return jnp.asarray(self.limits.inner(self.dtype)[1])

    @property
    def continuous(self) -> tuple[bool, ...]:
        """(n_joints,) unbounded joints whose angle wraps."""
        return self.limits.continuous

    @property
    def root_link(self) -> str:
        return self.link_names[0]

    @property
    def dtype(self) -> jnp.dtype:
        return self.origins.dtype

    def link_index(self, link: str) -> int:
        """Index of a link in ``link_names``; ValueError naming the link if it is unknown."""
        try:
            return self.link_names.index(link)
        except ValueError:
            raise ValueError(f"unknown link '{link}'; {_some(self.link_names)}") from None

    def active_mask(self, active_joints=None) -> np.ndarray:
        """(n_joints,) bool: the joints a solve may move, ``active_joints`` (names) or all
        when None; ValueError for an empty list or a name that is not an actuated joint."""
        if active_joints is None:
            return np.ones(self.n_joints, bool)
        names = list(active_joints)
        if not names:
            raise ValueError("active_joints is empty: give at least one joint (or None = all)")
        return np.isin(np.arange(self.n_joints), [self.joint_index(name) for name in names])

    def joint_index(self, joint: str) -> int:
        """Index of an actuated joint in ``joint_names``; ValueError if unknown or not actuated."""
        try:
            return self.joint_names.index(joint)
        except ValueError:
            kind = "a mimic joint" if joint in self.mimic_joint_names else "unknown"
            if joint in self.link_joint_names and kind == "unknown":
                kind = "a fixed joint"
            raise ValueError(
                f"joint '{joint}' is {kind}, not an actuated joint; actuated: "
                f"{', '.join(self.joint_names)}"
            ) from None

    def reach(self, link: str | int) -> tuple[np.ndarray, float]:
        """A ball that holds ``link``'s origin in every configuration within the limits:
        centre (3,) in the root frame, radius (m). The centre is the origin of the first joint
        on the chain that moves (no joint moves it; every joint turns about its own origin),
        the radius the sum of the link offsets after it plus the travel of prismatic joints.
        A target farther from the centre than the radius (plus the offset of a point on the
        link) cannot be reached."""
        origins = np.asarray(self.origins, np.float64)
        multipliers, offsets = np.asarray(self.multipliers), np.asarray(self.offsets)
        pose = jaxlie.SE3.identity()
        radius = 0.0
        moving = False
        for i in self.ancestors(link)[1:]:
            if moving:
                radius += float(np.linalg.norm(origins[i, 4:]))
            else:
                pose = pose @ jaxlie.SE3(jnp.asarray(origins[i]))
            if self.q_index[i] >= 0:
                moving = True
                if self.joint_type[i] == PRISMATIC:
                    bounds = np.array(self.limits.bounds[self.q_index[i]])  # (lower, upper)
                    radius += float(np.max(np.abs(multipliers[i] * bounds + offsets[i])))
        return np.asarray(pose.translation(), np.float64), radius

    def ancestors(self, link: str | int) -> tuple[int, ...]:
        """Link indices from the root down to ``link`` (inclusive)."""
        i = self.link_index(link) if isinstance(link, str) else link
        chain = []
        while i >= 0:
            chain.append(i)
            i = self.parent_index[i]
        return tuple(reversed(chain))

    def chain_joints(self, base: str, tip: str) -> tuple[int, ...]:
        """Actuated joints that move ``tip`` relative to ``base``, sorted.

        Raises ValueError when either link is unknown.
        """
        moving = set(self.ancestors(base)) ^ set(self.ancestors(tip))  # links on one path only
        return tuple(sorted({self.q_index[i] for i in moving if self.q_index[i] >= 0}))

    def moving_chain(self, tip: str, base: str | None = None) -> tuple[str, tuple[int, ...]]:
        """``base`` (None: the root link) and :meth:`chain_joints` from it to ``tip``;
        ValueError naming an unknown link, or when no actuated joint moves ``tip`` relative
        to ``base`` (nothing to solve or sample for)."""
        base = base or self.root_link
        chain = self.chain_joints(base, tip)
        if not chain:
            raise ValueError(f"no actuated joint moves '{tip}' relative to '{base}'")
        return base, chain

    def subtree(self, links: tuple[str, ...]) -> Robot:
        """The same robot reduced to the links needed to place ``links`` (their ancestors).

        Configurations keep all ``n_joints`` entries; kinematics of the reduced robot touch only
        the kept links, which is what a solver for a few tip links wants. A link on the way
        that hangs on a fixed joint and is not one of ``links`` is merged away (its origin
        composed into its children's): a shallower tree takes fewer rounds of FK (one per
        doubling of the depth, see kinematics.frames_t).
        """
        needed = sorted({i for link in links for i in self.ancestors(link)})
        keep = [
            i
            for i in needed
            if self.parent_index[i] < 0
            or self.joint_type[i] != FIXED
            or self.link_names[i] in links
        ]
        new_index = {old: new for new, old in enumerate(keep)}
        merged, parents = [], []
        for i in keep:
            origin = jaxlie.SE3(self.origins[i])
            parent = self.parent_index[i]
            while parent >= 0 and parent not in new_index:  # a merged fixed link: pose = its origin
                origin = jaxlie.SE3(self.origins[parent]) @ origin
                parent = self.parent_index[parent]
            merged.append(origin.wxyz_xyz)
            parents.append(-1 if parent < 0 else new_index[parent])
        pick = np.asarray(keep)
        return dataclasses.replace(
            self,
            origins=jnp.stack(merged).astype(self.dtype),
            axes=self.axes[pick],
            multipliers=self.multipliers[pick],
            offsets=self.offsets[pick],
            link_names=tuple(self.link_names[i] for i in keep),
            parent_index=tuple(parents),
            joint_type=tuple(self.joint_type[i] for i in keep),
            q_index=tuple(self.q_index[i] for i in keep),
            link_joint_names=tuple(self.link_joint_names[i] for i in keep),
        )

    def with_joints(self, joints: tuple[int, ...]) -> Robot:
        """The same links with only the actuated joints ``joints`` (indices, ascending):
        configurations become (len(joints),). Every moving link must be driven by one of
        them, as in a :meth:`subtree` with ``joints`` = the joints that drive its links."""
        new_index = {old: new for new, old in enumerate(joints)}
        if any(i >= 0 and i not in new_index for i in self.q_index):
            raise ValueError("with_joints: a kept link moves with a joint that is left out")
        pick = np.asarray(joints, dtype=int)
        return dataclasses.replace(
            self,
            velocity_limits=self.velocity_limits[pick],
            effort_limits=self.effort_limits[pick],
            joint_names=tuple(self.joint_names[i] for i in joints),
            q_index=tuple(-1 if i < 0 else new_index[i] for i in self.q_index),
            limits=self.limits.select(joints),
        )

    # --- limits (pyroki_ros.model.limits) ----------------------------------------------------

    def random_configurations(
        self, key: jax.Array, shape: tuple[int, ...] = (), margin: float = 0.0
    ) -> jax.Array:
        """Uniform samples inside the limits, shape (*shape, n_joints)."""
        return self.limits.random(key, shape, self.dtype, margin)

    def clip(self, q: jax.Array) -> jax.Array:
        """Wraps continuous joints to [-pi, pi) and clips the others: :meth:`JointLimits.clip`."""
        return self.limits.clip(q)

    def center(self) -> jax.Array:
        """Midpoint of the limits, (n_joints,)."""
        return jnp.asarray(self.limits.center(), self.dtype)


def _some(names: tuple[str, ...], limit: int = 12) -> str:
    shown = ", ".join(names[:limit])
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f"the robot has: {shown}{more}"
