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


@pytest.mark.slow
def test_dry_run_writes_every_step_to_one_file(tmp_path, fashion_mnist):
    # The GPU machine lacks some reference packages: a shadow module makes relplot missing
    # here too, and its test module is reported as not collected without failing the step.
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "relplot.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'relplot'\", name='relplot')\n"
    )
    out = tmp_path / "out"
    path = os.environ.get("PYTHONPATH")
    environment = dict(
        os.environ,
        OUT=str(out),
        DEVICE_CHECK_DRY="1",
        PYTHON=sys.executable,
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join([str(shadow), path]) if path else str(shadow),
    )
    result = subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, env=environment, timeout=600
    )
    report = (out / "device_check.txt").read_text()
    assert result.returncode == 0, report
    assert sorted(path.name for path in out.iterdir()) == ["device_check.txt"]
    for piece in ("## machine", "## the tests that need CUDA", "tests need CUDA",
                  "## bench_training", "NetClassifier", "skorch", "hand loop",
                  "## bench_meta", "FLgamma-SECE", "# done: every step passed"):  # fmt: skip
        assert piece in report, piece
    # four steps, and a fifth that installs the wheels where `prepare` left them
    assert report.count("-> exit status 0 after") == report.count("\n## ") >= 4
    # every CUDA test is collected (and skips on this CPU); only the module that needs the
    # missing reference package is not collected, and it does not fail the step
    tests_step = report.split("## bench_training")[0]
    collected = int(tests_step.split(" tests need CUDA")[0].rsplit("\n", 1)[-1])
    assert collected >= 50
    assert "not collected (reference package 'relplot' missing here): tests/test_smooth.py" in (
        tests_step
    )
    assert tests_step.count("not collected (") == 1 and "1 error" in tests_step
