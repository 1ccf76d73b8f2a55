"""Bootstrap intervals: the resampling plans, coverage, BCa, and argument checks."""

import numpy as np
import pytest
from scipy.stats import bootstrap

from sklearn_calib.metrics._core import _resampling
from sklearn_calib.metrics._core._registry import KERNELS
from sklearn_calib.metrics._functions._predictions import check_predictions
from sklearn_calib.scoring import (
    adaptive_calibration_error,
    brier_score,
    calibration_error_ci,
    classwise_calibration_error,
    debiased_calibration_error,
    differentiable_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    smooth_calibration_error,
    smooth_ece,
    top_label_accuracy,
    top_label_calibration_error,
)


def multiclass_data(n, k, seed, sharpen=1.5):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 2
    truth = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    proba = np.exp(logits * sharpen) / np.exp(logits * sharpen).sum(axis=1, keepdims=True)
    return (truth.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1).clip(0, k - 1), proba


PLANNED = [
    (expected_calibration_error, {}),
    (expected_calibration_error, {"norm": "l2", "strategy": "quantile", "n_bins": 7}),
    (maximum_calibration_error, {"n_bins": 10}),
    (adaptive_calibration_error, {"norm": "max"}),
    (classwise_calibration_error, {"n_bins": 5}),
    (top_label_calibration_error, {"average": "macro", "strategy": "quantile"}),
    (debiased_calibration_error, {"strategy": "uniform"}),
    (smooth_ece, {}),
    (smooth_ece, {"bandwidth": 0.003}),
    (brier_score, {}),
    (negative_log_likelihood, {}),
    (top_label_accuracy, {}),
]


@pytest.mark.parametrize("metric, options", PLANNED)
@pytest.mark.parametrize("weighted", [False, True])
def test_plans_reproduce_their_metric(metric, options, weighted):
    y, proba = multiclass_data(3000, 4, 1)
    weight = np.random.default_rng(2).random(3000) if weighted else None
    plan = KERNELS[metric].plan(check_predictions(y, proba, sample_weight=weight), **options)
    one_group = plan.accumulate(np.zeros(3000, dtype=np.intp), 1)
    expected = metric(y, proba, sample_weight=weight, **options)
    assert plan.value(one_group)[0] == pytest.approx(expected, abs=1e-12)
    # any split into groups sums to the same
    groups = np.random.default_rng(3).integers(0, 7, 3000)
    assert plan.value(plan.accumulate(groups, 7).sum(axis=0)) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    "metric, options",
    [
        (expected_calibration_error, {"convention": "positive_class"}),
        (classwise_calibration_error, {}),
        (top_label_calibration_error, {}),
        (brier_score, {}),
        (smooth_ece, {"convention": "positive_class", "bandwidth": 0.08}),
        (smooth_ece, {"bandwidth": 0.03}),
    ],
)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.slow
def test_small_samples_get_the_exact_bootstrap_of_rows(metric, options, weighted):
    rng = np.random.default_rng(4)
    p = rng.random(300)
    y = (rng.random(300) < p**1.4).astype(int)
    weight = rng.uniform(0.5, 2.0, 300) if weighted else np.ones(300)
    result = calibration_error_ci(
        metric, y, p, n_resamples=50, random_state=5, sample_weight=weight, **options
    )
    # the same draws: one group per row, so each replicate is the metric on resampled rows
    counts = _resampling.resampled_counts(np.random.RandomState(5), 50, 300)
    rows = [np.repeat(np.arange(300), c.astype(int)) for c in counts]
    expected = [metric(y[r], p[r], sample_weight=weight[r], **options) for r in rows]
    np.testing.assert_allclose(result.replicates, expected, rtol=0, atol=1e-12)
    # the counts as weights give the same, but for smECE's density epsilon (1e-4 of the
    # mean positive weight: the counts' mean is not the rows'), a relative 1e-6 at most
    as_weights = [metric(y, p, sample_weight=c * weight, **options) for c in counts]
    np.testing.assert_allclose(result.replicates, as_weights, rtol=1e-6, atol=1e-12)


@pytest.mark.slow
def test_group_resampling_spreads_like_row_resampling_on_large_samples():
    y, proba = multiclass_data(30_000, 3, 6)
    grouped = calibration_error_ci(
        expected_calibration_error, y, proba, n_resamples=300, random_state=0
    )
    rows = [
        expected_calibration_error(y, proba, sample_weight=c)
        for c in _resampling.resampled_counts(np.random.RandomState(1), 300, 30_000)
    ]
    assert np.std(grouped.replicates) == pytest.approx(np.std(rows), rel=0.2)
    assert np.mean(grouped.replicates) == pytest.approx(np.mean(rows), rel=0.05)


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize(
    "metric", [expected_calibration_error, classwise_calibration_error, smooth_ece]
)
@pytest.mark.slow
def test_the_interval_covers_the_estimate(method, metric):
    for seed in range(3):
        y, proba = multiclass_data(4000, 3, 10 + seed, sharpen=2.0)
        result = calibration_error_ci(
            metric, y, proba, ci_method=method, n_resamples=300, random_state=seed
        )
        assert result.low <= result.estimate <= result.high
        assert result.estimate == metric(y, proba)
        assert result.replicates.shape == (300,) and result.ci_method == method


def true_binned_ece_of_squared_link(n_bins):
    """Population ECE of p ~ U(0, 1), y ~ Bernoulli(p^2) with equal-width bins."""
    middle = (np.arange(n_bins) + 0.5) / n_bins
    return np.sum((middle - middle**2 - 1 / (12 * n_bins**2)) / n_bins)


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.slow
def test_coverage_near_nominal_for_a_known_miscalibration(method):
    truth = true_binned_ece_of_squared_link(10)
    rng = np.random.default_rng(20)
    covered = []
    for seed in range(100):
        p = rng.random(4000)
        y = rng.random(4000) < p**2
        result = calibration_error_ci(
            expected_calibration_error,
            y,
            p,
            n_bins=10,
            convention="positive_class",
            n_resamples=200,
            confidence_level=0.9,
            ci_method=method,
            random_state=seed,
        )
        covered.append(result.low <= truth <= result.high)
    assert 0.8 <= np.mean(covered) <= 0.98


def test_coverage_near_nominal_on_calibrated_data():
    # the binary Brier score (both columns) of calibrated p ~ U(0, 1): 2 E[p (1 - p)] = 1/3
    rng = np.random.default_rng(21)
    covered = []
    for seed in range(150):
        p = rng.random(500)
        y = rng.random(500) < p
        result = calibration_error_ci(
            brier_score, y, p, n_resamples=200, confidence_level=0.9, random_state=seed
        )
        covered.append(result.low <= 1 / 3 <= result.high)
    assert 0.83 <= np.mean(covered) <= 0.96


def test_metrics_without_plan_resample_rows_through_weights():
    y, proba = multiclass_data(200, 3, 30)
    for metric in (smooth_calibration_error, differentiable_calibration_error):
        result = calibration_error_ci(
            metric, y, proba, n_resamples=20, ci_method="bca", random_state=0
        )
        counts = _resampling.resampled_counts(np.random.RandomState(0), 20, 200)
        expected = [metric(y, proba, sample_weight=c) for c in counts]
        np.testing.assert_allclose(result.replicates, expected, rtol=1e-12)
        assert result.low <= result.high

    def mean_confidence(y_true, y_prob, *, sample_weight=None, power=1):
        return float(np.average(np.max(y_prob, axis=1) ** power, weights=sample_weight))

    result = calibration_error_ci(mean_confidence, y, proba, power=2, random_state=0)
    assert result.estimate == mean_confidence(y, proba, power=2)


def test_ci_is_reproducible_and_weights_pass_through():
    y, proba = multiclass_data(1000, 3, 31)
    weight = np.random.default_rng(32).random(1000)
    first = calibration_error_ci(
        expected_calibration_error, y, proba, sample_weight=weight, random_state=3
    )
    second = calibration_error_ci(
        expected_calibration_error, y, proba, sample_weight=weight, random_state=3
    )
    np.testing.assert_array_equal(first.replicates, second.replicates)
    assert first.estimate == expected_calibration_error(y, proba, sample_weight=weight)


def test_bca_warns_when_every_replicate_exceeds_the_estimate():
    # calibrated data: the plug-in ECE is pure noise, and each replicate adds more
    rng = np.random.default_rng(33)
    p = rng.random(20_000)
    y = rng.random(20_000) < p
    with pytest.warns(UserWarning, match="bias correction is extreme"):
        calibration_error_ci(
            classwise_calibration_error, y, p, n_bins=30, ci_method="bca", random_state=0
        )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_resamples": 5}, "`n_resamples` to be an integer >= 10"),
        ({"n_resamples": 100.0}, "`n_resamples` to be an integer >= 10"),
        ({"confidence_level": 1.0}, r"`confidence_level` to be a number in \(0, 1\)"),
        ({"confidence_level": "95%"}, r"`confidence_level` to be a number in \(0, 1\)"),
        ({"ci_method": "basic"}, "`ci_method` to be one of"),
        ({"method": "basic"}, r"takes no argument\(s\) \['method'\]"),
        ({"n_bin": 10}, r"takes no argument\(s\) \['n_bin'\].*'n_bins'"),
    ],
)
def test_bad_arguments_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        calibration_error_ci(expected_calibration_error, [0, 1, 1], [0.2, 0.7, 0.6], **kwargs)


def test_a_metric_without_sample_weight_is_rejected():
    def no_weights(y_true, y_prob):
        return 0.0

    with pytest.raises(ValueError, match="takes no `sample_weight`: calibration_error_ci"):
        calibration_error_ci(no_weights, [0, 1], [0.2, 0.7])
    with pytest.raises(ValueError, match="`metric` to be a metric function"):
        calibration_error_ci("ece", [0, 1], [0.2, 0.7])


@pytest.mark.parametrize("method, reference", [("percentile", "percentile"), ("bca", "BCa")])
def test_intervals_agree_with_scipys_bootstrap(method, reference):
    # a skewed statistic (the NLL of sharp, wrong-tailed forecasts), where BCa moves the
    # interval by about 0.015 from the percentile one; 20,000 replicates on each side
    # leave a Monte Carlo difference of about 0.003 (at most 150 rows: exact row
    # bootstrap, and BCa's jackknife deletes one row at a time, as scipy's does)
    rng = np.random.default_rng(5)
    p = rng.random(150) ** 3
    y = (rng.random(150) < np.sqrt(p)).astype(int)
    per_sample = -np.log(np.where(y == 1, p, 1 - p))
    ours = calibration_error_ci(
        negative_log_likelihood, y, p, n_resamples=20_000, ci_method=method, random_state=0
    )
    expected = bootstrap(
        (per_sample,), np.mean, n_resamples=20_000, method=reference, random_state=1
    ).confidence_interval
    assert ours.estimate == pytest.approx(per_sample.mean(), abs=1e-12)
    assert ours.low == pytest.approx(expected.low, abs=0.005)
    assert ours.high == pytest.approx(expected.high, abs=0.005)


def test_rows_of_weight_zero_are_not_resampled():
    y, proba = multiclass_data(300, 3, 40)
    weight = np.random.default_rng(41).random(300)
    padded_y, padded_proba = multiclass_data(500, 3, 42)
    padded = calibration_error_ci(
        expected_calibration_error,
        np.concatenate([y, padded_y]),
        np.vstack([proba, padded_proba]),
        sample_weight=np.concatenate([weight, np.zeros(500)]),
        random_state=0,
    )
    expected = calibration_error_ci(
        expected_calibration_error, y, proba, sample_weight=weight, random_state=0
    )
    np.testing.assert_allclose(padded.replicates, expected.replicates, rtol=1e-12)


@pytest.mark.parametrize("metric", [expected_calibration_error, smooth_calibration_error])
def test_one_positive_weight_gets_an_error_about_the_weights(metric):
    y, proba = multiclass_data(50, 3, 43)
    weight = np.zeros(50)
    weight[7] = 2.0
    with pytest.raises(ValueError, match="`sample_weight` to be positive on at least 2 samples"):
        calibration_error_ci(metric, y, proba, sample_weight=weight, n_resamples=10)


def test_a_metric_returning_more_than_a_number_gets_a_clear_error():
    y, proba = multiclass_data(200, 3, 44)
    with pytest.raises(ValueError, match="not a number.*drop return_bandwidth=True"):
        calibration_error_ci(smooth_ece, y, proba, return_bandwidth=True)


def test_the_unknown_keyword_error_names_the_keyword_only():
    with pytest.raises(ValueError) as error:
        calibration_error_ci(expected_calibration_error, [0, 1, 1], [0.2, 0.7, 0.6], n_bin=3)
    assert "plan" not in str(error.value) and "sample_weight`" not in str(error.value)


def test_ci_method_is_the_name_and_method_still_works_with_a_warning():
    y, proba = multiclass_data(500, 3, 45)
    new = calibration_error_ci(
        expected_calibration_error, y, proba, ci_method="bca", n_resamples=50, random_state=0
    )
    with pytest.warns(FutureWarning, match="renamed `ci_method`"):
        old = calibration_error_ci(
            expected_calibration_error, y, proba, method="bca", n_resamples=50, random_state=0
        )
    assert (old.low, old.high, old.ci_method) == (new.low, new.high, "bca")
    with pytest.warns(FutureWarning, match="renamed `ci_method`"):
        assert new.method == "bca"
    with pytest.raises(ValueError, match="pass the interval method as `ci_method` only"):
        calibration_error_ci(
            expected_calibration_error, y, proba, ci_method="bca", method="percentile"
        )
    # any other `method` is the metric's own option
    exact = calibration_error_ci(
        smooth_calibration_error, y, proba, method="exact", n_resamples=10, random_state=0
    )
    assert exact.estimate == smooth_calibration_error(y, proba, method="exact")


def test_the_result_prints_in_one_short_line():
    y, proba = multiclass_data(500, 3, 46)
    result = calibration_error_ci(expected_calibration_error, y, proba, random_state=0)
    text = repr(result)
    assert str(result) == text and "\n" not in text and len(text) < 160
    assert text.startswith(f"BootstrapInterval(estimate={result.estimate:.6g}, ")
    assert "n_resamples=1000" in text and "flags" not in text
    assert result["low"] == result.low and result.flags == {}


def test_intervals_that_exclude_the_estimate_or_collapse_are_flagged():
    # calibrated data: the plug-in classwise ECE is noise, which every replicate inflates
    rng = np.random.default_rng(47)
    logits = rng.normal(size=(4000, 10))
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = (proba.cumsum(axis=1) < rng.random((4000, 1))).sum(axis=1).clip(0, 9)
    percentile = calibration_error_ci(
        classwise_calibration_error, y, proba, n_resamples=200, random_state=0
    )
    assert percentile.estimate < percentile.low
    assert list(percentile.flags) == ["excludes_estimate"]
    assert "lies above the estimate" in percentile.flags["excludes_estimate"]
    assert "flags=['excludes_estimate']" in repr(percentile)
    with pytest.warns(UserWarning, match="bias correction is extreme"):
        bca = calibration_error_ci(
            classwise_calibration_error, y, proba, n_resamples=200, ci_method="bca", random_state=0
        )
    assert sorted(bca.flags) == ["excludes_estimate", "zero_width"]
    assert "collapses onto the smallest replicate" in bca.flags["zero_width"]
    # too few distinct resamples: every replicate is the same
    constant = calibration_error_ci(
        expected_calibration_error, [0, 1, 1, 0], [0.0, 1.0, 1.0, 0.0], n_resamples=20
    )
    assert constant.low == constant.high == constant.estimate == 0.0
    assert list(constant.flags) == ["zero_width"]


@pytest.mark.slow
def test_classwise_plan_bins_float32_probabilities_like_the_metric():
    # float32 probabilities equal to a float32 bin edge that rounds above the float64 edge
    # lie in the lower bin in float32, the metric's precision (the plan used float64)
    edge = np.float32(np.linspace(0, 1, 16)[5])
    assert float(edge) > np.linspace(0, 1, 16)[5]
    rng = np.random.default_rng(48)
    proba = rng.dirichlet(np.ones(3), 200).astype(np.float32)
    proba[:100, 0] = edge
    proba[:100, 1:] = (1 - edge) / 2
    y = rng.integers(0, 3, 200)
    data = check_predictions(y, proba)
    plan = KERNELS[classwise_calibration_error].plan(data)
    planned = plan.value(plan.accumulate(np.zeros(200, dtype=np.intp), 1))[0]
    assert planned == pytest.approx(classwise_calibration_error(y, proba), abs=1e-12)
