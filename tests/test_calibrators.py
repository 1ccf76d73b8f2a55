import pickle
import warnings

import joblib
import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar
from scipy.special import expit, log_softmax
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.utils._testing import create_memmap_backed_data

from sklearn_calib.calibrators import (
    BetaCalibration,
    BiasCorrectedTemperatureScaling,
    EnsembleTemperatureScaling,
    HistogramBinning,
    IsotonicCalibration,
    MatrixScaling,
    PlattScaling,
    QuadraticScaling,
    ScalingBinning,
    StructuredMatrixScaling,
    StructuredVectorScaling,
    TemperatureScaling,
    VectorScaling,
    VennAbersCalibrator,
)
from sklearn_calib.calibrators._base import BaseCalibrator, softmax
from sklearn_calib.calibrators._temperature_grid import grid_ece
from sklearn_calib.metrics._core._binning import assign_bins, quantile_bin_edges, uniform_bin_edges
from sklearn_calib.scoring import expected_calibration_error, reliability_diagram

from estimator_registry import CALIBRATORS as CALIBRATOR_NAMES
from estimator_registry import LABEL_SHIFT_ADAPTERS, tiny

#: Every calibrator of the registry, and the forms with other code paths.
ALL_CALIBRATORS = [tiny(name) for name in CALIBRATOR_NAMES] + [
    TemperatureScaling(objective="ece", grid=np.linspace(0.2, 5, 25)),
    HistogramBinning(strategy="quantile"),
    HistogramBinning(multi_class="classwise"),
    HistogramBinning(strategy="quantile", multi_class="classwise"),
    ScalingBinning(multi_class="classwise"),
    EnsembleTemperatureScaling(loss="nll"),
    VennAbersCalibrator(multi_class="one_vs_one"),
]
IDS = [repr(c) for c in ALL_CALIBRATORS]

#: Every estimator of scores: the calibrators and the label-shift adapters (which calibrate
#: before they adapt), for the walks of what they share (fitting, checking scores).
SCORE_ESTIMATORS = ALL_CALIBRATORS + [tiny(name) for name in LABEL_SHIFT_ADAPTERS]
SCORE_IDS = [repr(c) for c in SCORE_ESTIMATORS]


def overconfident_logits(n_samples, n_classes, scale=3.0, seed=0, dtype=np.float64):
    """Logits whose labels are drawn from softmax(logits / scale): the NLL-optimal T ~ scale."""
    rng = np.random.default_rng(seed)
    true_logits = rng.normal(size=(n_samples, n_classes)) * 1.5
    proba = np.exp(log_softmax(true_logits, axis=1))
    y = (proba.cumsum(axis=1) < rng.uniform(size=(n_samples, 1))).sum(axis=1)
    return (scale * true_logits).astype(dtype), np.minimum(y, n_classes - 1)


def nll(logits, y, temperature=1.0, sample_weight=None):
    log_proba = log_softmax(np.asarray(logits, dtype=np.float64) / temperature, axis=1)
    return -np.average(log_proba[np.arange(len(y)), y], weights=sample_weight)


class _Scores(ClassifierMixin, BaseEstimator):
    """A classifier whose decision function returns its input: feeds fixed scores to sklearn."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def decision_function(self, X):
        return np.asarray(X)

    def predict(self, X):
        scores = np.asarray(X)
        return self.classes_[(scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(1)]


def sklearn_temperature(scores, y):
    """scikit-learn's temperature calibration of fixed scores; returns the fitted CCCV."""
    frozen = FrozenEstimator(_Scores().fit(scores, y))
    return CalibratedClassifierCV(frozen, method="temperature").fit(scores, y)


# ---------------------------------------------------------------- temperature scaling


@pytest.mark.parametrize("weighted", [False, True])
def test_ts_nll_matches_brute_force_minimisation(weighted):
    logits, y = overconfident_logits(400, 5, seed=1)
    weight = np.random.default_rng(2).uniform(0, 3, size=len(y)) if weighted else None
    ts = TemperatureScaling().fit(logits, y, sample_weight=weight)
    brute = minimize_scalar(
        lambda log_t: nll(logits, y, np.exp(log_t), weight),
        bounds=(np.log(0.05), np.log(50)),
        method="bounded",
        options={"xatol": 1e-12},
    )
    assert ts.temperature_ == pytest.approx(np.exp(brute.x), rel=1e-6)
    assert 2.0 < ts.temperature_ < 4.5
    assert (
        nll(logits, y, ts.temperature_, weight) <= nll(logits, y, np.exp(brute.x), weight) + 1e-14
    )


@pytest.mark.parametrize("n_classes", [3, 6])
def test_ts_nll_matches_scikit_learn_temperature_calibration(n_classes):
    logits, y = overconfident_logits(300, n_classes, seed=3)
    ts = TemperatureScaling().fit(logits, y)
    cccv = sklearn_temperature(logits, y)
    ours = nll(logits, y, ts.temperature_)
    theirs = -np.mean(np.log(cccv.predict_proba(logits)[np.arange(len(y)), y]))
    assert ours == pytest.approx(theirs, abs=1e-4)
    assert ours <= theirs + 1e-12
    np.testing.assert_allclose(ts.predict_proba(logits), cccv.predict_proba(logits), atol=1e-3)


def test_ts_binary_decision_function_matches_scikit_learn():
    # A 1-D score d is read as the logits (0, d); scikit-learn reads it as (-d, d), so its
    # temperature is twice ours and both reach the same NLL.
    logits, y = overconfident_logits(300, 2, seed=4)
    decision = logits[:, 1] - logits[:, 0]
    ts = TemperatureScaling().fit(decision, y)
    np.testing.assert_allclose(
        ts.predict_proba(decision),
        TemperatureScaling().fit(logits, y).predict_proba(logits),
        atol=1e-9,
    )
    cccv = sklearn_temperature(decision, y)
    assert 1 / cccv.calibrated_classifiers_[0].calibrators[0].beta_ == pytest.approx(
        2 * ts.temperature_, rel=1e-4
    )
    np.testing.assert_allclose(ts.predict_proba(decision), cccv.predict_proba(decision), atol=1e-5)


def test_ts_float32_and_large_inputs_reach_the_float64_optimum():
    # 70 000 rows take the subsample start; float32 rows are summed in float32.
    logits, y = overconfident_logits(70_000, 3, seed=5)
    t64 = TemperatureScaling().fit(logits, y).temperature_
    t32 = TemperatureScaling().fit(logits.astype(np.float32), y).temperature_
    assert t32 == pytest.approx(t64, rel=1e-5)
    small = logits[::50]
    brute = minimize_scalar(
        lambda log_t: nll(small, y[::50], np.exp(log_t)),
        bounds=(-3, 3),
        method="bounded",
        options={"xatol": 1e-12},
    )
    assert TemperatureScaling().fit(small, y[::50]).temperature_ == pytest.approx(
        np.exp(brute.x), rel=1e-6
    )


def test_ts_on_probabilities_uses_clipped_log_probabilities():
    logits, y = overconfident_logits(200, 4, seed=6)
    proba = np.exp(log_softmax(logits, axis=1))
    proba[0] = [1.0, 0.0, 0.0, 0.0]
    ts = TemperatureScaling(input="probabilities").fit(proba, y)
    log_proba = np.log(np.maximum(proba, 1e-12))
    expected = TemperatureScaling().fit(log_proba, y)
    assert ts.temperature_ == pytest.approx(expected.temperature_, rel=1e-12)
    np.testing.assert_allclose(ts.predict_proba(proba), expected.predict_proba(log_proba))


def test_ts_separable_scores_stop_at_the_bound_with_a_warning():
    logits = np.array([[2.0, 0.0], [0.0, 1.0], [3.0, -1.0], [-2.0, 2.0]])
    with pytest.warns(ConvergenceWarning, match="below the searched range.*separate"):
        ts = TemperatureScaling().fit(logits, [0, 1, 0, 1])
    assert ts.temperature_ == pytest.approx(1e-4)


def test_ts_scores_against_the_labels_stop_at_the_upper_bound_with_a_warning():
    logits = np.array([[2.0, 0.0], [0.0, 1.0], [3.0, -1.0], [-2.0, 2.0]])
    with pytest.warns(ConvergenceWarning, match="above the searched range.*do not favour"):
        ts = TemperatureScaling().fit(logits, [1, 0, 1, 0])
    assert ts.temperature_ == pytest.approx(1e4)
    np.testing.assert_allclose(ts.predict_proba(logits), 0.5, atol=1e-3)


@pytest.mark.parametrize(
    "calibrator",
    [TemperatureScaling(), ScalingBinning(), EnsembleTemperatureScaling(loss="nll")],
    ids=repr,
)
def test_scores_tied_in_every_row_give_temperature_one_with_a_warning(calibrator):
    y = np.arange(40) % 3
    for scores in (np.zeros((40, 3)), np.tile([[2.0], [-1.0], [0.5], [7.0]], (10, 3))):
        with pytest.warns(UserWarning, match="does not depend on the temperature"):
            fitted = clone(calibrator).fit(scores, y)
        assert fitted.temperature_ == 1.0
        np.testing.assert_allclose(fitted.predict_proba(scores), 1 / 3)


def test_saturated_rows_beside_a_tied_row_give_the_lower_bound_not_a_tie_warning():
    # Only the first row ties; the others are right by 50 logits, so the derivative of the
    # NLL rounds to 0 at T = 1 although the NLL still decreases towards T -> 0.
    scores = np.array([[0.0, 0.0], [50.0, 0.0], [0.0, 50.0]])
    with pytest.warns(ConvergenceWarning, match="below the searched range"):
        fitted = TemperatureScaling().fit(scores, [0, 0, 1])
    assert fitted.temperature_ == pytest.approx(1e-4)
    # the tied row has zero weight: all the rows that count are saturated, so no tie warning
    with pytest.warns(ConvergenceWarning, match="below the searched range"):
        TemperatureScaling().fit(scores, [0, 0, 1], sample_weight=[0.0, 1.0, 1.0])


@pytest.mark.parametrize("calibrator", [TemperatureScaling(), HistogramBinning()], ids=repr)
def test_probabilities_passed_as_logits_warn(calibrator):
    logits, y = overconfident_logits(100, 3, seed=28)
    proba = np.exp(log_softmax(logits, axis=1))
    with pytest.warns(UserWarning, match="declared as logits .* like probabilities"):
        clone(calibrator).fit(proba, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clone(calibrator).fit(logits, y)
        clone(calibrator).set_params(input="probabilities").fit(proba, y)


def test_ts_ece_objective_returns_the_grid_argmin():
    logits, y = overconfident_logits(500, 4, seed=7)
    grid = np.round(np.arange(0.5, 6.0, 0.25), 2)
    ts = TemperatureScaling(objective="ece", grid=grid, n_bins=10).fit(logits, y)
    errors = []
    for temperature in grid:
        proba = np.exp(log_softmax(logits / temperature, axis=1))
        errors.append(expected_calibration_error(y, proba, n_bins=10))
    assert ts.temperature_ == grid[int(np.argmin(errors))]
    assert ts.n_iter_ == len(grid)


def test_ts_ece_default_grid_is_the_wang2021_pool():
    logits, y = overconfident_logits(100, 3, seed=8)
    ts = TemperatureScaling(objective="ece").fit(logits, y)
    assert ts.n_iter_ == 1000
    assert ts.temperature_ in np.round(np.arange(1, 1001) * 0.01, 2)


# ------------------------------------------------------------------- histogram binning


def test_hb_returns_each_bin_accuracy_on_its_fit_data():
    # Labels from softmax(logits / 0.5): an underconfident model, so every bin's accuracy
    # is above what would be needed to keep the predicted class.
    logits, y = overconfident_logits(3000, 3, scale=0.5, seed=9)
    weight = np.random.default_rng(10).integers(1, 4, size=len(y)).astype(float)
    for strategy in ("uniform", "quantile"):
        hb = HistogramBinning(n_bins=10, strategy=strategy).fit(logits, y, sample_weight=weight)
        proba = softmax(logits)
        confidence = proba.max(axis=1)
        correct = proba.argmax(axis=1) == y
        if strategy == "uniform":
            edges = uniform_bin_edges(10)
        else:
            edges = quantile_bin_edges(confidence, 10, weight)
        np.testing.assert_array_equal(hb.bin_edges_, edges)
        index = assign_bins(confidence, edges)
        calibrated = hb.predict_proba(logits)
        for b in np.unique(index):
            rows = index == b
            accuracy = np.average(correct[rows], weights=weight[rows])
            assert hb.bin_values_[b] == pytest.approx(accuracy, abs=1e-12)
            np.testing.assert_allclose(calibrated[rows].max(axis=1), accuracy, atol=1e-12)
        np.testing.assert_array_equal(calibrated.argmax(axis=1), proba.argmax(axis=1))


def test_hb_empty_bins_take_their_centre():
    proba = np.array([[0.95, 0.05], [0.92, 0.08], [0.1, 0.9], [0.55, 0.45], [0.52, 0.48]])
    y = np.array([0, 1, 1, 0, 0])
    hb = HistogramBinning(n_bins=5, input="probabilities").fit(proba, y)
    # Bins (0.5, 0.6] and (0.8, 1] hold data; the others are empty.
    np.testing.assert_allclose(hb.bin_weights_, [0, 0, 2, 0, 3])
    np.testing.assert_allclose(hb.bin_values_, [0.1, 0.3, 1.0, 0.7, 2 / 3])
    out = hb.predict_proba(np.array([[0.68, 0.32], [0.3, 0.7]]))
    np.testing.assert_allclose(out[:, 0], [0.7, 0.3])
    np.testing.assert_allclose(out[:, 1], [0.3, 0.7])


def test_hb_top_label_floor_keeps_the_predicted_class():
    proba = np.array([[0.5, 0.3, 0.2], [0.6, 0.25, 0.15], [0.2, 0.7, 0.1]])
    hb = HistogramBinning(n_bins=1, input="probabilities").fit(proba, [1, 2, 2], classes=[0, 1, 2])
    assert hb.bin_values_[0] == 0.0
    out = hb.predict_proba(proba)
    # Tie point t = p2 / (1 - r + p2); the top class gets just above t, the others share
    # the rest in proportion to their probabilities, the runner-up just below it.
    top, runner = 0.5, 0.3
    tie = runner / (1 - top + runner)
    np.testing.assert_allclose(out[0], [tie, *(np.array([0.3, 0.2]) / 0.5 * (1 - tie))], rtol=1e-14)
    assert out[0, 0] > out[0, 1]
    np.testing.assert_array_equal(out.argmax(axis=1), proba.argmax(axis=1))
    np.testing.assert_allclose(out.sum(axis=1), 1.0)


@pytest.mark.parametrize("calibrator", [HistogramBinning(n_bins=2), ScalingBinning(n_bins=2)])
def test_top_label_map_with_subnormal_other_probabilities(calibrator):
    # exp(-740) is subnormal: the rest of such a row once overflowed its rescaling factor
    logits = np.array([[0.0, -740.0], [0.0, -1.0], [-1.0, 0.0], [0.0, -2.0]])
    out = clone(calibrator).fit(logits, [0, 1, 1, 0]).predict_proba(logits)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out.sum(axis=1), 1.0)
    np.testing.assert_array_equal(out.argmax(axis=1), logits.argmax(axis=1))
    proba = np.array([[1.0, 4e-322], [0.6, 0.4]])
    fitted = HistogramBinning(n_bins=1, input="probabilities").fit(proba, [0, 1], classes=[0, 1])
    # one bin, accuracy 0.5: both rows floored to just above the tie at 0.5
    out = fitted.predict_proba(proba)
    np.testing.assert_allclose(out, 0.5, atol=1e-15)
    assert (out[:, 0] > out[:, 1]).all()


def test_hb_one_hot_rows_share_the_rest_uniformly():
    proba = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.2, 0.5, 0.3]])
    hb = HistogramBinning(n_bins=2, input="probabilities").fit(proba, [0, 2, 1])
    out = hb.predict_proba(proba)
    # Bin (0.5, 1] holds one right and one wrong prediction: 0.5, above the tie point 1/3
    # of the one-hot rows, whose other classes share the rest equally.
    assert hb.bin_values_[1] == pytest.approx(0.5)
    np.testing.assert_allclose(out[0], [0.5, 0.25, 0.25])
    np.testing.assert_array_equal(out.argmax(axis=1), [0, 1, 1])


def tie_points(proba):
    """Top-1 value at which the runner-up catches up when the others keep their ratios."""
    ordered = np.sort(proba, axis=1)
    return ordered[:, -2] / (1 - ordered[:, -1] + ordered[:, -2])


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_hb_outputs_the_bin_accuracy_on_an_overconfident_model(strategy):
    # Binary, overconfident: every bin's accuracy is above 1/2, so the output confidence
    # is the bin accuracy and the in-sample ECE is 0.
    logits, y = overconfident_logits(3000, 2, scale=2.0, seed=9)
    hb = HistogramBinning(strategy=strategy).fit(logits, y)
    proba = softmax(logits)
    index = assign_bins(proba.max(axis=1), hb.bin_edges_)
    out = hb.predict_proba(logits)
    assert (hb.bin_values_[index] > 0.5).all()
    np.testing.assert_array_equal(out.max(axis=1), hb.bin_values_[index])
    assert expected_calibration_error(y, out) < 1e-12
    assert expected_calibration_error(y, proba) > 0.05
    # Three classes: the floor binds in the low bins; elsewhere the output is the bin
    # accuracy, and where it binds the top class gets just above the tie point.
    logits, y = overconfident_logits(3000, 3, scale=3.0, seed=9)
    hb = HistogramBinning(strategy=strategy).fit(logits, y)
    proba = softmax(logits)
    value = hb.bin_values_[assign_bins(proba.max(axis=1), hb.bin_edges_)]
    tie = tie_points(proba)
    out = hb.predict_proba(logits)
    free = value > tie * (1 + 1e-12)
    assert 0 < (~free).sum() < len(y) / 4
    np.testing.assert_array_equal(out.max(axis=1)[free], value[free])
    np.testing.assert_allclose(out.max(axis=1)[~free], tie[~free], rtol=1e-12)
    np.testing.assert_array_equal(out.argmax(axis=1), proba.argmax(axis=1))
    assert expected_calibration_error(y, out) < 0.2 * expected_calibration_error(
        y, _midpoint_floor(proba, value, tie)
    )


def _midpoint_floor(proba, value, tie):
    """Top-label output with the top class floored at (t + r) / 2 instead of just above t."""
    top = proba.max(axis=1)
    confidence = np.maximum(value, (tie + top) / 2)
    out = proba * ((1 - confidence) / (1 - top))[:, None]
    out[np.arange(len(out)), proba.argmax(axis=1)] = confidence
    return out


@pytest.mark.parametrize("multi_class", ["top_label", "classwise"])
def test_hb_bins_float32_probabilities_in_float32_like_the_metrics(multi_class):
    # float32(edge 8/15) is above the float64 edge, yet as float32 it equals the float32
    # edge and lies in bin 7 under (lower, upper], as the reliability diagram places it.
    v = np.float32(uniform_bin_edges(15)[8])
    proba = np.array([[v, 1 - v], [0.95, 0.05], [0.97, 0.03]], dtype=np.float32)
    y = np.array([0, 1, 0])
    hb = HistogramBinning(multi_class=multi_class, input="probabilities").fit(proba, y)
    if multi_class == "top_label":
        diagram = reliability_diagram(y, proba, n_bins=15)
        np.testing.assert_array_equal(hb.bin_weights_, diagram.count)
        assert hb.bin_values_[7] == 1.0
        assert hb.predict_proba(proba)[0, 0] == 1.0
    else:
        assert hb.bin_weights_[0, 7] == 1 and hb.bin_weights_[0, 8] == 0
        assert hb.bin_values_[0, 7] == 1.0
    assert hb.predict_proba(proba).dtype == np.float64


def test_hb_classwise_is_one_vs_rest_frequency_renormalised():
    logits, y = overconfident_logits(1000, 3, seed=11)
    hb = HistogramBinning(n_bins=8, multi_class="classwise").fit(logits, y)
    proba = np.exp(log_softmax(logits, axis=1))
    edges = uniform_bin_edges(8)
    expected = np.empty_like(proba)
    for k in range(3):
        index = assign_bins(proba[:, k], edges)
        for b in range(8):
            rows = index == b
            value = np.mean(y[rows] == k) if rows.any() else (edges[b] + edges[b + 1]) / 2
            assert hb.bin_values_[k, b] == pytest.approx(value, abs=1e-12)
            expected[rows, k] = value
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(hb.predict_proba(logits), expected, atol=1e-12)


# ------------------------------------------------------------- beyond the seeds


def test_scaling_binning_bins_the_scaled_outputs_into_equal_mass_bins():
    logits, y = overconfident_logits(2000, 4, seed=12)
    sb = ScalingBinning(n_bins=10).fit(logits, y)
    assert sb.temperature_ == pytest.approx(TemperatureScaling().fit(logits, y).temperature_)
    scaled = softmax(logits, 1 / sb.temperature_).max(axis=1)
    np.testing.assert_allclose(sb.bin_edges_, quantile_bin_edges(scaled, 10))
    np.testing.assert_array_equal(sb.bin_weights_, np.full(10, 200))
    index = assign_bins(scaled, sb.bin_edges_)
    for b in range(10):
        assert sb.bin_values_[b] == pytest.approx(scaled[index == b].mean(), abs=1e-12)
    out = sb.predict_proba(logits)
    # Where the floor does not bind, the top confidence is a bin value: at most n_bins.
    value = sb.bin_values_[index]
    free = value > tie_points(softmax(logits, 1 / sb.temperature_)) * (1 + 1e-12)
    assert free.mean() > 0.95
    np.testing.assert_array_equal(out.max(axis=1)[free], value[free])
    assert len(np.unique(out.max(axis=1)[free])) == 10
    np.testing.assert_array_equal(out.argmax(axis=1), logits.argmax(axis=1))


def test_matrix_scaling_without_penalty_matches_multinomial_logistic_regression():
    logits, y = overconfident_logits(400, 3, seed=13)
    ms = MatrixScaling(l2_regularization_off_diagonal=0.0).fit(logits, y)
    lr = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(logits, y)
    np.testing.assert_allclose(ms.predict_proba(logits), lr.predict_proba(logits), atol=1e-5)


@pytest.mark.parametrize("weighted", [False, True])
def test_bias_corrected_temperature_scaling_is_the_exact_nll_minimum(weighted):
    # The NLL's gradient in b is mean p_k - frequency_k: at the minimum the mean calibrated
    # probability of each class is its (weighted) frequency; scipy's L-BFGS on the same
    # objective finds no lower NLL.
    logits, y = overconfident_logits(1500, 4, seed=30)
    logits[:, 0] += 1.5
    weight = np.random.default_rng(31).uniform(0.2, 3.0, 1500) if weighted else None
    bcts = BiasCorrectedTemperatureScaling().fit(logits, y, sample_weight=weight)
    proba = bcts.predict_proba(logits)
    frequency = np.bincount(y, weights=weight, minlength=4)
    np.testing.assert_allclose(
        np.average(proba, axis=0, weights=weight), frequency / frequency.sum(), atol=1e-9
    )
    assert bcts.bias_.sum() == pytest.approx(0.0, abs=1e-12)

    def objective(theta):
        return nll(theta[0] * logits + theta[1:], y, sample_weight=weight)

    start = np.concatenate([[1.0], np.zeros(4)])
    found = minimize(objective, start, method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-10})
    ours = np.concatenate([[1 / bcts.temperature_], bcts.bias_])
    assert objective(ours) <= found.fun + 1e-12
    assert bcts.temperature_ == pytest.approx(1 / found.x[0], rel=1e-4)


def test_bias_corrected_temperature_scaling_over_many_classes_by_lbfgs():
    # 300 classes: 301 parameters take L-BFGS steps with the diagonal preconditioner.
    logits, y = overconfident_logits(3000, 300, seed=32)
    bcts = BiasCorrectedTemperatureScaling(tol=1e-12).fit(logits, y)
    proba = bcts.predict_proba(logits)
    seen = np.bincount(y, minlength=300) > 0
    np.testing.assert_allclose(
        proba.mean(axis=0)[seen], (np.bincount(y, minlength=300) / 3000)[seen], atol=1e-5
    )
    assert bcts.temperature_ == pytest.approx(3.0, rel=0.2)


def test_scaling_families_nest_in_nll():
    logits, y = overconfident_logits(500, 4, seed=14)

    def fitted_nll(calibrator):
        proba = calibrator.fit(logits, y).predict_proba(logits)
        return -np.mean(np.log(proba[np.arange(len(y)), y]))

    ts = fitted_nll(TemperatureScaling())
    bcts = fitted_nll(BiasCorrectedTemperatureScaling())
    vs = fitted_nll(VectorScaling())
    ms = fitted_nll(MatrixScaling(l2_regularization_off_diagonal=0.0))
    assert ms <= vs + 1e-9 <= bcts + 2e-9 <= ts + 3e-9
    # The off-diagonal penalty shrinks the off-diagonal entries and leaves the diagonal free.
    norms = []
    for alpha in (0.0, 1.0, 100.0):
        coef = MatrixScaling(l2_regularization_off_diagonal=alpha).fit(logits, y).coef_
        norms.append(np.linalg.norm(coef - np.diag(np.diag(coef))))
    assert norms[0] > norms[1] > norms[2] > 0


@pytest.mark.parametrize(
    "calibrator",
    [
        VectorScaling(),
        MatrixScaling(),
        StructuredVectorScaling(),
        StructuredMatrixScaling(),
        QuadraticScaling(),
        BetaCalibration(),
    ],
    ids=repr,
)
def test_weights_equal_repetitions(calibrator):
    # the penalties of SVS/SMS scale with the total weight, as with repeated rows
    logits, y = overconfident_logits(120, 3, seed=15)
    weight = np.random.default_rng(16).integers(0, 4, size=len(y))
    weighted = clone(calibrator).fit(logits, y, sample_weight=weight)
    repeated = clone(calibrator).fit(np.repeat(logits, weight, axis=0), np.repeat(y, weight))
    np.testing.assert_allclose(
        weighted.predict_proba(logits), repeated.predict_proba(logits), atol=1e-7
    )


def test_isotonic_binary_matches_scikit_learn_isotonic_calibration():
    logits, y = overconfident_logits(300, 2, seed=17)
    decision = logits[:, 1] - logits[:, 0]
    ours = IsotonicCalibration().fit(decision, y).predict_proba(decision)
    frozen = FrozenEstimator(_Scores().fit(decision, y))
    theirs = CalibratedClassifierCV(frozen, method="isotonic").fit(decision, y)
    np.testing.assert_allclose(ours, theirs.predict_proba(decision), atol=1e-12)


def test_isotonic_multiclass_is_one_vs_rest_renormalised():
    logits, y = overconfident_logits(300, 3, seed=18)
    iso = IsotonicCalibration().fit(logits, y)
    proba = np.exp(log_softmax(logits, axis=1))
    raw = np.column_stack([iso.calibrators_[k].predict(proba[:, k]) for k in range(3)])
    np.testing.assert_allclose(
        iso.predict_proba(logits), raw / raw.sum(axis=1, keepdims=True), atol=1e-12
    )


@pytest.mark.parametrize("loss", ["mse", "nll"])
@pytest.mark.slow
def test_ets_weights_are_the_simplex_optimum(loss):
    logits, y = overconfident_logits(400, 4, seed=19)
    ets = EnsembleTemperatureScaling(loss=loss).fit(logits, y)
    assert ets.weights_.min() >= 0 and ets.weights_.sum() == pytest.approx(1.0)
    components = [
        np.exp(log_softmax(logits / ets.temperature_, axis=1)),
        np.exp(log_softmax(logits, axis=1)),
        np.full(logits.shape, 0.25),
    ]
    rows = np.arange(len(y))
    one_hot = np.eye(4)[y]

    def loss_of(w):
        p = sum(wi * c for wi, c in zip(w, components, strict=True))
        if loss == "mse":
            return np.mean(np.sum((p - one_hot) ** 2, axis=1))
        return -np.mean(np.log(p[rows, y]))

    grid = [
        (a, b, 1 - a - b)
        for a in np.linspace(0, 1, 101)
        for b in np.linspace(0, 1, 101)
        if a + b <= 1 + 1e-12
    ]
    assert loss_of(ets.weights_) <= min(loss_of(np.clip(w, 0, 1)) for w in grid) + 1e-12
    np.testing.assert_allclose(
        ets.predict_proba(logits), sum(w * c for w, c in zip(ets.weights_, components, strict=True))
    )
    if loss == "nll":
        assert ets.temperature_ == pytest.approx(TemperatureScaling().fit(logits, y).temperature_)
    else:
        brier = minimize_scalar(
            lambda t: np.mean(
                np.sum((np.exp(log_softmax(logits / t, axis=1)) - one_hot) ** 2, axis=1)
            ),
            bounds=(0.05, 5.0),
            method="bounded",
            options={"xatol": 1e-10},
        )
        assert ets.temperature_ == pytest.approx(brier.x, rel=1e-5)


def sklearn_sigmoid(scores, y, sample_weight=None):
    """scikit-learn's sigmoid (Platt) calibration of fixed scores; returns the fitted CCCV."""
    frozen = FrozenEstimator(_Scores().fit(scores, y))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Since FrozenEstimator", UserWarning)
        return CalibratedClassifierCV(frozen, method="sigmoid").fit(
            scores, y, sample_weight=sample_weight
        )


def one_vs_rest_log_odds(proba):
    """log p_k - log(1 - p_k), written directly."""
    return np.log(proba) - np.log1p(-proba)


@pytest.mark.parametrize("n_classes", [2, 3, 5])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.slow
def test_platt_matches_scikit_learn_sigmoid_calibration(n_classes, weighted):
    logits, y = overconfident_logits(400, n_classes, seed=40)
    weight = np.random.default_rng(41).uniform(0, 3, size=len(y)) if weighted else None
    platt = PlattScaling().fit(logits, y, sample_weight=weight)
    log_odds = one_vs_rest_log_odds(softmax(logits))
    # scikit-learn fits its sigmoids on the decision function it is given: feed it the
    # one-vs-rest log-odds (binary: the positive class's only).
    given = log_odds[:, 1] if n_classes == 2 else log_odds
    cccv = sklearn_sigmoid(given, y, weight)
    np.testing.assert_allclose(platt.predict_proba(logits), cccv.predict_proba(given), atol=1e-6)
    test = np.random.default_rng(42).normal(size=(50, n_classes)) * 4
    test_odds = one_vs_rest_log_odds(softmax(test))
    np.testing.assert_allclose(
        platt.predict_proba(test),
        cccv.predict_proba(test_odds[:, 1] if n_classes == 2 else test_odds),
        atol=1e-6,
    )
    assert platt.coef_.shape == platt.intercept_.shape == (1 if n_classes == 2 else n_classes,)


def test_platt_binary_decision_function_and_probabilities():
    logits, y = overconfident_logits(300, 2, seed=43)
    decision = logits[:, 1] - logits[:, 0]
    one_d = PlattScaling().fit(decision, y)
    cccv = sklearn_sigmoid(decision, y)
    np.testing.assert_allclose(
        one_d.predict_proba(decision), cccv.predict_proba(decision), atol=1e-6
    )
    two_d = PlattScaling().fit(logits, y)
    np.testing.assert_allclose(two_d.coef_, one_d.coef_, rtol=1e-9)
    np.testing.assert_allclose(two_d.intercept_, one_d.intercept_, rtol=1e-9, atol=1e-12)
    # Probabilities are read through their log-odds, so they give the same fit.
    positive = 1 / (1 + np.exp(-decision))
    on_proba = PlattScaling(input="probabilities").fit(positive, y)
    np.testing.assert_allclose(
        on_proba.predict_proba(positive), cccv.predict_proba(decision), atol=1e-6
    )


def _logits(model, X):
    """A fitted model's logits: its decision function, ``(0, d)`` for a binary one."""
    decision = model.decision_function(X)
    return np.column_stack([np.zeros_like(decision), decision]) if decision.ndim == 1 else decision


class _View(ClassifierMixin, BaseEstimator):
    """A fitted model seen through other scores (for scikit-learn's calibration)."""

    def __init__(self, model):
        self.model = model

    def fit(self, X, y):
        self.classes_ = self.model.classes_
        return self

    def predict(self, X):
        return self.model.predict(X)


class _OneVsRestLogOdds(_View):
    """A fitted model whose decision function is the one-vs-rest log-odds of its logits."""

    def decision_function(self, X):
        return one_vs_rest_log_odds(softmax(_logits(self.model, X)))


class _ProbabilitiesOnly(_View):
    """A fitted model seen through ``predict_proba`` only (softmax of its logits)."""

    def predict_proba(self, X):
        return softmax(_logits(self.model, X))


@pytest.fixture(scope="module", params=["binary", "multiclass"])
def digits_model(request):
    """Digits (3 against 8, or all 10): a logistic regression fitted on a first part, then
    the calibration and test parts."""
    X, y = load_digits(return_X_y=True)
    X = X / 16
    if request.param == "binary":
        X, y = X[np.isin(y, [3, 8])], y[np.isin(y, [3, 8])]
    train, calibration, test = np.array_split(np.arange(len(y)), 3)
    model = LogisticRegression(max_iter=1000).fit(X[train], y[train])
    return model, X[calibration], y[calibration], X[test]


@pytest.mark.slow
def test_platt_is_scikit_learns_sigmoid_of_the_one_vs_rest_log_odds(digits_model):
    # scikit-learn fits each class's sigmoid to its column of the decision function; ours
    # to the class's one-vs-rest log-odds: the same for a binary problem (whose decision
    # function is the log-odds), not beyond.
    model, X_cal, y_cal, X_test = digits_model
    ours = PlattScaling().fit(model.decision_function(X_cal), y_cal)
    ours = ours.predict_proba(model.decision_function(X_test))
    plain = sklearn_calibration(model, "sigmoid", X_cal, y_cal).predict_proba(X_test)
    if len(model.classes_) == 2:
        np.testing.assert_allclose(ours, plain, atol=1e-6)
        return
    log_odds = sklearn_calibration(_OneVsRestLogOdds(model), "sigmoid", X_cal, y_cal)
    np.testing.assert_allclose(ours, log_odds.predict_proba(X_test), atol=1e-6)
    assert np.abs(ours - plain).max() > 0.3


def test_isotonic_is_scikit_learns_isotonic_of_the_probabilities(digits_model):
    # scikit-learn regresses on the decision function where the classifier has one; ours on
    # the probabilities. A binary problem gets the same step values (the probability is
    # monotone in the decision function) but interpolates between the fit scores in the
    # other variable; beyond two classes the maps differ.
    model, X_cal, y_cal, X_test = digits_model
    ours = IsotonicCalibration().fit(model.decision_function(X_cal), y_cal)
    probabilities = sklearn_calibration(_ProbabilitiesOnly(model), "isotonic", X_cal, y_cal)
    np.testing.assert_allclose(
        ours.predict_proba(model.decision_function(X_test)),
        probabilities.predict_proba(X_test),
        atol=1e-12,
    )
    plain = sklearn_calibration(model, "isotonic", X_cal, y_cal)
    gap = np.abs(ours.predict_proba(model.decision_function(X_cal)) - plain.predict_proba(X_cal))
    if len(model.classes_) == 2:
        np.testing.assert_allclose(gap, 0.0, atol=1e-12)
    else:
        assert gap.max() > 0.3


def sklearn_calibration(model, method, X, y):
    """scikit-learn's calibration of a fitted model (or a view of one) on ``X, y``."""
    viewed = model if hasattr(model, "coef_") else model.fit(X, y)
    return CalibratedClassifierCV(FrozenEstimator(viewed), method=method).fit(X, y)


def test_platt_uses_smoothed_targets_so_separable_scores_stay_finite():
    decision = np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])
    y = np.array([0, 0, 0, 1, 1, 1])
    platt = PlattScaling().fit(decision, y)
    assert np.isfinite(platt.coef_).all() and platt.coef_[0] > 0
    # At the optimum the gradient against the targets (N+ + 1)/(N+ + 2), 1/(N- + 2) is 0.
    target = np.where(y == 1, 4 / 5, 1 / 5)
    proba = platt.predict_proba(decision)[:, 1]
    np.testing.assert_allclose([(proba - target) @ decision, (proba - target).sum()], 0, atol=1e-10)
    assert proba.max() < 0.99


@pytest.mark.parametrize("offset, scale", [(1e4, 1.0), (0.0, 1e90), (-300.0, 1e-3)])
def test_platt_is_affine_invariant_in_the_score(offset, scale):
    rng = np.random.default_rng(0)
    decision = rng.normal(size=400)
    y = (rng.random(400) < expit(2 * decision)).astype(int)
    plain = PlattScaling().fit(decision, y)
    moved = PlattScaling().fit(decision * scale + offset, y)
    np.testing.assert_allclose(
        moved.predict_proba(decision * scale + offset), plain.predict_proba(decision), atol=1e-9
    )
    assert moved.coef_[0] * scale == pytest.approx(plain.coef_[0], rel=1e-9)


def test_platt_pickles():
    logits, y = overconfident_logits(200, 3, seed=44)
    platt = PlattScaling().fit(logits, y)
    restored = pickle.loads(pickle.dumps(platt))
    np.testing.assert_array_equal(restored.predict_proba(logits), platt.predict_proba(logits))


# ------------------------------------------------------------------ common behaviour


@pytest.mark.parametrize("calibrator", SCORE_ESTIMATORS, ids=SCORE_IDS)
@pytest.mark.parametrize("kind", ["logits", "probabilities", "binary"])
def test_rows_are_finite_and_sum_to_one(calibrator, kind):
    logits, y = overconfident_logits(200, 4, seed=20)
    scores = logits
    if kind == "probabilities":
        scores = np.exp(log_softmax(logits, axis=1))
        calibrator = clone(calibrator).set_params(input="probabilities")
    elif kind == "binary":
        scores, y = logits[:, 1] - logits[:, 0], (logits[:, 1] > logits[:, 0]) ^ (y == 3)
    fitted = clone(calibrator).fit(scores, y)
    test = scores[::-1] * 1.3 if kind != "probabilities" else scores[::-1]
    out = fitted.predict_proba(test)
    assert out.shape == (len(y), 2 if kind == "binary" else 4)
    assert np.isfinite(out).all() and out.min() >= 0
    np.testing.assert_allclose(out.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(fitted.transform(test), out)
    np.testing.assert_array_equal(fitted.predict(test), fitted.classes_[out.argmax(axis=1)])


@pytest.mark.parametrize("calibrator", SCORE_ESTIMATORS, ids=SCORE_IDS)
def test_fit_returns_self_keeps_params_and_reads_memmaps(calibrator):
    """scikit-learn's fit-returns-self, overwrite-params and read-only-memmap checks.

    test_common expects these three checks to fail only because their data has more classes
    than score columns; here they run on scores with one column per class.
    """
    logits, y = overconfident_logits(150, 3, seed=24)
    estimator = clone(calibrator)
    params = {name: joblib.hash(value) for name, value in estimator.get_params().items()}
    assert estimator.fit(logits, y) is estimator
    assert {name: joblib.hash(value) for name, value in estimator.get_params().items()} == params
    logits_memmap, y_memmap = create_memmap_backed_data([logits, y])
    assert not logits_memmap.flags.writeable
    from_memmap = clone(calibrator).fit(logits_memmap, y_memmap)
    np.testing.assert_allclose(
        from_memmap.predict_proba(logits_memmap), estimator.predict_proba(logits), rtol=1e-12
    )


@pytest.mark.parametrize("calibrator", SCORE_ESTIMATORS, ids=SCORE_IDS)
@pytest.mark.slow
def test_scores_of_any_numeric_dtype(calibrator):
    """scikit-learn's check_estimators_dtypes with the classes of its labels named.

    The check fits labels [1, 2] to 5 score columns, which test_common expects to fail
    because such labels may be 1-based; here ``classes=`` says they are column indices.
    """
    if calibrator.get_params().get("input") == "probabilities":
        pytest.skip("integer scores are not probabilities")
    scores = 3 * np.random.RandomState(0).uniform(size=(20, 5)).astype(np.float32)
    y = np.array([1, 2] * 10)
    expected = clone(calibrator).fit(scores.astype(np.float64), y, classes=np.arange(5))
    for dtype in (np.float32, np.float64, np.int64, np.int32):
        fitted = clone(calibrator).fit(scores.astype(dtype), y, classes=np.arange(5))
        out = fitted.predict_proba(scores.astype(dtype))
        assert out.shape == (20, 5) and np.isfinite(out).all()
        np.testing.assert_array_equal(fitted.predict(scores.astype(dtype)), out.argmax(axis=1))
        if dtype in (np.float32, np.float64):
            np.testing.assert_allclose(out, expected.predict_proba(scores), atol=1e-5)


@pytest.mark.parametrize(
    "calibrator",
    [
        TemperatureScaling(),
        HistogramBinning(),
        HistogramBinning(strategy="quantile"),
        ScalingBinning(),
    ],
    ids=repr,
)
def test_top_label_calibrators_keep_the_argmax(calibrator):
    logits, y = overconfident_logits(500, 5, seed=21)
    random_labels = np.random.default_rng(22).integers(0, 5, size=len(y))
    for labels in (y, random_labels):
        fitted = clone(calibrator).fit(logits, labels)
        test = np.random.default_rng(23).normal(size=(300, 5)) * 4
        np.testing.assert_array_equal(
            fitted.predict_proba(test).argmax(axis=1), test.argmax(axis=1)
        )


def test_one_dimensional_scores_are_read_as_two_columns():
    logits, y = overconfident_logits(200, 2, seed=24)
    decision = logits[:, 1] - logits[:, 0]
    for calibrator in (TemperatureScaling(), HistogramBinning(), VectorScaling()):
        one = clone(calibrator).fit(decision, y).predict_proba(decision)
        two = (
            clone(calibrator)
            .fit(np.column_stack([np.zeros_like(decision), decision]), y)
            .predict_proba(np.column_stack([0 * decision, decision]))
        )
        np.testing.assert_allclose(one, two, atol=1e-9)
    positive = 1 / (1 + np.exp(-decision))
    hb = HistogramBinning(input="probabilities")
    np.testing.assert_allclose(
        clone(hb).fit(positive, y).predict_proba(positive),
        clone(hb)
        .fit(np.column_stack([1 - positive, positive]), y)
        .predict_proba(np.column_stack([1 - positive, positive])),
    )


@pytest.mark.parametrize("calibrator", SCORE_ESTIMATORS, ids=SCORE_IDS)
def test_refit_on_one_dimensional_scores_drops_n_features_in(calibrator):
    logits, y = overconfident_logits(150, 3, seed=30)
    binary_logits, binary_y = overconfident_logits(150, 2, seed=31)
    fitted = clone(calibrator).fit(logits, y)
    assert fitted.n_features_in_ == 3
    fitted.fit(binary_logits[:, 1], binary_y)
    assert not hasattr(fitted, "n_features_in_")
    assert fitted.n_classes_ == 2
    fitted.fit(logits, y)
    assert fitted.n_features_in_ == 3


def test_labels_of_any_type_and_column_indices():
    logits, y = overconfident_logits(150, 3, seed=25)
    names = np.array(["cat", "dog", "eel"])[y]
    ts = TemperatureScaling().fit(logits, names)
    np.testing.assert_array_equal(ts.classes_, ["cat", "dog", "eel"])
    np.testing.assert_array_equal(
        ts.predict(logits), np.array(["cat", "dog", "eel"])[logits.argmax(axis=1)]
    )
    # A calibration set lacking class 2: integer labels that include 0 are column indices.
    rows = y < 2
    ts = TemperatureScaling().fit(logits[rows], y[rows])
    np.testing.assert_array_equal(ts.classes_, [0, 1, 2])


@pytest.mark.parametrize("calibrator", [TemperatureScaling(), HistogramBinning()])
def test_labels_without_zero_and_a_missing_class_need_classes(calibrator):
    logits, y = overconfident_logits(150, 3, seed=27)
    rows = y < 2
    one_based = y[rows] + 1
    # [1, 2] for three columns may be 1-based labels lacking class 3: ambiguous
    with pytest.raises(ValueError, match=r"pass `classes=`.*only when they include 0"):
        clone(calibrator).fit(logits[rows], one_based)
    fitted = clone(calibrator).fit(logits[rows], one_based, classes=[1, 2, 3])
    expected = clone(calibrator).fit(logits[rows], y[rows])
    np.testing.assert_array_equal(fitted.classes_, [1, 2, 3])
    np.testing.assert_allclose(fitted.predict_proba(logits), expected.predict_proba(logits))
    np.testing.assert_array_equal(fitted.predict(logits), expected.predict(logits) + 1)
    with pytest.raises(ValueError, match="`classes` names 2 classes but `scores` has 3"):
        clone(calibrator).fit(logits, y, classes=[0, 1])
    with pytest.raises(ValueError, match=r"`y` contains labels not in `classes`: \[4\]"):
        clone(calibrator).fit(logits[rows], one_based * 2, classes=[1, 2, 3])


def test_a_calibrator_lacking_a_required_method_cannot_be_instantiated():
    class WithoutFit(BaseCalibrator):
        def __init__(self, input="logits"):
            self.input = input

        def _predict_proba(self, scores):
            return softmax(scores)

    with pytest.raises(TypeError, match="abstract method.*_fit"):
        WithoutFit()

    class Complete(WithoutFit):
        def _fit(self, scores, y_index, sample_weight):
            self.fitted_ = True

    logits, y = overconfident_logits(50, 3, seed=29)
    complete = clone(Complete(input="logits")).fit(logits, y)
    np.testing.assert_allclose(complete.predict_proba(logits), softmax(logits))


# ------------------------------------------------------------------------ bad input


def _fit_cases():
    logits, y = overconfident_logits(60, 3, seed=26)
    nan = logits.copy()
    nan[3, 1] = np.nan
    inf = logits.copy()
    inf[0, 0] = np.inf
    proba = np.exp(log_softmax(logits, axis=1))
    no_weight = None
    return {
        "nan": (nan, y, no_weight, "logits", "NaN"),
        "inf": (inf, y, no_weight, "logits", "infinity"),
        "rows-not-summing-to-1": (proba * 1.1, y, no_weight, "probabilities", "sum to 1"),
        "single-class": (logits, np.zeros(60, dtype=int), no_weight, "logits", "1 class"),
        "single-class-of-positive-weight": (
            logits,
            y,
            (y == 0).astype(float),
            "logits",
            "2 classes among the samples of positive weight, got 1 class",
        ),
        "negative-weight": (logits, y, -np.ones(60), "logits", "negative"),
        "more-classes-than-columns": (logits[:, :2], y, no_weight, "logits", "but `scores` has 2"),
        "one-column": (logits[:, :1], y % 2, no_weight, "logits", "1 feature"),
    }


@pytest.mark.parametrize("calibrator", SCORE_ESTIMATORS, ids=SCORE_IDS)
@pytest.mark.parametrize("case", list(_fit_cases()))
def test_bad_fit_input_raises_and_leaves_a_fitted_calibrator_unchanged(calibrator, case):
    scores, y, weight, kind, match = _fit_cases()[case]
    logits, good_y = overconfident_logits(80, 4, seed=27)
    good = logits if kind == "logits" else np.exp(log_softmax(logits, axis=1))
    fitted = clone(calibrator).set_params(input=kind).fit(good, good_y)
    before = fitted.predict_proba(good)
    state = dict(vars(fitted))
    with pytest.raises(ValueError, match=match):
        fitted.fit(scores, y, sample_weight=weight)
    assert vars(fitted).keys() == state.keys()
    assert fitted.n_features_in_ == 4 and fitted.n_classes_ == 4
    np.testing.assert_array_equal(fitted.predict_proba(good), before)


@pytest.mark.parametrize("calibrator", SCORE_ESTIMATORS, ids=SCORE_IDS)
def test_bad_transform_input_raises(calibrator):
    logits, y = overconfident_logits(80, 3, seed=28)
    fitted = clone(calibrator).fit(logits, y)
    nan = logits.copy()
    nan[5, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fitted.predict_proba(nan)
    with pytest.raises(ValueError, match="2 features, but .* is expecting 3"):
        fitted.predict_proba(logits[:, :2])
    with pytest.raises(ValueError, match="Expected 2D array"):
        fitted.predict_proba(logits[:, 0])
    proba = np.exp(log_softmax(logits, axis=1))
    on_proba = clone(calibrator).set_params(input="probabilities").fit(proba, y)
    with pytest.raises(ValueError, match="sum to 1"):
        on_proba.predict_proba(proba * 0.5)
    binary_logits, binary_y = overconfident_logits(80, 2, seed=29)
    binary = clone(calibrator).fit(binary_logits[:, 1], binary_y)
    with pytest.raises(ValueError, match="fitted on 1-D binary scores"):
        binary.predict_proba(binary_logits)


def test_grid_ece_equals_the_metric_at_every_temperature():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(700, 6)) * 3
    y = rng.integers(0, 6, size=700)
    weight = rng.integers(0, 3, size=700).astype(float)
    grid = np.round(np.arange(1, 61) * 0.05, 2)
    for sample_weight in (None, weight):
        expected = [
            expected_calibration_error(y, softmax(logits / t), sample_weight=sample_weight)
            for t in grid
        ]
        actual = grid_ece(logits, y, grid, sample_weight=sample_weight)
        np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-12)


# ------------------------------------------------------------------------- extreme scores


@pytest.mark.parametrize(
    "calibrator",
    [
        TemperatureScaling(),
        ScalingBinning(),
        ScalingBinning(multi_class="classwise"),
        EnsembleTemperatureScaling(),
        EnsembleTemperatureScaling(loss="nll"),
    ],
    ids=repr,
)
def test_temperature_scaled_float32_logits_beyond_float32_range_keep_the_argmax(calibrator):
    # T = 1e-4 (separable fit data) takes float32 logits of 1e35 beyond float32's range.
    z = (np.random.default_rng(0).normal(size=(80, 3)) * 10).astype(np.float32)
    q = np.array([[1e35, 0, -1e35], [-1e35, 0, 1e35]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted = clone(calibrator).fit(z, z.argmax(1))
    proba = fitted.predict_proba(q)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(fitted.predict(q), [0, 2])


def _huge(logits, magnitude, dtype):
    """``logits`` rescaled so that their largest absolute value is ``magnitude``."""
    return (logits / np.abs(logits).max() * magnitude).astype(dtype)


@pytest.mark.parametrize("calibrator", SCORE_ESTIMATORS, ids=SCORE_IDS)
@pytest.mark.parametrize(
    "magnitude, dtype", [(2e38, np.float32), (1e100, np.float64), (1.7e308, np.float64)]
)
def test_huge_finite_scores_fit_or_raise_naming_their_range(calibrator, magnitude, dtype, capfd):
    logits, y = overconfident_logits(90, 3, seed=50)
    scores = _huge(logits, magnitude, dtype)
    fitted = clone(calibrator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("error", RuntimeWarning)
        if magnitude > 1e100:
            with pytest.raises(ValueError, match=r"`scores`.*at most 1e\+100.*-?1\.7e\+308"):
                fitted.fit(scores, y)
        else:
            fitted.fit(scores, y)
            proba = fitted.predict_proba(scores)
            assert np.isfinite(proba).all() and proba.min() >= 0
            np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # no LAPACK (or other) noise on the console
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    "calibrator", [VectorScaling(), MatrixScaling(l2_regularization_off_diagonal=0.0)], ids=repr
)
def test_linear_scaling_stops_on_a_scale_aware_criterion(calibrator):
    # Affine maps of the logits are equivariant to their scale: logits of scale 1e-8 give
    # the same probabilities, whatever the row order.
    logits, y = overconfident_logits(300, 3, seed=3)
    plain = clone(calibrator).fit(logits, y).predict_proba(logits)
    tiny = clone(calibrator).fit(logits * 1e-8, y).predict_proba(logits * 1e-8)
    np.testing.assert_allclose(tiny, plain, atol=1e-7)
    order = np.random.default_rng(4).permutation(len(y))
    permuted = clone(calibrator).fit(logits[order] * 1e-8, y[order])
    np.testing.assert_allclose(permuted.predict_proba(logits * 1e-8), plain, atol=1e-7)


@pytest.mark.parametrize(
    "calibrator",
    [VectorScaling(), MatrixScaling(), MatrixScaling(l2_regularization_off_diagonal=0.0)],
    ids=repr,
)
def test_linear_scaling_on_a_tiny_separable_set_saturates_whatever_the_row_order(calibrator):
    # The NLL has no minimum: the fit runs until the probabilities saturate (the start at
    # temperature scaling of VectorScaling and MatrixScaling saturates them at once: its
    # temperature goes to its bound), warns, and gives the same probabilities for every
    # row order.
    logits = np.random.default_rng(0).normal(size=(6, 3))
    y = logits.argmax(axis=1)
    fits = []
    for seed in range(3):
        order = np.random.default_rng(seed).permutation(len(y))
        with pytest.warns(ConvergenceWarning, match="separate the classes"):
            fits.append(clone(calibrator).fit(logits[order], y[order]))
    proba = [fitted.predict_proba(logits) for fitted in fits]
    assert proba[0][np.arange(6), y].min() > 1 - 1e-5
    for other in proba[1:]:
        np.testing.assert_allclose(other, proba[0], atol=1e-9)
