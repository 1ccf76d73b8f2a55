"""Each argument of a metric call is checked once, however many metrics the call computes."""

import sys
from collections import Counter

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from sklearn_calib import _validation
from sklearn_calib.metrics import metric_values
from sklearn_calib.scoring import (
    calibration_audit,
    calibration_error_ci,
    calibration_report,
    expected_calibration_error,
    get_scorer,
    negative_log_likelihood,
    reliability_diagram,
    smooth_calibration_error,
    smooth_ece,
    worst_group_calibration_error,
)

#: The check of each argument of a set of predictions.
CHECKS = {
    "check_probabilities": "y_prob",
    "_check_y_true": "y_true",
    "resolve_classes": "labels",
    "check_sample_weight": "sample_weight",
}


@pytest.fixture
def checks(monkeypatch):
    """Count the checks of each argument, wherever the package holds the check functions."""
    counts = Counter()
    for function_name, argument in CHECKS.items():
        original = getattr(_validation, function_name)

        def spy(*args, _original=original, _argument=argument, **kwargs):
            counts[_argument] += 1
            return _original(*args, **kwargs)

        for name, module in list(sys.modules.items()):
            if (
                name.startswith("sklearn_calib")
                and getattr(module, function_name, None) is original
            ):
                monkeypatch.setattr(module, function_name, spy)
    return counts


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(600, 3)) * 2
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = np.array(["a", "b", "c"])[(proba.cumsum(axis=1) < rng.random((600, 1))).sum(axis=1)]
    return y, proba, rng.random(600)


ONCE = {argument: 1 for argument in CHECKS.values()}


def test_calibration_report_checks_each_argument_once(checks, data):
    y, proba, weight = data
    labels = ["a", "b", "c"]
    calibration_report(y, proba, labels=labels, sample_weight=weight, n_resamples=20)
    assert checks == ONCE
    checks.clear()
    calibration_report(y, proba, labels=labels, sample_weight=weight, n_resamples=20)
    assert checks == ONCE


@pytest.mark.parametrize(
    "metric, options",
    [
        (expected_calibration_error, {"n_bins": 10}),
        (smooth_ece, {}),
        (smooth_calibration_error, {}),
        (negative_log_likelihood, {}),
    ],
)
@pytest.mark.slow
def test_calibration_error_ci_checks_each_argument_once(checks, data, metric, options):
    y, proba, weight = data
    calibration_error_ci(
        metric,
        y,
        proba,
        labels=["a", "b", "c"],
        sample_weight=weight,
        n_resamples=10,
        ci_method="bca",
        **options,
    )
    assert checks == ONCE


def test_metrics_and_scorers_check_each_argument_once(checks, data):
    y, proba, weight = data
    expected_calibration_error(y, proba, labels=["a", "b", "c"], sample_weight=weight)
    assert checks == ONCE
    checks.clear()
    metric_values(y, proba, labels=["a", "b", "c"])
    assert checks == ONCE
    model = LogisticRegression().fit(proba, y)
    for name in ("neg_ece", "neg_smooth_ece", "neg_refinement_log_loss"):
        checks.clear()
        get_scorer(name)(model, proba, y, sample_weight=weight)
        assert checks == ONCE


@pytest.mark.slow
def test_calls_with_groups_check_each_argument_once(checks, data):
    y, proba, weight = data
    groups = np.arange(len(y)) % 3
    options = {"labels": ["a", "b", "c"], "sample_weight": weight}
    calls = [
        lambda: expected_calibration_error(y, proba, groups=groups, **options),
        lambda: smooth_ece(y, proba, groups=groups, **options),
        lambda: reliability_diagram(y, proba, groups=groups, **options),
        lambda: worst_group_calibration_error(y, proba, groups=groups, **options),
        lambda: calibration_audit(y, proba, groups, n_resamples=20, **options),
        lambda: calibration_report(y, proba, groups=groups, n_resamples=20, **options),
    ]
    for call in calls:
        checks.clear()
        call()
        assert checks == ONCE
