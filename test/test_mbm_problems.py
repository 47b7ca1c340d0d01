"""MotionBenchMaker problem files and generator (bench/mbm_problems.py) and the benchmark's
per-problem function (bench/mbm_benchmark.py).

The generated set (test/data/mbm/generated_seed0.yaml) is committed data: these tests check
that it is valid by the independent check, that the generator is deterministic and still makes
it, and that it stays small. Planner success is not asserted here (yet)."""

from __future__ import annotations

import math
import time

import mbm_check as mc
import mbm_mesh
import mbm_problems as mp
import numpy as np
import pytest
import yaml

FAMILIES = (
    "bookshelf_small",
    "bookshelf_tall",
    "bookshelf_thin",
    "cage",
    "box",
    "table_pick",
    "table_under_pick",
)
# Plans in these tests must succeed, which a 2 s budget (the benchmark's, measured on this
# project's machine) does not promise on a slower or busier CI machine: CI failed so once,
# bookshelf_thin/1 with one start path tried in 2 s. The budget itself is tested in
# test_budget.py.
TEST_BUDGET_S = 10.0


def test_load_demo_set():
    problems = mp.load_problems(mp.DEMO_SET)
    assert len(problems) == 5
    assert [p.name for p in problems] == [f"bookshelf_small/{i}" for i in range(5)]
    for p in problems:
        assert p.family == "bookshelf_small"
        assert [c.name for c in p.cuboids] == ["cube0", "cube1", "cube2", "cube3", mp.STAND.name]
        assert len(p.cylinders) == 3
        assert p.start.shape == (7,) and p.goal_pose.shape == (7,)
        assert p.goal_ik.ndim == 2 and p.goal_ik.shape[1] == 7 and len(p.goal_ik) >= 11
        np.testing.assert_allclose(np.linalg.norm(p.goal_pose[:4]), 1.0, atol=1e-6)
        assert p.cuboids[-1].pose == mp.STAND.pose and p.cuboids[-1].dims == mp.STAND.dims
        assert not p.start.flags.writeable
    # The file's [x, y, z, qw, qx, qy, qz] became wxyz_xyz.
    raw = yaml.safe_load(mp.DEMO_SET.read_text())["bookshelf_small_panda"][0]
    pose = raw["obstacles"]["cuboid"]["cube0"]["pose"]
    assert problems[0].cuboids[0].pose == (*pose[3:], *pose[:3])
    goal = raw["goal_pose"]
    np.testing.assert_array_equal(
        problems[0].goal_pose, [*goal["quaternion_wxyz"], *goal["position_xyz"]]
    )


def test_dump_and_load_round_trip(tmp_path):
    problems = mp.load_problems(mp.DEMO_SET)
    path = tmp_path / "copy.yaml"
    mp.dump_problems(problems, path, header="a copy")
    assert path.read_text().startswith("# a copy\n")
    again = mp.load_problems(path)
    assert len(again) == len(problems)
    for a, b in zip(problems, again, strict=True):
        assert (a.name, a.family, a.cuboids, a.cylinders) == (
            b.name,
            b.family,
            b.cuboids,
            b.cylinders,
        )
        for field in ("start", "goal_pose", "goal_ik"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert yaml.safe_load(path.read_text()) == yaml.safe_load(mp.DEMO_SET.read_text())


def test_generated_set_is_valid_by_the_independent_check():
    """Every problem of the committed set: start and every goal configuration inside the
    limits, collision-free (robometrics' spheres, panda_link0 excepted; no self collision;
    the real collision geometry, as MotionBenchMaker asks), the goal configurations at the goal pose (1e-6 m / rad, far inside 1 mm / 1 deg)."""
    assert mp.GENERATED_SET.stat().st_size < 1_000_000
    problems = mp.load_problems(mp.GENERATED_SET)
    by_family: dict[str, int] = {}
    for p in problems:
        by_family[p.family] = by_family.get(p.family, 0) + 1
        scene = p.scene
        assert mp.validate(p) == [], p.name
        assert mc.configuration_valid(p.start, scene)[0], p.name
        assert 1 <= len(p.goal_ik) <= mp.GOAL_IK_KEEP
        assert mc.configuration_valid(p.goal_ik, scene).all(), p.name
        assert mbm_mesh.mesh_valid(np.vstack([p.start, p.goal_ik]), scene).all(), p.name
        for q in p.goal_ik:
            p_err, r_err = mc.goal_errors(q, p.goal_pose)
            assert p_err < 1e-6 and r_err < 1e-6, p.name
        # The robot stands on the stand, like robometrics' sets; the nominal scene's objects.
        assert p.cuboids[0] == mp.STAND
        shapes = mp.FAMILIES[p.family].shapes
        assert {o.name for o in p.cuboids[1:]} == {s.name for s in shapes if s.kind == "box"}
        assert {o.name for o in p.cylinders} == {s.name for s in shapes if s.kind == "cylinder"}
        if p.family != "table_under_pick":
            np.testing.assert_array_equal(p.start, mp.READY)
    assert by_family == dict.fromkeys(FAMILIES, 10)


def test_tuning_set_is_another_draw_of_the_same_families():
    """The tuning set (seed 1, where planner settings are chosen) holds 10 problems per
    family, none of whose scenes is in the evaluation set, and the first problem of each
    family is valid by the independent check (every problem is, by the generator's own
    check: ``bench/mbm_problems.py --check``; checking all 70 here would take ~4 min)."""
    tuning = mp.load_problems(mp.TUNING_SET)
    evaluation = {(p.cuboids, p.cylinders) for p in mp.load_problems(mp.GENERATED_SET)}
    by_family: dict[str, int] = {}
    for p in tuning:
        by_family[p.family] = by_family.get(p.family, 0) + 1
        assert (p.cuboids, p.cylinders) not in evaluation, p.name
        if by_family[p.family] == 1:
            assert mp.validate(p) == [], p.name
    assert by_family == dict.fromkeys(FAMILIES, 10)


@pytest.mark.slow
@pytest.mark.parametrize(("family", "index"), [("bookshelf_tall", 0), ("table_under_pick", 8)])
def test_generator_is_deterministic_and_makes_the_committed_set(family, index):
    first, _ = mp.generate_problem(mp.FAMILIES[family], index, seed=0)
    again, _ = mp.generate_problem(mp.FAMILIES[family], index, seed=0)
    assert first.to_yaml() == again.to_yaml()
    name = f"{family}/{index}"
    committed = next(p for p in mp.load_problems(mp.GENERATED_SET) if p.name == name)
    assert first.cuboids == committed.cuboids and first.cylinders == committed.cylinders
    # Floats may differ in the last bits across LAPACK builds (the IK's solves).
    for field in ("start", "goal_pose", "goal_ik"):
        np.testing.assert_allclose(getattr(first, field), getattr(committed, field), atol=1e-9)


def test_generator_seed_changes_the_problem():
    family = mp.FAMILIES["bookshelf_tall"]
    a, _ = mp.generate_problem(family, 0, seed=0)
    b, _ = mp.generate_problem(family, 0, seed=1)
    assert a.cuboids != b.cuboids


def test_scene_sampling_follows_the_family():
    """A sampled bookshelf keeps its shape: the shelf boards stay parallel to the floor, one
    board above another 0.3 m apart, the cans between them; the whole shelf turns about the
    robot (within +-1.57 rad) at about its nominal distance."""
    family = mp.FAMILIES["bookshelf_small"]
    for seed in range(5):
        poses = mp.sample_scene(family, np.random.default_rng(seed))
        bottom, top = poses["shelf_bottom"][1], poses["shelf_top"][1]
        np.testing.assert_allclose(bottom[:3, 2], [0, 0, 1], atol=1e-12)
        np.testing.assert_allclose(top[:3, 3] - bottom[:3, 3], 0.3 * bottom[:3, 2], atol=1e-12)
        yaw = math.atan2(bottom[1, 0], bottom[0, 0])
        assert abs(yaw) <= 1.57 + 1e-9
        assert abs(np.linalg.norm(bottom[:2, 3]) - 1.2) <= 0.15
        for can in ("Can1", "Can2", "Can3"):
            local = np.linalg.inv(bottom) @ poses[can][1]
            assert abs(local[1, 3]) <= 0.45 + 1e-9 and abs(local[2, 3] - 0.08) < 1e-9


@pytest.mark.slow
def test_benchmark_runs_one_demo_problem():
    """bench/mbm_benchmark.py's per-problem function plans one demo problem with the public
    API and checks the path independently (success is not asserted yet)."""
    import mbm_benchmark as mb

    planner = mb.make_planner(timeout=30.0)
    assert planner.plan_options == {"timeout": 30.0}  # the budget reaches plan()
    assert any("`contacts` left at its default" in note for note in planner.notes)
    problem = mp.load_problems(mp.DEMO_SET)[0]
    result = mb.run_problem(planner, problem, num_steps=32, source="demo_set")
    assert result.name == "bookshelf_small/0" and result.source == "demo_set"
    assert result.seconds > 0 and isinstance(result.planner_ok, bool)
    assert math.isfinite(result.verdict.position_error), result.message
    assert result.path_length >= 0
    assert result.false_success == (result.planner_ok and not result.verdict.ok)
    clear, total = map(int, result.own_goals_clear.split("/"))
    assert total == len(problem.goal_ik) and 0 <= clear <= total
    world = mb.to_world(problem)
    # cuboids as boxes, cylinders as cylinders, named in the World's order
    assert world.counts == (0, 0, 5, 0, 3)
    assert world.names == tuple(c.name for c in problem.cuboids + problem.cylinders)
    assert mb.to_world(problem, drop_stand=True).counts[2] == 4


@pytest.mark.slow
def test_a_goal_whose_clear_solutions_are_rare_is_found_by_more_seeds():
    """generated cage/5 with the fine spheres: none of the goal search's first 32 IK
    solutions is clear for the planner's model (the committed report of 2026-11-26 19:31 had
    it fail so), some of the problem's own goal configurations are; the later rounds of
    seeds find a clear one, and the path passes the independent check."""
    import mbm_benchmark as mb

    # Compiles are not counted (planning/budget.py), but the time per seed round is this
    # machine's: the benchmark measures the 2 s budget; here a slower CI machine gets more.
    planner = mb.make_planner(fine=True, timeout=TEST_BUDGET_S)
    problem = {p.name: p for p in mp.load_problems(mp.GENERATED_SET)}["cage/5"]
    clear, total = map(int, mb.own_goals_clear(planner, problem).split("/"))
    assert 0 < clear <= total
    result = mb.run_problem(planner, problem)
    assert result.planner_ok, result.message
    assert result.verdict.ok, result.verdict.reason


@pytest.mark.slow
def test_plans_that_were_false_successes_pass_the_independent_check():
    """The tuning set planned with another random draw (``seed=2``) once gave three false
    successes (2026-11-28): bookshelf_thin/1, a finger through a shelf's edge inside a fast
    segment that the success check's samples stepped over (-5.7 mm by the planner's own
    spheres); table_under_pick/1 and /4, goal configurations 0.1-0.5 mm clear by the
    planner's spheres and 0.2-0.7 mm inside the judge's. Each now either fails or passes
    the independent check.

    No budget: what is tested is the path the planner calls good, not its speed (budgets
    are: test_budget.py, test_contacts.py). CI once ran bookshelf_thin/1's 10 s budget out
    after one start path, where this VM's first start path succeeds in 0.7 s besides its
    compiles; the progress lines, timed, say where the time went should it fail again."""
    import mbm_benchmark as mb

    from pyroki_ros.planning.budget import compile_seconds

    planner = mb.make_planner(fine=True, start_collision="escape", buckets=(0, 16, 64),
                              plan_seed=2)  # fmt: skip
    log: list[str] = []
    clock, compiled = time.perf_counter(), compile_seconds()
    planner.plan_options["progress"] = lambda line: log.append(
        f"{time.perf_counter() - clock:.2f} s ({compile_seconds() - compiled:.1f} s of it "
        f"compiling): {line}"
    )
    problems = {p.name: p for p in mp.load_problems(mp.TUNING_SET)}
    for name in ("bookshelf_thin/1", "table_under_pick/1", "table_under_pick/4"):
        result = mb.run_problem(planner, problems[name])
        assert not result.false_success, (name, result.verdict.reason, log)
        # and the planner still succeeds
        assert result.planner_ok, (name, result.message, log)


@pytest.mark.slow
def test_goals_the_spheres_rule_out_plan_with_the_exact_model(tmp_path):
    """Tuning cage/8 and the second set's cage/5: the fine spheres put every goal
    configuration in collision (the forearm, panda_link5, 6.0-8.5 mm into the cage's wall,
    docs/benchmarks/mbm_fine_tuning.md, mbm_fine_seed2.md) where the real forearm is
    clear. The bundled file's exact model (the forearm as its mesh hull) is the plan's
    fallback: the plan says it used it, and the path passes the independent check. The same
    file without ``exact_hulls`` refuses the goal (GOAL_IN_COLLISION, named contact)."""
    import mbm_benchmark as mb
    from test_robot_hulls import fine_file_without_exact

    from pyroki_ros import objectives as O
    from pyroki_ros.planning.trajopt import GOAL_IN_COLLISION

    planner = mb.make_planner(fine=True, timeout=TEST_BUDGET_S, start_collision="escape")
    assert planner.optimizer.exact_links == ("panda_link5",)
    problems = [
        {p.name: p for p in mp.load_problems(mp.TUNING_SET)}["cage/8"],
        {p.name: p for p in mp.load_problems(mc.DATA / "generated_seed2.yaml")}["cage/5"],
    ]
    for problem in problems:
        result = mb.run_problem(planner, problem)
        assert result.planner_ok, (problem.name, result.message)
        assert "with the exact model (panda_link5)" in result.message
        assert result.verdict.ok, (problem.name, result.verdict.reason)
    # A joint goal too: cage/8's own goal configuration (clear of the real meshes).
    problem = problems[0]
    goal = mb.configurations(planner, np.asarray(problem.goal_ik, np.float64).reshape(-1, 7))
    joint = planner.optimizer.plan(
        mb.start_configuration(planner, problem),
        goal[0],
        world=mb.to_world(problem),
        active_joints=planner.arm,
        **planner.plan_options,
    )
    assert joint.success and "with the exact model (panda_link5)" in joint.message
    names = list(planner.robot.joint_names)
    path = np.asarray(joint.path, np.float64)[:, [names.index(j) for j in mc.PANDA.joint_names]]
    verdict = mc.check_path(path, problem.goal_pose, problem.scene)
    assert verdict.ok, verdict.reason
    spheres_only = mb.make_planner(
        spheres_file=fine_file_without_exact(tmp_path),
        timeout=TEST_BUDGET_S,
        start_collision="escape",
    )
    assert spheres_only.optimizer.exact is None
    problem = problems[0]
    refused = spheres_only.optimizer.plan(
        mb.start_configuration(spheres_only, problem),
        [O.pose(mc.GOAL_LINK, np.asarray(problem.goal_pose))],
        world=mb.to_world(problem),
        active_joints=spheres_only.arm,
        **spheres_only.plan_options,
    )
    assert not refused.success and refused.reason == GOAL_IN_COLLISION
    assert "panda_link5" in refused.message and "exact model" not in refused.message
