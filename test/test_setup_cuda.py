"""``./setup.sh --cuda`` and the ``cuda`` extra install JAX's CUDA build at the pinned version.

Checked without installing anything: ``PYROKI_ROS_SETUP_DRY_RUN=1`` makes setup.sh print the
JAX pip commands and stop before any other step; setup.py's extras are read by running it
with ``setuptools.setup`` replaced.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIN = re.search(r"^jax==(\S+)", (ROOT / "requirements.txt").read_text(), re.MULTILINE)[1]


def _setup(*args: str, dry_run: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if dry_run:
        env["PYROKI_ROS_SETUP_DRY_RUN"] = "1"
    return subprocess.run(
        ["bash", str(ROOT / "setup.sh"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cuda_installs_the_pinned_jax_with_the_cuda12_plugin():
    done = _setup("--cuda")
    assert done.returncode == 0, done.stderr
    assert f'pip install "jax[cuda12]=={PIN}"' in done.stdout, done.stdout
    assert f"jax=={PIN} (CPU)" in done.stdout


def test_cuda13_and_cpu_only():
    done = _setup("--cuda=13")
    assert done.returncode == 0 and f'"jax[cuda13]=={PIN}"' in done.stdout, done.stdout
    done = _setup()
    assert done.returncode == 0 and "cuda" not in done.stdout, done.stdout


def test_help_and_unknown_arguments():
    done = _setup("--help", dry_run=False)  # prints and exits before any step
    assert done.returncode == 0 and "--cuda" in done.stdout and "jax[cuda12]" in done.stdout
    done = _setup("--cdua", dry_run=False)
    assert done.returncode == 2 and "unknown argument --cdua" in done.stderr


def test_setup_py_cuda_extra_names_the_same_pin():
    code = (
        "import runpy, setuptools\n"
        "captured = {}\n"
        "setuptools.setup = lambda **kw: captured.update(kw)\n"
        "runpy.run_path('setup.py')\n"
        "print(captured['extras_require']['cuda'], captured['extras_require']['cuda13'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == f"['jax[cuda12]=={PIN}'] ['jax[cuda13]=={PIN}']"
