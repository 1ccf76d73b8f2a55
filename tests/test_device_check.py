"""The GPU check script (benchmarks/device_check.sh): its syntax and a dry run on the CPU."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "device_check.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def test_script_parses():
    result = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_script_needs_a_folder_for_its_figures():
    environment = {key: value for key, value in os.environ.items() if key != "OUT"}
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=environment)
    assert result.returncode != 0 and "set OUT" in result.stderr


def test_dry_run_writes_every_step_to_one_file(tmp_path, fashion_mnist):
    environment = dict(
        os.environ,
        OUT=str(tmp_path),
        DEVICE_CHECK_DRY="1",
        PYTHON=sys.executable,
        OMP_NUM_THREADS="1",
    )
    result = subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, env=environment, timeout=600
    )
    report = (tmp_path / "device_check.txt").read_text()
    assert result.returncode == 0, report
    assert sorted(path.name for path in tmp_path.iterdir()) == ["device_check.txt"]
    for piece in ("## machine", "## the tests that need CUDA", "tests need CUDA",
                  "## bench_training", "NetClassifier", "skorch", "hand loop",
                  "## bench_meta", "FLgamma-SECE", "# done: every step passed"):  # fmt: skip
        assert piece in report, piece
    assert report.count("-> exit status 0 after") == 4
    # every CUDA test is collected (and skips on this CPU); none fails to import
    collected = int(report.split(" tests need CUDA")[0].rsplit("\n", 1)[-1])
    assert collected >= 50 and " error" not in report.split("## bench_training")[0]
