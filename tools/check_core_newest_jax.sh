#!/usr/bin/env bash
# The core (pyroki_ros minus pyroki_ros/ros) against the newest JAX release, without ROS.
#
#   tools/check_core_newest_jax.sh                 # every core test, Python 3.11 and 3.12
#   PYTHONS=3.12 tools/check_core_newest_jax.sh test/test_ik.py -k batch   # pytest arguments
#
# Per Python version in $PYTHONS (default "3.11 3.12"; pythonX.Y on PATH or a pyenv install;
# a missing one is skipped with a note) it makes .venv-jax-latest/py<version>, installs the
# newest jax and jaxlib that pip finds for that Python (no pin: JAX 0.11 and later need
# Python >= 3.12, so 3.11 gets the newest 0.10.x, the pinned one) with the core's dependencies
# and the tests' (optax, pytest, hypothesis, PyYAML), installs this package without its
# dependencies (no ROS), and runs the core tests with deprecation warnings from JAX and from
# our own code (a deprecated JAX API called there) as errors. The core tests: test/test_*.py
# except the ROS layer's (test_node_*, test_packaging_* but test_packaging_core_without_ros,
# test_request_fuzz); pytest arguments given to the script replace that list. Exit status: 0
# when every run passed. Takes ~1 GB per environment and about as long as those tests.
#
# A second run reuses the environments and upgrades them when a newer JAX is out
# (PYROKI_ROS_LATEST_FRESH=1: make them anew).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHONS="${PYTHONS:-3.11 3.12}"
BASE="$ROOT/.venv-jax-latest"
PACKAGES=(jax jaxlib jaxlie yourdfpy numpy optax pytest hypothesis pyyaml)

log() { printf '[newest-jax] %s\n' "$*"; }

# A deprecation warned from our code (the core, the tests, their helpers and examples: a
# deprecated JAX API called there) or from inside JAX fails the run; other libraries' own
# deprecations stay warnings (listed in pytest's summary). pytest's ini syntax: the module
# field is a regular expression matched at the start of the warning's module.
OURS='(pyroki_ros|jax|jaxlib|test_|train_through_fk|reference_fk|fk_check|ik_reference|ik_cases|robot_cases|collision_reference|nls_reference|plan_check|gpu_report)'
WARNINGS="error::DeprecationWarning:$OURS
error::PendingDeprecationWarning:$OURS
error::FutureWarning:$OURS"

find_python() {  # an interpreter of version $1 that runs: on PATH, else a pyenv install
  local candidate
  for candidate in "$(command -v "python$1" || true)" \
      "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".*/bin/"python$1"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] \
        && "$candidate" -c "import sys; assert sys.version.startswith('$1.')" >/dev/null 2>&1; then
      echo "$candidate"
      return
    fi
  done
}

core_tests() {
  local f name
  for f in test/test_*.py; do
    name="$(basename "$f")"
    case "$name" in
      test_packaging_core_without_ros.py) echo "$f" ;;
      test_node_* | test_packaging_* | test_request_fuzz.py) ;;
      *) echo "$f" ;;
    esac
  done
}

if [ $# -gt 0 ]; then
  TESTS=("$@")
else
  mapfile -t TESTS < <(core_tests)
fi

failed=()
ran=0
for version in $PYTHONS; do
  python="$(find_python "$version")"
  if [ -z "$python" ]; then
    log "python$version not found: skipped"
    continue
  fi
  venv="$BASE/py$version"
  if [ -n "${PYROKI_ROS_LATEST_FRESH:-}" ]; then rm -rf "$venv"; fi
  if [ ! -x "$venv/bin/python" ]; then
    log "creating $venv with $("$python" -c 'import sys; print(sys.version.split()[0])')"
    "$python" -m venv "$venv"
  fi
  py="$venv/bin/python"
  log "python$version: installing the newest ${PACKAGES[*]}"
  "$py" -m pip install -q --disable-pip-version-check --upgrade pip setuptools wheel
  "$py" -m pip install -q --disable-pip-version-check --upgrade "${PACKAGES[@]}"
  "$py" -m pip install -q --disable-pip-version-check --no-deps -e "$ROOT"
  "$py" - <<'EOF'
import importlib.metadata as md
import sys

names = ("jax", "jaxlib", "jaxlie", "yourdfpy", "numpy", "optax")
print("[newest-jax] Python", sys.version.split()[0], *(f"{n} {md.version(n)}" for n in names))
try:
    import rclpy  # noqa: F401
except ImportError:
    pass
else:
    sys.exit("[newest-jax] rclpy is importable here: this environment must not have ROS")
EOF
  if (cd "$ROOT" && JAX_PLATFORMS=cpu "$py" -m pytest -q -p no:cacheprovider \
      -o "filterwarnings=$WARNINGS" "${TESTS[@]}"); then
    log "python$version: passed"
  else
    log "python$version: FAILED"
    failed+=("$version")
  fi
  ran=$((ran + 1))
done

if [ "$ran" -eq 0 ]; then
  log "no Python of \"$PYTHONS\" found"
  exit 1
fi
if [ ${#failed[@]} -gt 0 ]; then
  log "failed on Python ${failed[*]}"
  exit 1
fi
log "all passed"
