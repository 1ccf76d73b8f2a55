"""The code's style: ruff's lint rules and formatter (pyproject.toml's settings) hold."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ["sklearn_calib", "tests", "benchmarks", "examples", "docs"]


def ruff(*arguments):
    return subprocess.run(
        [sys.executable, "-m", "ruff", *arguments, *CHECKED],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def test_lint_rules_hold():
    result = ruff("check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_code_is_formatted():
    result = ruff("format", "--check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
