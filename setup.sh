#!/usr/bin/env bash
# One-command developer set-up for pyroki_ros on Debian 12 (or any Linux with Python 3.11).
#
#   ./setup.sh            # then: .venv/bin/python -m pytest -q
#   ./setup.sh --cuda     # the same, plus JAX's CUDA 12 plugin at the pinned JAX version
#                         # (--cuda=13: CUDA 13); --help: usage
#   ./setup.sh --browser  # also Debian's Chromium and playwright, for test/test_viewer.py's
#                         # browser test (skipped without them)
#   PYROKI_ROS_SETUP_DRY_RUN=1 ./setup.sh --cuda   # print the JAX pip commands, change nothing
#
# 1. installs missing system prerequisites with apt-get (python3-venv, python3-dev, cmake, g++,
#    make); skipped entirely when they are all present;
# 2. creates .venv (Python 3.11; override with PYTHON=/path/to/python3.11) and installs the
#    pinned requirements.txt (ROS 2 Kilted wheels from PyPI, JAX CPU, test tools);
# 3. generates and compiles the ROS interfaces (msg/, srv/) with CMake into the venv prefix
#    (PYROKI_ROS_INSTALL_PYTHON=OFF: generated code only);
# 4. installs this repo editable (`pip install -e . ... editable_mode=compat`): edits to
#    pyroki_ros/*.py take effect without rebuilding anything;
# 5. makes .venv an ament prefix (share/pyroki_ros/{launch,config}, lib/pyroki_ros/, the venv on
#    AMENT_PREFIX_PATH for its Pythons and, through bin/activate, its shells): launch_ros and
#    ament_index_python find pyroki_ros there as in a colcon install.
#
# Afterwards `.venv/bin/python -c "import pyroki_ros, pyroki_ros.srv"` works from any directory
# with no environment variables. Idempotent: every step is skipped when its inputs (hashed into
# stamp files under .venv/) are unchanged. Logs of the CMake build: .venv/build/*.log.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"

# --- arguments -------------------------------------------------------------------------------
usage() {
  cat <<'EOF'
usage: ./setup.sh [--cuda | --cuda=12 | --cuda=13] [--browser] [--help]

  (no option)  .venv with CPU-only JAX (requirements.txt)
  --cuda       also JAX's CUDA 12 plugin and NVIDIA wheels at the pinned JAX version:
               pip install "jax[cuda12]==<jax pin of requirements.txt>" (needs an NVIDIA driver
               for CUDA 12; check with: .venv/bin/python -c "import jax; print(jax.devices())")
  --cuda=13    the same with CUDA 13 ("jax[cuda13]==<pin>")
  --browser    also the web viewer's browser test tools: Debian's chromium and chromium-driver
               (apt, when /usr/bin/chromium is missing) and requirements-browser.txt
               (playwright, driving that Chromium; its own browser download is not used)

PYROKI_ROS_SETUP_DRY_RUN=1 prints the JAX pip commands and exits without changing anything.
EOF
}
CUDA=""  # "", 12 or 13: the CUDA major version of JAX's GPU plugin
BROWSER=""  # 1: Chromium + playwright for the viewer's browser test
for arg in "$@"; do
  case "$arg" in
    --cuda | --cuda=12) CUDA=12 ;;
    --cuda=13) CUDA=13 ;;
    --browser) BROWSER=1 ;;
    -h | --help) usage; exit 0 ;;
    *) printf '[setup] ERROR: unknown argument %s\n' "$arg" >&2; usage >&2; exit 2 ;;
  esac
done
# The GPU build is JAX's own extra at the same version as the CPU pin, so that jax, jaxlib and
# the plugin always match (jax[cudaNN]==X pins jaxlib==X and jax-cudaNN-plugin==X).
JAX_PIN="$(sed -n 's/^jax==\([^[:space:]#]*\).*/\1/p' requirements.txt)"
[ -n "$JAX_PIN" ] || { printf '[setup] ERROR: no jax== pin in requirements.txt\n' >&2; exit 1; }
CUDA_REQ=""
[ -z "$CUDA" ] || CUDA_REQ="jax[cuda${CUDA}]==${JAX_PIN}"
if [ -n "${PYROKI_ROS_SETUP_DRY_RUN:-}" ]; then
  printf '[setup] dry run, would run:\n'
  printf '.venv/bin/python -m pip install -r requirements.txt  # jax==%s (CPU)\n' "$JAX_PIN"
  [ -z "$CUDA_REQ" ] || printf '.venv/bin/python -m pip install "%s"\n' "$CUDA_REQ"
  exit 0
fi

PYTHON="${PYTHON:-python3.11}"
VENV="$ROOT/.venv"
BUILD="$VENV/build/pyroki_ros"
LOGS="$VENV/build"
STAMPS="$VENV/.stamps"

log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }
hash_files() {  # content (and names) of the given files; missing ones count as empty
  local f
  for f in "$@"; do printf '%s\n' "$f"; if [ -f "$f" ]; then cat "$f"; fi; done | sha256sum | cut -d' ' -f1
}
stamp_ok() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }
stamp_set() { mkdir -p "$STAMPS"; printf '%s\n' "$2" >"$STAMPS/$1"; }
run_logged() {  # run_logged <log file> <command...>: quiet; tail of the log on failure
  local logfile="$1"; shift
  if ! "$@" >"$logfile" 2>&1; then
    printf '[setup] FAILED: %s\n[setup] last lines of %s:\n' "$*" "$logfile" >&2
    tail -n 40 "$logfile" >&2
    exit 1
  fi
}

# Anything from a sourced ROS install or another venv could leak into the build.
unset AMENT_PREFIX_PATH CMAKE_PREFIX_PATH COLCON_PREFIX_PATH PYTHONPATH PYTHONHOME VIRTUAL_ENV \
  _ROS_WHEELS_BOOTSTRAP_COMPLETE || true

# --- 1. system prerequisites -----------------------------------------------------------------
missing=()
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  missing+=(python3.11 python3.11-venv python3.11-dev)
else
  "$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null \
    || die "$PYTHON is not Python 3.11 (set PYTHON=/path/to/python3.11)"
  "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3.11-venv)
  "$PYTHON" -c 'import os, sysconfig; assert os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' \
    >/dev/null 2>&1 || missing+=(python3.11-dev)
fi
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing system packages: ${missing[*]}"
  command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get; install them by hand"
  SUDO=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "missing ${missing[*]}; run as root or install sudo"
    SUDO=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  run_logged /tmp/pyroki_ros_apt.log "${SUDO[@]}" apt-get update
  run_logged /tmp/pyroki_ros_apt.log "${SUDO[@]}" apt-get install -y --no-install-recommends \
    "${missing[@]}"
fi

# --- 2. virtual environment + pinned requirements --------------------------------------------
if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
  log "removing broken $VENV"; rm -rf "$VENV"
fi
mkdir -p "$VENV"
if command -v flock >/dev/null 2>&1; then  # one set-up at a time per checkout
  exec 9>"$VENV/.setup.lock"
  flock -w 1800 9 || die "another ./setup.sh holds $VENV/.setup.lock"
fi
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV with $("$PYTHON" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
  "$PYTHON" -m venv "$VENV"
  rm -rf "$STAMPS" "$BUILD"
fi
PY="$VENV/bin/python"
mkdir -p "$LOGS"

req_hash="$(hash_files requirements.txt; "$PY" -c 'import sys; print(sys.version)')"
if stamp_ok requirements "$req_hash"; then
  log "requirements unchanged, skipping pip"
else
  log "installing requirements.txt into .venv (first time: ~1-2 min, ~1 GB)"
  # setuptools/wheel first so that sdists (empy) build as wheels
  run_logged "$LOGS/pip-bootstrap.log" "$PY" -m pip install --disable-pip-version-check \
    $(grep -E '^(setuptools|wheel)==' requirements.txt)
  run_logged "$LOGS/pip.log" "$PY" -m pip install --disable-pip-version-check -r requirements.txt
  stamp_set requirements "$req_hash"
  rm -rf "$BUILD"  # new ROS wheels: configure from scratch
fi
# JAX on the GPU (--cuda): the plugin beside the pinned CPU jax/jaxlib, same version.
if [ -n "$CUDA_REQ" ]; then
  cuda_hash="$(echo "$CUDA_REQ"; echo "$req_hash")"
  if stamp_ok cuda "$cuda_hash"; then
    log "$CUDA_REQ unchanged, skipping"
  else
    log "installing $CUDA_REQ (JAX's CUDA plugin and NVIDIA wheels, ~3 GB)"
    run_logged "$LOGS/pip-cuda.log" "$PY" -m pip install --disable-pip-version-check "$CUDA_REQ"
    stamp_set cuda "$cuda_hash"
  fi
fi

# --- 3. ROS interfaces: rosidl via CMake into the venv prefix --------------------------------
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
idl_hash="$(hash_files CMakeLists.txt package.xml cmake/* msg/*.msg srv/*.srv; echo "$req_hash")"
if stamp_ok interfaces "$idl_hash" && [ -f "$SITE/pyroki_ros/srv/__init__.py" ] \
    && [ ! -e "$SITE/pyroki_ros/__init__.py" ]; then
  log "interfaces unchanged, skipping CMake build"
else
  log "building ROS interfaces (msg/, srv/) with CMake (first time: ~2-4 min on 2 cores)"
  start=$SECONDS  # incremental when $BUILD exists
  run_logged "$LOGS/cmake-configure.log" cmake -S "$ROOT" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
    -DCMAKE_INSTALL_PREFIX="$VENV" -DPython3_EXECUTABLE="$PY" \
    -DPYROKI_ROS_INSTALL_PYTHON=OFF
  run_logged "$LOGS/cmake-build.log" cmake --build "$BUILD" -j"$(nproc)"
  run_logged "$LOGS/cmake-install.log" cmake --install "$BUILD"
  log "interfaces built in $((SECONDS - start)) s"
  stamp_set interfaces "$idl_hash"
fi

# --- 4. editable install of the Python package -----------------------------------------------
edit_hash="$(hash_files setup.py package.xml resource/* launch/* config/*; echo "$req_hash")"
if stamp_ok editable "$edit_hash" && compgen -G "$SITE/__editable__.pyroki_ros-*.pth" >/dev/null; then
  log "editable install unchanged, skipping"
else
  log "pip install -e . (editable_mode=compat)"
  run_logged "$LOGS/pip-editable.log" "$PY" -m pip install --disable-pip-version-check \
    --no-deps --no-build-isolation --use-pep517 -e "$ROOT" --config-settings editable_mode=compat
  stamp_set editable "$edit_hash"
fi

# --- 4b. optional: the browser test's tools (--browser) ----------------------------------------
if [ -n "$BROWSER" ]; then
  if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    log "installing Debian's chromium and chromium-driver (the viewer's browser test)"
    command -v apt-get >/dev/null 2>&1 || die "--browser needs apt-get (or install chromium by hand)"
    SUDO=()
    if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    run_logged /tmp/pyroki_ros_apt.log "${SUDO[@]}" apt-get update
    run_logged /tmp/pyroki_ros_apt.log "${SUDO[@]}" apt-get install -y --no-install-recommends \
      chromium chromium-driver
  fi
  browser_hash="$(hash_files requirements-browser.txt; echo "$req_hash")"
  if stamp_ok browser "$browser_hash"; then
    log "browser test tools unchanged, skipping"
  else
    log "installing requirements-browser.txt (playwright)"
    run_logged "$LOGS/pip-browser.log" "$PY" -m pip install --disable-pip-version-check \
      -r requirements-browser.txt
    stamp_set browser "$browser_hash"
  fi
fi

# --- 5. the venv as an ament prefix (launch_ros, ament_index_python) -------------------------
# launch_ros' Node(package=, executable=) and get_package_share_directory() search each prefix
# of AMENT_PREFIX_PATH for share/ament_index/resource_index/packages/<pkg>,
# share/<pkg>/{package.xml,launch,config} and lib/<pkg>/<executable>, as colcon installs them
# (CMakeLists.txt). The marker and package.xml come from step 3 (ament_package); the files of
# launch/ and config/ are links to this checkout's (edits count at once, like the editable
# install; a new file there needs ./setup.sh again); the
# node's executable is its console script. Cheap, so redone on every run.
SHARE="$VENV/share/pyroki_ros"
MARKER="$VENV/share/ament_index/resource_index/packages/pyroki_ros"
mkdir -p "$SHARE" "$(dirname "$MARKER")" "$VENV/lib/pyroki_ros"
[ -e "$MARKER" ] || : >"$MARKER"
[ -f "$SHARE/package.xml" ] || cp package.xml "$SHARE/package.xml"
for dir in launch config; do
  # Real folders of per-file links: `ros2 launch <pkg> <file>` finds the file with os.walk,
  # which does not enter a linked folder (an older set-up linked the whole folder).
  if [ -L "$SHARE/$dir" ]; then rm -f "$SHARE/$dir"; fi
  mkdir -p "$SHARE/$dir"
  find "$SHARE/$dir" -maxdepth 1 -type l -delete
  for file in "$ROOT/$dir"/*; do ln -sfn "$file" "$SHARE/$dir/"; done
done
ln -sfn ../../bin/pyroki_ros_node "$VENV/lib/pyroki_ros/pyroki_ros_node"
# Every Python of the venv (console scripts, launch) sees the venv on AMENT_PREFIX_PATH without
# activation, as ros_wheels_bootstrapper.pth gives it LD_LIBRARY_PATH.
printf '%s\n' "import os, sys; _p = [d for d in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if d]; sys.prefix in _p or os.environ.__setitem__('AMENT_PREFIX_PATH', os.pathsep.join([sys.prefix, *_p]))" \
  >"$SITE/pyroki_ros_ament_prefix.pth"
# Shells: `. .venv/bin/activate` puts the venv on AMENT_PREFIX_PATH (ros2 launch and other
# non-Python tools); deactivate restores it. Replaced on every run (never appended twice).
sed -i '/^# >>> pyroki_ros ament prefix/,/^# <<< pyroki_ros ament prefix <<</d' "$VENV/bin/activate"
cat >>"$VENV/bin/activate" <<'HOOK'
# >>> pyroki_ros ament prefix (added by ./setup.sh) >>>
# (activating twice keeps the value from before the first: activate's own deactivate ran)
if [ -z "${_PYROKI_ROS_OLD_AMENT_PREFIX_PATH+x}" ]; then
  _PYROKI_ROS_OLD_AMENT_PREFIX_PATH="${AMENT_PREFIX_PATH-}"
fi
case ":${AMENT_PREFIX_PATH-}:" in
  *":$VIRTUAL_ENV:"*) ;;
  *) AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
     export AMENT_PREFIX_PATH ;;
esac
eval "_pyroki_ros_venv_$(typeset -f deactivate)"
deactivate () {
  if [ -n "${_PYROKI_ROS_OLD_AMENT_PREFIX_PATH-}" ]; then
    AMENT_PREFIX_PATH="$_PYROKI_ROS_OLD_AMENT_PREFIX_PATH"; export AMENT_PREFIX_PATH
  else
    unset AMENT_PREFIX_PATH
  fi
  unset _PYROKI_ROS_OLD_AMENT_PREFIX_PATH
  _pyroki_ros_venv_deactivate "$@"
  if [ "${1-}" != nondestructive ]; then unset -f _pyroki_ros_venv_deactivate; fi
}
# <<< pyroki_ros ament prefix <<<
HOOK

# --- check -----------------------------------------------------------------------------------
(cd / && "$PY" -c 'import pyroki_ros, pyroki_ros.msg, pyroki_ros.srv') \
  || die "import check failed: .venv/bin/python -c 'import pyroki_ros, pyroki_ros.msg, pyroki_ros.srv'"
(cd / && "$PY" -c 'import sys; from ament_index_python.packages import get_package_share_directory as g; assert g("pyroki_ros") == sys.prefix + "/share/pyroki_ros"') \
  || die "ament prefix check failed: get_package_share_directory('pyroki_ros') is not in $VENV"
log "done. Run the tests with: .venv/bin/python -m pytest -q"
