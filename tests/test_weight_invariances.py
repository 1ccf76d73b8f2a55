"""What sample weights mean to every metric.

Rows of weight 0 stand for no sample; integer weights stand for repeated rows where a
metric counts samples; the weights' scale is free where the docstrings say so, up to the
extremes of float64 (sums of squared weights must neither overflow nor underflow).
"""

import numpy as np
import pytest

from sklearn_calib.scoring import (
    adaptive_calibration_error,
    brier_score,
    calibration_decomposition,
    calibration_test,
    classwise_calibration_error,
    debiased_calibration_error,
    differentiable_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    refinement_loss,
    reliability_diagram,
    smooth_calibration_error,
    smooth_ece,
    smooth_reliability_diagram,
    top_label_accuracy,
    top_label_calibration_error,
)


def predictions(n, k, seed):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 2
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    truth = np.exp(logits / 2) / np.exp(logits / 2).sum(axis=1, keepdims=True)
    y = (truth.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1).clip(0, k - 1)
    return y, proba


def decomposed(**options):
    def metric(y, p, **kwargs):
        return list(calibration_decomposition(y, p, **options, **kwargs).values())

    return metric


def statistic_of(method):
    def metric(y, p, **kwargs):
        return list(calibration_test(y, p, method=method, **kwargs))

    return metric


def diagram(y, p, **kwargs):
    bins = reliability_diagram(y, p, confidence_level=0.9, n_bins=5, **kwargs)
    return np.concatenate([bins.count / bins.count.sum(), bins.accuracy, bins.accuracy_low])


def smooth_diagram(y, p, **kwargs):
    return smooth_reliability_diagram(y, p, **kwargs).accuracy


#: Every weighted metric, as name -> metric(y, p, sample_weight=...) giving numbers.
METRICS = {
    "ece": expected_calibration_error,
    "mce": maximum_calibration_error,
    "adaptive": adaptive_calibration_error,
    "classwise": classwise_calibration_error,
    "top_label": top_label_calibration_error,
    "top_label_quantile": lambda y, p, **kw: top_label_calibration_error(
        y, p, strategy="quantile", **kw
    ),
    "debiased": lambda y, p, **kw: debiased_calibration_error(y, p, n_bins=5, **kw),
    "smooth_ece": lambda y, p, **kw: smooth_ece(y, p, return_bandwidth=True, **kw),
    "sece": smooth_calibration_error,
    "dece": differentiable_calibration_error,
    "brier": brier_score,
    "nll": negative_log_likelihood,
    "accuracy": top_label_accuracy,
    "diagram": diagram,
    "smooth_diagram": smooth_diagram,
    "spiegelhalter": statistic_of("spiegelhalter"),
    "ks": statistic_of("ks"),
    "kuiper": statistic_of("kuiper"),
    "corp": decomposed(),
    "temperature_split": decomposed(score="log_loss", method="temperature"),
    "temperature_brier": decomposed(score="brier", method="temperature"),
    "refinement": refinement_loss,
}
#: Those that read integer weights as repeated rows (the tests, the debiased error and
#: the Clopper-Pearson intervals read weights as importances; the smooth errors' density
#: epsilon follows the mean weight).
COUNTING = sorted(
    set(METRICS)
    - {"debiased", "spiegelhalter", "ks", "kuiper", "diagram"}
    - {"smooth_ece", "smooth_diagram"}
)


def assert_same(got, expected, rtol=1e-9):
    np.testing.assert_allclose(np.ravel(got), np.ravel(expected), rtol=rtol, atol=1e-14)


@pytest.mark.parametrize("name", sorted(METRICS))
@pytest.mark.parametrize("weighted", [False, True])
def test_rows_of_weight_zero_change_nothing(name, weighted):
    metric = METRICS[name]
    y, p = predictions(60, 3, 0)
    extra_y, extra_p = predictions(400, 3, 1)
    weight = np.random.default_rng(2).random(60) + 0.1 if weighted else np.ones(60)
    expected = metric(y, p, sample_weight=weight) if weighted else metric(y, p)
    order = np.random.default_rng(3).permutation(460)
    all_y, all_p = np.concatenate([y, extra_y])[order], np.concatenate([p, extra_p])[order]
    all_weight = np.concatenate([weight, np.zeros(400)])[order]
    assert_same(metric(all_y, all_p, sample_weight=all_weight), expected)


def test_refinement_of_a_few_rows_ignores_rows_of_weight_zero():
    # the case that found it: 8 rows, then 992 more of weight 0
    y, p = predictions(8, 2, 4)
    _, extra = predictions(992, 2, 5)
    weight = np.concatenate([np.ones(8), np.zeros(992)])
    padded = refinement_loss(
        np.concatenate([y, np.zeros(992, int)]),
        np.vstack([p, extra]),
        sample_weight=weight,
        labels=[0, 1],
    )
    assert padded == pytest.approx(refinement_loss(y, p, labels=[0, 1]), rel=1e-9)
    repeated = refinement_loss(np.repeat(y, 3), np.repeat(p, 3, axis=0), labels=[0, 1])
    tripled = refinement_loss(y, p, sample_weight=np.full(8, 3), labels=[0, 1])
    assert tripled == pytest.approx(repeated, rel=1e-9)


@pytest.mark.parametrize("name", COUNTING)
def test_integer_weights_are_repeated_rows(name):
    metric = METRICS[name]
    y, p = predictions(50, 3, 6)
    weight = np.random.default_rng(7).integers(1, 4, 50)
    repeated = np.repeat(np.arange(50), weight)
    assert_same(metric(y, p, sample_weight=weight), metric(y[repeated], p[repeated]))


#: Those whose docstrings say the weights' scale does not matter.
SCALE_FREE = sorted(set(METRICS) - {"refinement", "temperature_split", "temperature_brier"})


@pytest.mark.parametrize("name", SCALE_FREE + ["refinement", "temperature_split"])
@pytest.mark.parametrize("scale", [1e160, 1e-200, 1e-160])
def test_the_weights_scale_is_free_to_the_extremes(name, scale):
    metric = METRICS[name]
    y, p = predictions(300, 3, 8)
    weight = np.random.default_rng(9).random(300) + 0.05
    assert_same(metric(y, p, sample_weight=weight * scale), metric(y, p, sample_weight=weight))


@pytest.mark.parametrize("name", SCALE_FREE)
@pytest.mark.parametrize("scale", [1e160, 1e-200, 1e-160])
def test_equal_weights_of_any_scale_are_no_weights(name, scale):
    # debiased error and Clopper-Pearson intervals: the sum of squared weights overflowed
    # (1e160) or underflowed (1e-200, and lost digits at 1e-160)
    metric = METRICS[name]
    y, p = predictions(300, 3, 10)
    assert_same(metric(y, p, sample_weight=np.full(300, scale)), metric(y, p), rtol=1e-12)


def test_weights_summing_to_infinity_are_rejected():
    y, p = predictions(10, 3, 11)
    with pytest.raises(ValueError, match="sums to infinity"):
        expected_calibration_error(y, p, sample_weight=np.full(10, 1e308))
