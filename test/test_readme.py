"""The README's Python snippet runs as written (so the documented API stays true)."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_snippets_run(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert blocks, "README has no python snippet"
    script = tmp_path / "snippet.py"
    script.write_text("\n".join(blocks))
    done = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout, installed or not
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # The batch solve printed its success rate first on its line: all 100 reachable targets.
    assert "1.0 (100, 8)" in done.stdout, done.stdout
