"""Importing the package and its metrics, and scoring predictions, loads neither torch nor
skorch (nor numba, on small input): the top-level names are imported when first used."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import sklearn_calib
from sklearn_calib.metrics import expected_calibration_error, smooth_ece
from sklearn_calib.metrics._core._scores import _confidence

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import sys

    import numpy as np

    import sklearn_calib
    import sklearn_calib.metrics
    from sklearn_calib import calibration_report, expected_calibration_error, smooth_ece
    from sklearn_calib.metrics import CalibrationAccumulator


    def loaded():
        return [name for name in ("torch", "skorch", "numba") if name in sys.modules]


    print(loaded())
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(3), 2000)
    y = rng.integers(0, 3, 2000)
    print(round(expected_calibration_error(y, proba), 6), round(smooth_ece(y, proba), 6))
    calibration_report(y, proba, n_resamples=50, random_state=0)
    CalibrationAccumulator(n_resamples=20).update(y, proba).compute()
    print(loaded())
    sklearn_calib.TemperatureScaling
    print(loaded())
    sklearn_calib.NetClassifier
    print(loaded())
    """
)


def run(script):
    env = {name: value for name, value in os.environ.items() if name != "SKLEARN_CALIB_NUMBA"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


@pytest.mark.slow
def test_the_metrics_load_neither_torch_nor_skorch_until_an_estimator_is_used():
    lines = run(SCRIPT)
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(3), 2000)
    y = rng.integers(0, 3, 2000)
    expected = f"{round(expected_calibration_error(y, proba), 6)} {round(smooth_ece(y, proba), 6)}"
    assert lines == ["[]", expected, "[]", "['torch']", "['torch', 'skorch']"]


def test_every_top_level_name_is_listed_and_imported_when_first_used():
    assert set(sklearn_calib.__all__) <= set(dir(sklearn_calib))
    for name in sklearn_calib.__all__:
        assert getattr(sklearn_calib, name) is not None, name
    for part in ("calibrators", "datasets", "estimators", "losses", "metrics", "scoring"):
        assert getattr(sklearn_calib, part).__name__ == f"sklearn_calib.{part}"
        assert part in dir(sklearn_calib)
    assert sklearn_calib.TemperatureScaling is sklearn_calib.calibrators.TemperatureScaling
    with pytest.raises(AttributeError, match="has no attribute 'TemperatureScale'"):
        sklearn_calib.TemperatureScale  # noqa: B018


@pytest.mark.parametrize("n_classes", [2, 3, 16, 17])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_the_row_maxima_taken_without_torch_equal_numpy_s_reduction(n_classes, layout):
    rng = np.random.default_rng(n_classes)
    proba = rng.dirichlet(np.ones(n_classes), 40_000).astype(np.float32)
    proba[:100] = 1 / n_classes  # ties everywhere
    if layout == "F":
        proba = np.asfortranarray(proba)
    elif layout == "strided":
        proba = np.repeat(proba, 2, axis=0)[::2]
    confidence = _confidence(proba)
    assert confidence.dtype == np.float32
    assert np.array_equal(confidence, proba.max(axis=1))
