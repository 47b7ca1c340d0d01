#!/usr/bin/env bash
# One lent-GPU session's planning measurements, in one device call (docs/benchmarks/gpu.md):
#
#   bench/gpu_session.sh OUT COMMIT [BEFORE_TREE BEFORE_COMMIT]
#
# 1. the MotionBenchMaker benchmark (bench/mbm_benchmark.py, fine spheres, start escape) on
#    the evaluation set, on whatever device JAX has -> OUT/mbm_fine_gpu.{md,json};
# 2. bench/gpu_report.py's planning rows (random scenes: plan and plan_batch of 1-256 pairs;
#    MotionBenchMaker demo) -> OUT/gpu_plan.md (PLAN_SECONDS: its time limit, default 170;
#    0 skips it);
# 3. the same rows from BEFORE_TREE (a copy of an earlier commit's pyroki_ros/, bench/, test/),
#    an A/B on the same card in the same call -> OUT/gpu_plan_before.md;
# 3b. with START_BATCHES set (e.g. 8: eight start paths at once, the GPU default before
#    9c94934), the evaluation set again with those start batches
#    -> OUT/mbm_fine_gpu_batches.{md,json};
# 4. the benchmark on the tuning and second evaluation sets -> OUT/mbm_fine_gpu_more.{md,json}
#    (MORE_SECONDS: its time limit, default 200; 0 skips it);
# 5. with SAMPLER set, the shipped samplers' raw samples and the seeding rule on hard targets
#    (bench/sampler_benchmark.py --shipped --hard 100) -> OUT/sampler_gpu.json.
#
# Each step has its own time limit, so a slow step costs the later ones, never the earlier
# results. Needs only the core's dependencies (no rclpy); on a lent machine run it after
# installing the carried wheels (see docs/benchmarks/gpu.md).
set -uo pipefail
OUT="${1:?output folder}"
COMMIT="${2:?commit of this tree}"
BEFORE="${3:-}"
BEFORE_COMMIT="${4:-}"
export PYTHONUNBUFFERED=1
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
# SITE: a folder of carried wheels' packages (pip install --target), searched before the tree
export PYTHONPATH="${SITE:+$SITE:}$ROOT"
PY="${PYTHON:-python3}"
step() { echo "=== $(date -u +%H:%M:%S) $*"; }

step "1. MotionBenchMaker, evaluation set"
timeout 240 "$PY" bench/mbm_benchmark.py --fine-spheres --start-collision escape \
  --commit "$COMMIT" --markdown "$OUT/mbm_fine_gpu.md" --json "$OUT/mbm_fine_gpu.json"

if [ "${PLAN_SECONDS:-170}" != 0 ]; then  # 0: skip the step
  step "2. gpu_report planning rows"
  timeout "${PLAN_SECONDS:-170}" "$PY" bench/gpu_report.py --full --only plan,mbm --repeat-budget 4 \
    --commit "$COMMIT" --out "$OUT/gpu_plan.md"
fi

if [ -n "$BEFORE" ]; then
  step "3. gpu_report planning rows at $BEFORE_COMMIT"
  (cd "$BEFORE" && export PYTHONPATH="${SITE:+$SITE:}$PWD" && timeout 170 "$PY" bench/gpu_report.py --full --only plan,mbm \
    --repeat-budget 4 --commit "$BEFORE_COMMIT" --out "$OUT/gpu_plan_before.md")
fi

if [ -n "${START_BATCHES:-}" ]; then
  step "3b. MotionBenchMaker, evaluation set, start_batches=$START_BATCHES"
  timeout 240 "$PY" bench/mbm_benchmark.py --fine-spheres --start-collision escape \
    --start-batches "$START_BATCHES" --commit "$COMMIT" \
    --markdown "$OUT/mbm_fine_gpu_batches.md" --json "$OUT/mbm_fine_gpu_batches.json"
fi

if [ "${MORE_SECONDS:-200}" != 0 ]; then  # 0: skip the step
  step "4. MotionBenchMaker, tuning and second evaluation sets"
  timeout "${MORE_SECONDS:-200}" "$PY" bench/mbm_benchmark.py --fine-spheres \
    --start-collision escape --commit "$COMMIT" \
    --problems test/data/mbm/generated_seed1.yaml test/data/mbm/generated_seed2.yaml \
    --markdown "$OUT/mbm_fine_gpu_more.md" --json "$OUT/mbm_fine_gpu_more.json"
fi

if [ -n "${SAMPLER:-}" ]; then
  step "5. learned sampler: raw samples and seeding on hard targets (issue 20)"
  timeout "${SAMPLER_SECONDS:-240}" "$PY" bench/sampler_benchmark.py --robots panda,ur5 \
    --shipped --hard 100 --hard-pool 4000 --hard-rounds 5 --start random \
    --json "$OUT/sampler_gpu.json"
fi
step "done"
