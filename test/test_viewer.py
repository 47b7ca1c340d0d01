"""The viser web viewer (pyroki_ros/viz/viewer.py): a Panda with its collision spheres, a goal
frame, a box obstacle and a short plan.

* server side: the plan slider poses the spheres at the reference FK of the path's points,
  Play runs to the end;
* in a real browser: Debian's headless Chromium (``./setup.sh --browser`` installs it and
  playwright; skipped, saying so, without them) loads the page, and the test reads what the
  page itself holds: viser's client exposes its scene tree and the three.js objects it mounted
  (``window.__viserSceneTree``, ``window.__viserMutable``, its hooks for end-to-end tests).
  The named nodes must be mounted at the poses sent, the robot's spheres drawn as one
  instanced mesh of every sphere, the GUI must show the plan slider, and a click on Play in
  the page must run the plan on the server. A screenshot goes to the test's folder
  (PYROKI_ROS_UPDATE_SCREENSHOT=1: also to docs/viewer.png, the README's picture).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import time

import numpy as np
import pytest

pytest.importorskip("viser", reason="viser not installed (requirements.txt / pip install .[view])")

from reference_fk import quat_wxyz_to_matrix, reference_fk

from pyroki_ros import Robot, forward_kinematics
from pyroki_ros.collision import RobotSpheres, World
from pyroki_ros.robots import urdf_path
from pyroki_ros.viz.viewer import PLAN_SLIDER, PLAY_BUTTON, ROBOT_LINKS, ROBOT_SPHERES, Viewer

CHROMIUM = os.environ.get("PYROKI_ROS_CHROMIUM", "/usr/bin/chromium")
REPO = pathlib.Path(__file__).resolve().parents[1]
START = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.02])
GOAL = START + np.array([0.9, 0.35, 0.0, 0.45, 0.0, -0.25, 0.0, 0.0])
BOX = np.array([1.0, 0.0, 0.0, 0.0, 0.45, -0.3, 0.25])  # wxyz_xyz
STEPS = 24
NAMES = {
    "spheres": ROBOT_SPHERES,
    "links": ROBOT_LINKS,
    "goal": "/goals/0_hand_goal",
    "box": "/obstacles/0_box",
    "path": "/plan/0_path_panda_hand",
}
# Chromium as this machine runs it (no GPU, no network): WebGL on SwiftShader, no background
# connections (each would be refused), no sandbox (root in a container).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def robot():
    return Robot.from_urdf(urdf_path("panda"))


@pytest.fixture(scope="module")
def viewer(robot):
    spheres = RobotSpheres.embedded("panda", robot)
    view = Viewer(robot, spheres, port=free_port())
    try:
        hand = np.asarray(forward_kinematics(robot, GOAL).wxyz_xyz)[robot.link_index("panda_hand")]
        view.show_goal("hand goal", hand)
        view.show_world(
            World.create(box_poses=[BOX], box_half_extents=[[0.08, 0.04, 0.12]], names=["box"])
        )
        view.show_plan(np.linspace(START, GOAL, STEPS), tip="panda_hand")
        yield view
    finally:
        view.close()


def reference_centers(robot, spheres, q: np.ndarray) -> np.ndarray:
    frames = reference_fk(urdf_path("panda").read_text(), q, robot.joint_names)
    local = np.asarray(spheres.centers, np.float64)
    return np.array([(frames[n] @ np.r_[c, 1.0])[:3] for n, c in zip(spheres.link_names, local)])


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_plan_slider_and_play_pose_the_robot(viewer, robot):
    assert viewer.url.startswith("http://127.0.0.1:")
    slider = viewer.plan_slider
    assert (slider.min, slider.max, slider.value) == (0, STEPS - 1, 0)
    path = np.linspace(START, GOAL, STEPS)
    for k in (7, STEPS - 1, 0):
        slider.value = k
        wait_until(
            lambda k=k: np.allclose(
                viewer._spheres.batched_positions,
                reference_centers(robot, viewer.spheres, path[k]),
                atol=1e-4,
            ),
            5.0,
            f"spheres at step {k}",
        )
    viewer.play()
    assert viewer.playing and viewer.play_button.label != PLAY_BUTTON
    wait_until(lambda: not viewer.playing, 10.0, "the plan to play to its end")
    assert slider.value == STEPS - 1 and viewer.play_button.label == PLAY_BUTTON
    slider.value = 0


def _browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM}: ./setup.sh --browser installs Debian's")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright not installed: ./setup.sh --browser"
    )
    return sync_api.sync_playwright()


@pytest.mark.slow
def test_the_page_shows_robot_goal_obstacle_and_plays_the_plan(viewer, robot, tmp_path):
    with _browser() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 700})
            page.goto(viewer.url)
            # Mounted: the client made a three.js object for every named node.
            page.wait_for_function(
                "names => window.__viserMutable !== undefined && names.every("
                "n => window.__viserMutable.nodeRefFromName[n] !== undefined)",
                arg=list(NAMES.values()),
                timeout=90_000,
            )
            tree = page.evaluate("() => Object.keys(window.__viserSceneTree.getState())")
            assert set(NAMES.values()) <= set(tree), tree
            poses = page.evaluate(
                "names => names.map(n => window.__viserMutable.nodePoseData[n])",
                list(NAMES.values()),
            )
            pose = dict(zip(NAMES, poses))
            np.testing.assert_allclose(
                pose["box"]["wxyz"] + pose["box"]["position"], BOX, atol=1e-6
            )
            hand = np.asarray(forward_kinematics(robot, GOAL).wxyz_xyz)[
                robot.link_index("panda_hand")
            ]
            np.testing.assert_allclose(pose["goal"]["position"], hand[4:], atol=1e-5)
            # The spheres: one instanced mesh with an instance per collision sphere.
            instances = page.evaluate(
                """name => { let count = 0;
                window.__viserMutable.nodeRefFromName[name].traverse(
                    o => { if (o.isInstancedMesh) count += o.count; });
                return count; }""",
                ROBOT_SPHERES,
            )
            assert instances == viewer.spheres.n_spheres
            # The GUI: the plan slider, and Play, clicked in the page, runs the plan.
            assert page.get_by_text(PLAN_SLIDER).is_visible()
            viewer.plan_slider.value = 0
            page.get_by_role("button", name=PLAY_BUTTON).click()
            wait_until(lambda: viewer.plan_slider.value == STEPS - 1, 20.0, "the plan to play")
            wait_until(lambda: not viewer.playing, 10.0, "the end of the plan")

            # A picture: the robot part way along its plan, the notice about software
            # rendering closed.
            viewer.plan_slider.value = STEPS // 2
            close = page.locator(".mantine-Notification-closeButton")
            if close.count():
                close.first.click()
            time.sleep(2.0)
            shot = tmp_path / "viewer.png"
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    import imageio.v3 as iio

    pixels = iio.imread(shot)
    assert pixels.shape[:2] == (700, 1000)
    colors = np.unique(pixels[..., :3].reshape(-1, 3), axis=0)
    assert len(colors) > 200, "the canvas looks empty"  # shading, grid, GUI text
    assert shot.stat().st_size < 300_000
    if os.environ.get("PYROKI_ROS_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(shot, REPO / "docs" / "viewer.png")


MESH_URDF = """<robot name="meshbot">
  <link name="base"><visual><geometry><mesh filename="box.stl"/></geometry></visual></link>
  <link name="arm"><visual><geometry><mesh filename="package://meshbot/box.stl"/></geometry>
  </visual></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" velocity="1" effort="1"/></joint>
</robot>"""


def test_meshes_only_when_every_mesh_resolves(tmp_path):
    import trimesh

    urdf = tmp_path / "bot.urdf"
    urdf.write_text(MESH_URDF)
    robot = Robot.from_urdf(urdf)
    view = Viewer(robot, None, urdf=urdf, port=free_port())
    try:
        assert view._meshes is None  # box.stl is missing: the stick figure only
    finally:
        view.close()
    trimesh.creation.box((0.1, 0.1, 0.1)).export(tmp_path / "box.stl")
    view = Viewer(robot, None, urdf=urdf, port=free_port())
    try:
        meshes, order = view._meshes
        assert meshes.get_actuated_joint_names() == ("j1",) and order.tolist() == [0]
        view.show_configuration(np.array([0.7]))  # moves the meshes too
    finally:
        view.close()


def test_the_fine_sets_boxes_move_with_the_robot(robot):
    """A viewer of the fine Panda set draws its 9 boxes (fingers; the hand hull's bounding
    box) and poses them at the reference FK of each configuration shown."""
    fine = RobotSpheres.embedded("panda", robot, fine=True)
    view = Viewer(robot, fine, port=free_port())
    try:
        assert len(view.robot_boxes) == fine.n_boxes == 9
        local = np.asarray(fine.box_poses, np.float64)
        for q in (START, GOAL):
            view.show_configuration(q)
            frames = reference_fk(urdf_path("panda").read_text(), q, robot.joint_names)
            for handle, link, pose in zip(view.robot_boxes, fine.box_link_names, local):
                expected = frames[link] @ _matrix(pose)
                np.testing.assert_allclose(handle.position, expected[:3, 3], atol=1e-4)
                got = _matrix(np.r_[handle.wxyz, 0, 0, 0])[:3, :3]
                np.testing.assert_allclose(got, expected[:3, :3], atol=1e-4)
    finally:
        view.close()


def _matrix(pose) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = quat_wxyz_to_matrix(np.asarray(pose[:4], np.float64))
    out[:3, 3] = pose[4:]
    return out
