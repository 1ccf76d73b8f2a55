"""smECE against relplot, SECE's binned path against its exact sums, and weight scale."""

import numpy as np
import pytest
import relplot

from sklearn_calib.metrics._functions import _sece, _smece
from sklearn_calib.scoring import (
    smooth_calibration_error,
    smooth_ece,
    smooth_reliability_diagram,
)


def binary_data(n, seed, distortion):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    return (rng.random(n) < distortion(p)).astype(int), p


def multiclass_data(n, k, seed, sharpen=1.0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 2
    proba = np.exp(logits * sharpen)
    proba /= proba.sum(axis=1, keepdims=True)
    truth = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return (truth.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1).clip(0, k - 1), proba


DISTORTIONS = [lambda p: p, lambda p: p**2, lambda p: 0.5 + 0.3 * (p - 0.5), lambda p: p**0.3]


@pytest.mark.parametrize("n", [50, 1000, 30_000])
@pytest.mark.parametrize("distortion", range(len(DISTORTIONS)))
def test_smooth_ece_equals_relplot_on_binary_data(n, distortion):
    y, p = binary_data(n, n + distortion, DISTORTIONS[distortion])
    expected, width = relplot.smECE(p, y.astype(float), return_width=True)
    got, bandwidth = smooth_ece(y, p, convention="positive_class", return_bandwidth=True)
    assert bandwidth == width
    assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("sharpen", [1.0, 2.5])
def test_smooth_ece_top_label_equals_relplot_on_confidence_and_correctness(sharpen):
    y, proba = multiclass_data(5000, 6, 3, sharpen)
    confidence, correct = relplot.multiclass_logits_to_confidences(proba, y, probs=True)
    assert smooth_ece(y, proba) == pytest.approx(relplot.smECE(confidence, correct), abs=1e-12)
    for bandwidth in (0.003, 0.05, 0.4):
        assert smooth_ece(y, proba, bandwidth=bandwidth) == pytest.approx(
            relplot.smECE_sigma(confidence, correct, bandwidth), abs=1e-12
        )


def test_smooth_ece_weights_integer_repeats_and_scale():
    y, p = binary_data(400, 5, DISTORTIONS[1])
    weight = np.random.default_rng(6).integers(0, 4, 400)
    repeated = np.repeat(np.arange(400), weight)
    options = {"convention": "positive_class", "return_bandwidth": True}
    got = smooth_ece(y, p, sample_weight=weight, **options)
    expected = smooth_ece(y[repeated], p[repeated], **options)
    # equal up to the density's epsilon, which follows the mean weight, not the row count
    assert got[1] == expected[1] and got[0] == pytest.approx(expected[0], rel=1e-6)
    # the density's epsilon scales with the mean weight, so the weights' scale is free
    for scale in (1e-12, 1e9):
        scaled = smooth_ece(y, p, sample_weight=weight * scale, **options)
        assert scaled[1] == got[1] and scaled[0] == pytest.approx(got[0], rel=1e-10)


def test_smooth_ece_bad_options():
    y, p = binary_data(20, 0, DISTORTIONS[0])
    for bandwidth, message in [("fixed", "'auto' or a number"), (1e-5, "finite number >= 0.0001")]:
        with pytest.raises(ValueError, match=message):
            smooth_ece(y, p, bandwidth=bandwidth)
    with pytest.raises(ValueError, match="`return_bandwidth` to be a bool"):
        smooth_ece(y, p, return_bandwidth="yes")
    with pytest.raises(ValueError, match="binary problem"):
        smooth_ece([0, 1, 2], np.eye(3), convention="positive_class")
    with pytest.raises(ValueError, match="`convention` to be one of"):
        smooth_ece(y, p, convention="positive")


def test_sece_weights_scale_does_not_change_the_value():
    # An absolute 1e-12 was added to a weighted kernel sum
    y = [0, 1, 1]
    p = [[0.9, 0.1], [0.2, 0.8], [0.35, 0.65]]
    unweighted = smooth_calibration_error(y, p)
    assert unweighted == pytest.approx(0.2166666, abs=1e-6)
    for scale in (1e-12, 1e-9, 1e6):
        for include_self in (True, False):
            weighted = smooth_calibration_error(
                y, p, sample_weight=np.full(3, scale), include_self=include_self
            )
            assert weighted == pytest.approx(
                smooth_calibration_error(y, p, include_self=include_self), rel=1e-12
            )


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("bandwidth", [0.002, 0.01, 0.1])
@pytest.mark.slow
def test_sece_binned_within_the_stated_bound_of_exact(include_self, bandwidth):
    y, proba = multiclass_data(3000, 4, 7, sharpen=1.5)
    weight = np.random.default_rng(8).random(3000)
    for sample_weight in (None, weight):
        options = {"bandwidth": bandwidth, "include_self": include_self}
        exact = smooth_calibration_error(
            y, proba, method="exact", sample_weight=sample_weight, **options
        )
        binned = smooth_calibration_error(
            y, proba, method="binned", sample_weight=sample_weight, **options
        )
        assert abs(binned - exact) <= _sece.SECE_BINNED_TOLERANCE


def test_sece_binned_computes_isolated_rows_exactly(monkeypatch):
    # a lone confidence far from the rest: without self its sums are 0 up to the binned
    # error, so its bound is loose and the row is summed exactly (SACC = 0, as exact)
    proba = np.array([[0.3, 0.35, 0.35]] + [[0.9, 0.05, 0.05]] * 50 + [[0.8, 0.1, 0.1]] * 50)
    y = np.zeros(101, dtype=int)
    y[0] = 1
    calls = []
    exact_sums = _sece._exact_kernel_sums

    def spy(score, outcome, weight, bandwidth, include_self, rows):
        calls.append(rows)
        return exact_sums(score, outcome, weight, bandwidth, include_self, rows)

    monkeypatch.setattr(_sece, "_exact_kernel_sums", spy)
    binned = smooth_calibration_error(y, proba, include_self=False, method="binned")
    assert len(calls) == 1 and 0 in calls[0]
    monkeypatch.setattr(_sece, "_exact_kernel_sums", exact_sums)
    exact = smooth_calibration_error(y, proba, include_self=False, method="exact")
    assert binned == pytest.approx(exact, abs=1e-6)


@pytest.mark.slow
def test_sece_auto_is_exact_when_cheap_and_binned_when_not(monkeypatch):
    y, proba = multiclass_data(3000, 3, 9)
    exact = smooth_calibration_error(y, proba, method="exact")
    assert smooth_calibration_error(y, proba) == exact
    monkeypatch.setattr(_sece, "_EXACT_PAIRS", 10)
    auto = smooth_calibration_error(y, proba)
    assert auto == smooth_calibration_error(y, proba, method="binned") != exact
    assert auto == pytest.approx(exact, abs=1e-6)
    with pytest.raises(ValueError, match="`method` to be one of"):
        smooth_calibration_error(y, proba, method="fft")


def test_sece_positive_class_convention_smooths_the_positive_column():
    y, p = binary_data(300, 11, DISTORTIONS[1])
    h = 0.05
    kernel = np.exp(-((p[:, None] - p[None, :]) ** 2) / (2 * h * h))
    sacc = kernel @ y / (kernel.sum(axis=1) + 1e-12)
    expected = np.mean(np.abs(sacc - p))
    got = smooth_calibration_error(y, p, bandwidth=h, convention="positive_class")
    assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.slow
def test_smooth_reliability_diagram_is_relplots_curve_with_a_band():
    y, p = binary_data(3000, 12, DISTORTIONS[2])
    diagram = smooth_reliability_diagram(
        y, p, convention="positive_class", confidence_level=0.9, random_state=0
    )
    bandwidth = relplot.smECE(p, y.astype(float), return_width=True)[1]
    assert diagram.bandwidth == bandwidth
    kernel = relplot.kernels.ReflectedGaussianKernel(bandwidth)
    expected, _ = kernel.smooth(p, y.astype(float), diagram.mesh)
    np.testing.assert_allclose(diagram.accuracy, expected, atol=1e-10)
    assert np.all(diagram.low <= diagram.accuracy + 1e-12)
    assert np.all(diagram.accuracy <= diagram.high + 1e-12)
    assert diagram.density.mean() == pytest.approx(1.0)


@pytest.mark.slow
def test_smooth_reliability_band_covers_the_population_curve_near_nominal():
    # the population curve at a fixed bandwidth: the same smoother on a huge sample
    y, p = binary_data(200_000, 13, DISTORTIONS[2])
    options = {"convention": "positive_class", "bandwidth": 0.05}
    population = smooth_reliability_diagram(y, p, **options).accuracy
    covered = []
    for seed in range(20):
        y, p = binary_data(2000, 100 + seed, DISTORTIONS[2])
        band = smooth_reliability_diagram(
            y, p, confidence_level=0.9, n_resamples=100, random_state=seed, **options
        )
        covered.append((band.low <= population) & (population <= band.high))
    coverage = np.mean(covered, axis=0)[20:180]
    assert 0.75 <= coverage.mean() <= 0.99


def test_smooth_reliability_diagram_bad_options():
    y, p = binary_data(50, 14, DISTORTIONS[0])
    with pytest.raises(ValueError, match=r"`confidence_level` to be a number in \(0, 1\)"):
        smooth_reliability_diagram(y, p, confidence_level=95)
    with pytest.raises(ValueError, match="`n_resamples` to be an integer >= 10"):
        smooth_reliability_diagram(y, p, confidence_level=0.9, n_resamples=3)
    with pytest.raises(ValueError, match="'auto' or a number"):
        smooth_reliability_diagram(y, p, bandwidth="silverman")
    diagram = smooth_reliability_diagram(y, p, bandwidth=0.1)
    assert diagram.bandwidth == 0.1 and "low" not in diagram


@pytest.mark.parametrize("n_points, bandwidth", [(1001, 0.1), (1000, 0.05), (1201, 0.03)])
def test_mesh_operator_is_the_smoothing_then_the_interpolation(n_points, bandwidth):
    mesh = _smece._smece_mesh(bandwidth)
    operator = _smece.mesh_operator(n_points, bandwidth, mesh)
    grid = np.random.default_rng(0).random((3, n_points))
    expected = _smece.interpolate_on_mesh(_smece.reflected_smoothing(grid, bandwidth), mesh)
    np.testing.assert_allclose(grid @ operator, expected, rtol=1e-12, atol=1e-12)
    # a mesh as fine as the grid: no operator (the replicates are smoothed one by one)
    assert _smece.mesh_operator(1001, 0.01, _smece._smece_mesh(0.01)) is None
