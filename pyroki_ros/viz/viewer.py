"""A web viewer on viser: the robot, goals, obstacles and an animated plan in a browser.

    viewer = Viewer(robot, RobotSpheres.embedded("panda", robot))   # http://127.0.0.1:8080
    viewer.show_configuration(q)
    viewer.show_goal("hand goal", wxyz_xyz)
    viewer.show_world(world)
    viewer.show_plan(plan.path, times)          # a slider and a Play button over the path

The robot is drawn as its collision spheres (the bundled robots are mesh-free) and a stick
figure through its link origins; with a URDF *file* whose visual meshes all resolve, its meshes
as well (viser's ViserUrdf). Anything else comes in as :class:`pyroki_ros.viz.display.Shape`
lists (the vocabulary of the node's RViz markers), so ``pyroki-ros view`` shows the node's
``~/markers`` through :meth:`Viewer.show_shapes`. Everything is in the robot's root frame.

Core side: no rclpy. viser is imported when a Viewer is made (``pip install .[view]``; pinned
in requirements.txt). Binds to 127.0.0.1 by default: the page has no authentication, so
serve it on other interfaces only on a network you trust.
"""

from __future__ import annotations

import re
import threading
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pyroki_ros.viz import display
from pyroki_ros.viz.display import Shape

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
# Scene tree names (a browser test looks for them).
ROBOT_SPHERES = "/robot/spheres"
ROBOT_BOXES = "/robot/boxes"
ROBOT_LINKS = "/robot/links"
ROBOT_MESHES = "/robot/visual"
# GUI labels.
PLAN_FOLDER = "Plan"
PLAN_SLIDER = "plan step"
PLAY_BUTTON = "Play"
PAUSE_BUTTON = "Pause"
# Playback of a plan without times: one step per this many seconds.
DEFAULT_STEP_SECONDS = 0.05
PATH_WIDTH = 0.01  # m: thicker than the markers' lines, to be seen beside the spheres


def _rgb(color: Sequence[float]) -> tuple[int, int, int]:
    return tuple(round(255 * min(max(float(c), 0.0), 1.0)) for c in color[:3])


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:48]


class Viewer:
    """A viser server showing one robot and what is added to it.

    Args:
        robot: the robot (pyroki_ros.Robot).
        spheres: its collision spheres (pyroki_ros.collision.RobotSpheres), or None: the stick
            figure alone.
        urdf: the URDF file, for meshes (used only when every visual mesh resolves).
        host, port: where to serve (port 0: any free port; :attr:`url` tells).
        label: shown at the top of the GUI panel.
    """

    def __init__(
        self,
        robot,
        spheres=None,
        *,
        urdf: str | Path | None = None,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        label: str = "pyroki_ros",
    ):
        import jax
        import trimesh
        import viser

        from pyroki_ros.model.kinematics import forward_kinematics

        self.server = viser.ViserServer(host=host, port=port, label=label, verbose=False)
        self.robot = robot
        self.spheres = spheres
        self._fk = jax.jit(forward_kinematics)
        self._lock = threading.RLock()
        self._groups: dict[str, list] = {}  # group -> scene handles
        self._q = np.asarray(robot.center(), np.float64)
        ico = trimesh.creation.icosphere(subdivisions=2)
        self._sphere_mesh = (np.asarray(ico.vertices, np.float32), np.asarray(ico.faces, np.uint32))

        scene = self.server.scene
        scene.add_grid("/grid", width=2.0, height=2.0, cell_size=0.1, section_size=0.5)
        self.server.initial_camera.position = (1.2, 0.9, 0.8)
        self.server.initial_camera.look_at = (0.25, 0.0, 0.35)
        poses = self.link_poses(self._q)
        self._links = scene.add_line_segments(
            ROBOT_LINKS, self._stick_segments(poses), (90, 90, 110), thickness=0.012
        )
        self._spheres = None
        if spheres is not None and spheres.world_mask.any():
            radii = display.sphere_radii(spheres).astype(np.float32)
            centers = display.sphere_centers(spheres, poses)
            rgb = _rgb(display.ROBOT_COLOR)
            self._spheres = self._add_spheres(ROBOT_SPHERES, centers, radii, rgb, 0.55)
        # The set's boxes (the fine Panda set's fingers and hand), posed with the robot.
        self.robot_boxes = [  # viser handles (for scripts and tests)
            self._add(f"{ROBOT_BOXES}/{i}", shape)
            for i, shape in enumerate(self._box_shapes(poses))
        ]
        self._meshes = self._load_meshes(urdf)

        # Plan playback: a slider over the steps, a Play / Pause button.
        self._plan: np.ndarray | None = None
        self._times: np.ndarray | None = None
        self._playing = threading.Event()
        self._stop = threading.Event()
        with self.server.gui.add_folder(PLAN_FOLDER):
            self._plan_info = self.server.gui.add_markdown("no plan yet")
            self.plan_slider = self.server.gui.add_slider(
                PLAN_SLIDER, min=0, max=1, step=1, initial_value=0, disabled=True
            )
            self.play_button = self.server.gui.add_button(PLAY_BUTTON, disabled=True)
        self.plan_slider.on_update(lambda _: self._on_slider())
        self.play_button.on_click(lambda _: self.pause() if self._playing.is_set() else self.play())
        self._player = threading.Thread(target=self._run_player, name="viewer_player", daemon=True)
        self._player.start()
        self.show_configuration(self._q)

    # --- where ----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host = self.server.get_host()
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{shown}:{self.server.get_port()}"

    def close(self) -> None:
        self._stop.set()
        self._playing.set()  # wake the player so that it ends
        # Joined before the server stops and the interpreter exits: a daemon thread still
        # inside XLA at exit aborts the process ("FATAL: exception not rethrown").
        self._player.join(timeout=5.0)
        self.server.stop()

    # --- the robot ------------------------------------------------------------------------------

    def link_poses(self, q: np.ndarray) -> np.ndarray:
        """Root-frame link poses (L, 7) at q (n,) or (T, L, 7) at (T, n)."""
        q = np.asarray(q, np.dtype(self.robot.dtype))
        return np.asarray(self._fk(self.robot, q).wxyz_xyz, np.float64)

    def _stick_segments(self, poses: np.ndarray) -> np.ndarray:
        """(k, 2, 3): each link's origin to its parent's (links with a parent)."""
        parents = np.asarray(self.robot.parent_index)
        children = np.flatnonzero(parents >= 0)
        if len(children) == 0:
            return np.zeros((1, 2, 3))
        return np.stack([poses[parents[children], 4:], poses[children, 4:]], axis=1)

    def _box_shapes(self, poses: np.ndarray) -> list[Shape]:
        if self.spheres is None:
            return []
        return display.robot_boxes(self.spheres, poses, display.ROBOT_COLOR)

    def show_configuration(self, q) -> None:
        """Draws the robot at q (n,) (actuated joints, ``robot.joint_names`` order)."""
        q = np.asarray(q, np.float64)
        with self._lock:
            self._q = q
            poses = self.link_poses(q)
            self._links.points = self._stick_segments(poses)
            if self._spheres is not None:
                self._spheres.batched_positions = display.sphere_centers(self.spheres, poses)
            for handle, shape in zip(self.robot_boxes, self._box_shapes(poses)):
                handle.wxyz, handle.position = shape.pose[:4], shape.pose[4:]
            if self._meshes is not None:
                meshes, order = self._meshes
                meshes.update_cfg(q[order])

    def _load_meshes(self, urdf: str | Path | None):
        """ViserUrdf of a URDF file whose visual meshes all resolve, with the column of each of
        its actuated joints in q; None otherwise (mesh-free or unresolvable: spheres only)."""
        if urdf is None or "<" in str(urdf) or not Path(urdf).is_file():
            return None
        path = Path(urdf)
        meshes = [m.get("filename", "") for m in ET.parse(path).getroot().iter("mesh")]
        if not meshes or not all(_resolve_mesh(name, path.parent) for name in meshes):
            return None
        try:
            from viser.extras import ViserUrdf

            visual = ViserUrdf(self.server, path, root_node_name=ROBOT_MESHES)
            names = visual.get_actuated_joint_names()
            order = np.array([self.robot.joint_names.index(n) for n in names], int)
        except (ValueError, OSError, ImportError):  # a joint we do not model, a bad mesh
            return None
        return visual, order

    # --- shapes ----------------------------------------------------------------------------------

    def show_shapes(self, group: str, shapes: Sequence[Shape]) -> None:
        """Replaces the scene group ``/<group>`` with ``shapes`` (root frame)."""
        with self._lock:
            for handle in self._groups.pop(group, []):
                handle.remove()
            self._groups[group] = [
                self._add(f"/{group}/{i}_{_slug(s.label) or s.kind}", s)
                for i, s in enumerate(shapes)
            ]

    def shown(self) -> dict[str, int]:
        """Scene groups shown by :meth:`show_shapes` and their number of shapes."""
        with self._lock:
            return {group: len(handles) for group, handles in self._groups.items()}

    def _add(self, name: str, shape: Shape):
        scene = self.server.scene
        pose = {"wxyz": shape.pose[:4], "position": shape.pose[4:]}
        rgb = _rgb(shape.color)
        opacity = float(shape.color[3]) if shape.color[3] < 1.0 else None  # rgba: opaque as None
        sx, sy, sz = (float(v) for v in shape.scale)
        if shape.kind == "axes":
            return scene.add_frame(name, axes_length=sx, axes_radius=max(sy, 1e-3) / 2, **pose)
        if shape.kind == "sphere":
            return scene.add_icosphere(name, radius=sx / 2, color=rgb, opacity=opacity, **pose)
        if shape.kind == "box":
            return scene.add_box(name, rgb, (sx, sy, sz), opacity=opacity, **pose)
        if shape.kind == "cylinder":
            return scene.add_cylinder(name, sx / 2, sz, rgb, opacity=opacity, **pose)
        if shape.kind == "arrow":
            head = {"shaft_radius": sx / 2, "head_radius": sy / 2, "head_length": sz}
            return scene.add_arrows(name, shape.points.reshape(1, 2, 3), rgb, **head, **pose)
        if shape.kind in ("line_strip", "line_list"):
            p, colors = shape.points, rgb
            if shape.kind == "line_strip":
                segments = np.stack([p[:-1], p[1:]], axis=1) if len(p) > 1 else np.zeros((1, 2, 3))
            else:
                segments = p[: len(p) // 2 * 2].reshape(-1, 2, 3)
                if shape.colors is not None:  # rgb per point, in [0, 1] (viser scales them)
                    colors = np.asarray(shape.colors)[: len(segments) * 2, :3].reshape(-1, 2, 3)
            return scene.add_line_segments(name, segments, colors, thickness=max(sx, 0.002), **pose)
        if shape.kind == "sphere_list":
            radii = np.full(len(shape.points), sx / 2)
            return self._add_spheres(name, shape.points, radii, rgb, opacity, **pose)
        raise ValueError(f"unknown shape kind {shape.kind!r}")

    def _add_spheres(self, name, centers, radii, rgb, opacity, **pose):
        """One instanced icosphere per centre (viser's batched meshes)."""
        vertices, faces = self._sphere_mesh
        wxyzs = np.tile([1.0, 0.0, 0.0, 0.0], (len(radii), 1))
        return self.server.scene.add_batched_meshes_simple(
            name,
            vertices,
            faces,
            wxyzs,
            centers,
            batched_scales=radii,
            batched_colors=rgb,
            opacity=opacity,
            **pose,
        )

    def show_goal(self, name: str, pose, group: str = "goals") -> None:
        """A target frame (7,) wxyz_xyz, drawn as axes labelled ``name`` (replaces ``group``)."""
        self.show_shapes(group, [display.axes(np.asarray(pose, np.float64), name)])

    def show_objectives(self, objectives, q=None, group: str = "objectives", color=None) -> None:
        """Core objectives, Klampt-style (display.objective_shapes), placed at q (default: the
        configuration shown)."""
        poses = self.link_poses(self._q if q is None else q)
        color = color or display.OBJECTIVE_COLOR
        shapes = display.objective_shapes(objectives, self.robot.link_names, poses, color, group)
        self.show_shapes(group, shapes)

    def show_world(self, world, group: str = "obstacles") -> None:
        """Obstacles of a pyroki_ros.collision.World."""
        self.show_shapes(group, display.world_shapes(world))

    # --- plans -----------------------------------------------------------------------------------

    def show_plan(self, path, times=None, tip: str | None = None) -> None:
        """A path (T, n) to play: the slider steps through it, Play runs it in real time
        (``times`` (T,) s from the start; without, :data:`DEFAULT_STEP_SECONDS` per step).
        ``tip``'s path (default: the end of the longest chain) is drawn as a line; the robot
        is shown at the first point."""
        path = np.asarray(path, np.float64).reshape(-1, len(self.robot.joint_names))
        if len(path) == 0:
            raise ValueError("empty path")
        times = np.arange(len(path)) * DEFAULT_STEP_SECONDS if times is None else np.asarray(times)
        tip = tip or self.robot.link_names[-1]
        ends = self.link_poses(path)[:, self.robot.link_index(tip), 4:]
        self.pause()
        with self._lock:
            self._plan, self._times = path, times
            line = display.line_strip(ends, display.PATH_COLOR, f"path {tip}", width=PATH_WIDTH)
            self.show_shapes("plan", [line])
            self.plan_slider.max = max(len(path) - 1, 1)
            self.plan_slider.value = 0
            self.plan_slider.disabled = self.play_button.disabled = len(path) < 2
            self._plan_info.content = (
                f"{len(path)} points over {float(times[-1] - times[0]):.2f} s; `{tip}` path in cyan"
            )
        self.show_configuration(path[0])

    def _on_slider(self) -> None:
        with self._lock:
            if self._plan is not None:
                index = int(min(max(self.plan_slider.value, 0), len(self._plan) - 1))
                self.show_configuration(self._plan[index])

    def play(self) -> None:
        """Runs the plan from the slider's step (from the start when at the end)."""
        with self._lock:
            if self._plan is None or len(self._plan) < 2:
                return
            if self.plan_slider.value >= len(self._plan) - 1:
                self.plan_slider.value = 0
            self.play_button.label = PAUSE_BUTTON
        self._playing.set()

    def pause(self) -> None:
        self._playing.clear()
        self.play_button.label = PLAY_BUTTON

    @property
    def playing(self) -> bool:
        return self._playing.is_set()

    def _run_player(self) -> None:
        while self._playing.wait() and not self._stop.is_set():  # close() sets both
            with self._lock:
                plan, times = self._plan, self._times
                index = int(self.plan_slider.value)
            if plan is None or index >= len(plan) - 1:
                self.pause()
                continue
            if self._stop.wait(max(float(times[index + 1] - times[index]), 1e-3)):
                return
            with self._lock:
                if self._playing.is_set() and self._plan is plan:
                    self.plan_slider.value = index + 1  # on_update draws it
            if index + 1 >= len(plan) - 1:
                self.pause()


def _resolve_mesh(filename: str, folder: Path) -> bool:
    """Whether a URDF mesh reference names an existing file (absolute, file://, relative to
    the URDF, or package://<name>/... relative to a parent folder of the URDF)."""
    name = filename.removeprefix("file://")
    if name.startswith("package://"):
        relative = name.removeprefix("package://").split("/", 1)[-1]
        return any((parent / relative).is_file() for parent in (folder, *folder.parents))
    return (folder / name).is_file()  # an absolute name replaces the folder
