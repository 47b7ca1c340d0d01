#!/usr/bin/env bash
# One-command developer set-up for pyroki_ros on Debian 12 (or any Linux with Python 3.11).
#
#   ./setup.sh            # then: .venv/bin/python -m pytest -q
#
# 1. installs missing system prerequisites with apt-get (python3-venv, python3-dev, cmake, g++,
#    make); skipped entirely when they are all present;
# 2. creates .venv (Python 3.11; override with PYTHON=/path/to/python3.11) and installs the
#    pinned requirements.txt (ROS 2 Kilted wheels from PyPI, JAX CPU, test tools);
# 3. generates and compiles the ROS interfaces (msg/, srv/) with CMake into the venv prefix
#    (PYROKI_ROS_INSTALL_PYTHON=OFF: generated code only);
# 4. installs this repo editable (`pip install -e . ... editable_mode=compat`): edits to
#    pyroki_ros/*.py take effect without rebuilding anything.
#
# Afterwards `.venv/bin/python -c "import pyroki_ros, pyroki_ros.srv"` works from any directory
# with no environment variables. Idempotent: every step is skipped when its inputs (hashed into
# stamp files under .venv/) are unchanged. Logs of the CMake build: .venv/build/*.log.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
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

# --- check -----------------------------------------------------------------------------------
(cd / && "$PY" -c 'import pyroki_ros, pyroki_ros.msg, pyroki_ros.srv') \
  || die "import check failed: .venv/bin/python -c 'import pyroki_ros, pyroki_ros.msg, pyroki_ros.srv'"
log "done. Run the tests with: .venv/bin/python -m pytest -q"
