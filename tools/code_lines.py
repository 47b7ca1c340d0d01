"""Code lines of the package per part, at one or more git revisions (issue 15's size measure).

    .venv/bin/python tools/code_lines.py 629dcc7 HEAD

A code line holds a token that is not a comment or a docstring (module, class or function):
blank lines, comments and docstrings do not count. Parts: each subpackage and each top-level
module of pyroki_ros; "core" is every part but ros.
"""

from __future__ import annotations

import ast
import collections
import io
import subprocess
import sys
import tokenize

SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}


def code_lines(source: str) -> int:
    """The number of code lines of Python ``source``."""
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            text = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            if text and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in SKIPPED and token.type != tokenize.ENDMARKER:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def parts(revision: str) -> dict[str, int]:
    """Code lines per part of pyroki_ros at ``revision``."""
    git = lambda *a: subprocess.run(["git", *a], check=True, capture_output=True, text=True).stdout
    counts: collections.Counter[str] = collections.Counter()
    for path in git("ls-tree", "-r", "--name-only", revision, "pyroki_ros").split():
        if path.endswith(".py"):
            counts[path.split("/")[1]] += code_lines(git("show", f"{revision}:{path}"))
    return dict(sorted(counts.items()))


def main(revisions: list[str]) -> None:
    for revision in revisions or ["HEAD"]:
        counts = parts(revision)
        core = sum(v for k, v in counts.items() if k != "ros")
        print(f"{revision}: core {core}, ros {counts.get('ros', 0)}")
        print("  " + ", ".join(f"{k} {v}" for k, v in counts.items() if k != "ros"))


if __name__ == "__main__":
    main(sys.argv[1:])
