"""Kumar et al.'s debiased L2 error and Gupta & Ramdas' top-label ECE against their packages."""

import calibration as kumar
import numpy as np
import pytest
from mapie.metrics.calibration import top_label_ece

from sklearn_calib.scoring import (
    debiased_calibration_error,
    expected_calibration_error,
    top_label_calibration_error,
)


def multiclass_data(n, k, seed, power=1.0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 2
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    draw = rng.random((n, 1)) ** power
    return (proba.cumsum(axis=1) < draw).sum(axis=1).clip(0, k - 1), proba


@pytest.mark.parametrize("n", [300, 5000])
@pytest.mark.parametrize("power", [1.0, 1.5])
def test_debiased_top_label_equals_kumar(n, power):
    y, proba = multiclass_data(n, 5, n, power)
    expected = kumar.get_top_calibration_error(proba, y, p=2, debias=True)
    assert debiased_calibration_error(y, proba) == pytest.approx(expected, abs=1e-12)
    expected = kumar.lower_bound_scaling_ce(
        proba, y, p=2, debias=True, num_bins=10, mode="top-label"
    )
    assert debiased_calibration_error(y, proba, n_bins=10) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("power", [1.0, 1.3, 2.0])
def test_debiased_binary_positive_class_equals_kumar(power):
    rng = np.random.default_rng(4)
    p = rng.random(3000)
    y = (rng.random(3000) < p**power).astype(int)
    expected = kumar.get_calibration_error(p, y, p=2, debias=True)
    got = debiased_calibration_error(y, p, convention="positive_class")
    assert got == pytest.approx(expected, abs=1e-12)


def test_debiased_is_below_the_plug_in_and_nearly_unbiased_under_calibration():
    rng = np.random.default_rng(5)
    squares, plug_in = [], []
    for _ in range(200):
        p = rng.random(500)
        y = rng.random(500) < p
        options = {"convention": "positive_class"}
        squares.append(debiased_calibration_error(y, p, **options) ** 2)
        plug_in.append(
            expected_calibration_error(y, p, norm="l2", strategy="quantile", **options) ** 2
        )
    # the plug-in squared error of calibrated data is noise of size ~ B / n; the debiased
    # one (clipped at 0) is far smaller on average
    assert np.mean(plug_in) > 0.003
    assert np.mean(squares) < 0.25 * np.mean(plug_in)


def test_debiased_weights_scale_free_and_unit_weights_neutral():
    y, proba = multiclass_data(2000, 4, 6, 1.4)
    weight = np.random.default_rng(7).random(2000)
    value = debiased_calibration_error(y, proba, sample_weight=weight)
    for scale in (1e-12, 1e9):
        assert debiased_calibration_error(y, proba, sample_weight=weight * scale) == pytest.approx(
            value, rel=1e-10
        )
    assert debiased_calibration_error(y, proba, sample_weight=np.full(2000, 2.5)) == pytest.approx(
        debiased_calibration_error(y, proba), rel=1e-12
    )
    # a bin of one weighted sample has no variance estimate and takes no part
    zero = np.where(np.arange(2000) % 2 == 0, 0.0, 1.0)
    assert debiased_calibration_error(y, proba, sample_weight=zero) == pytest.approx(
        debiased_calibration_error(y[1::2], proba[1::2]), rel=1e-12
    )


@pytest.mark.parametrize("n", [200, 5000])
def test_top_label_macro_equals_mapie(n):
    y, proba = multiclass_data(n, 4, n + 1, 1.5)
    # MAPIE's `num_bins` edges make num_bins - 1 bins of width 1 / (num_bins - 1)
    expected = top_label_ece(y, proba, num_bins=16)
    got = top_label_calibration_error(y, proba, average="macro")
    assert got == pytest.approx(expected, abs=1e-12)


def test_top_label_weighted_is_the_expectation_over_samples():
    y, proba = multiclass_data(3000, 4, 8, 1.5)
    predicted = proba.argmax(axis=1)
    expected = sum(
        np.mean(predicted == c)
        * expected_calibration_error(
            (y[predicted == c] == c).astype(int),
            proba[predicted == c].max(axis=1),
            convention="positive_class",
        )
        for c in range(4)
    )
    assert top_label_calibration_error(y, proba) == pytest.approx(expected, abs=1e-12)
    # at least the confidence ECE: it pools classes, whose gaps may cancel
    assert top_label_calibration_error(y, proba) >= expected_calibration_error(y, proba) - 1e-12
    largest = max(
        expected_calibration_error(
            (y[predicted == c] == c).astype(int),
            proba[predicted == c].max(axis=1),
            norm="max",
            convention="positive_class",
        )
        for c in range(4)
    )
    assert top_label_calibration_error(y, proba, norm="max") == pytest.approx(largest)


def test_top_label_quantile_bins_per_class_and_bad_options():
    y, proba = multiclass_data(1000, 3, 9)
    value = top_label_calibration_error(y, proba, strategy="quantile", n_bins=5)
    predicted = proba.argmax(axis=1)
    expected = sum(
        np.mean(predicted == c)
        * expected_calibration_error(
            (y[predicted == c] == c).astype(int),
            proba[predicted == c].max(axis=1),
            strategy="quantile",
            n_bins=5,
            convention="positive_class",
        )
        for c in range(3)
    )
    assert value == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="`average` to be one of"):
        top_label_calibration_error(y, proba, average="micro")
    with pytest.raises(ValueError, match="`n_bins` to be an integer"):
        debiased_calibration_error(y, proba, n_bins=0)
    with pytest.raises(ValueError, match="`strategy` to be one of"):
        debiased_calibration_error(y, proba, strategy="equal")
