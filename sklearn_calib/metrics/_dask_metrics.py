"""The metric functions on Dask collections (registered with :mod:`._dispatch`).

Each handler takes the arguments of its metric function, checks the options the same
way, and computes through :mod:`._dask`: one or more passes of per-chunk sums merged on
the active Dask scheduler. See :mod:`._dask` for what is exact and what is bounded.
"""

import numbers

import numpy as np
from scipy.stats import norm as normal
from sklearn.utils import Bunch, check_random_state

from .._validation import check_confidence_level, check_n_bins
from ._accumulator_results import cumulative_tests, reliability
from ._dask import DaskPredictions, binned_sums, smooth_ece_of
from ._debiased import _debiased_from_bins
from ._dispatch import register
from ._hypothesis_tests import _ALTERNATIVES, _METHODS, CalibrationTestResult
from ._metrics import _NORMS, _STRATEGIES, CONVENTIONS, _calibration_error_from_bins, _check_option
from ._resampling import check_interval_options
from ._smooth import _check_smece_bandwidth
from ._smooth_grid import grid_sece
from ._top_label import _AVERAGES, _combine


def _binned_error(y_true, y_prob, n_bins, strategy, norm, convention, labels, sample_weight):
    n_bins = check_n_bins(n_bins)
    _check_option(strategy, "strategy", _STRATEGIES)
    _check_option(norm, "norm", _NORMS)
    _check_option(convention, "convention", CONVENTIONS)
    data = DaskPredictions(y_true, y_prob, sample_weight, labels)
    _, sums = binned_sums(data, n_bins, strategy, convention)
    return float(_calibration_error_from_bins(*sums[:3], norm))


@register("expected_calibration_error")
def expected_calibration_error(
    y_true,
    y_prob,
    *,
    n_bins=15,
    strategy="uniform",
    norm="l1",
    convention="top_label",
    labels=None,
    sample_weight=None,
):
    """:func:`~sklearn_calib.metrics.expected_calibration_error` of Dask input."""
    return _binned_error(y_true, y_prob, n_bins, strategy, norm, convention, labels, sample_weight)


@register("maximum_calibration_error")
def maximum_calibration_error(
    y_true,
    y_prob,
    *,
    n_bins=15,
    strategy="uniform",
    convention="top_label",
    labels=None,
    sample_weight=None,
):
    """:func:`~sklearn_calib.metrics.maximum_calibration_error` of Dask input."""
    return _binned_error(y_true, y_prob, n_bins, strategy, "max", convention, labels, sample_weight)


@register("adaptive_calibration_error")
def adaptive_calibration_error(
    y_true, y_prob, *, n_bins=15, norm="l1", convention="top_label", labels=None, sample_weight=None
):
    """:func:`~sklearn_calib.metrics.adaptive_calibration_error` of Dask input."""
    return _binned_error(
        y_true, y_prob, n_bins, "quantile", norm, convention, labels, sample_weight
    )


@register("debiased_calibration_error")
def debiased_calibration_error(
    y_true,
    y_prob,
    *,
    n_bins=15,
    strategy="quantile",
    convention="top_label",
    labels=None,
    sample_weight=None,
):
    """:func:`~sklearn_calib.metrics.debiased_calibration_error` of Dask input."""
    n_bins = check_n_bins(n_bins)
    _check_option(strategy, "strategy", _STRATEGIES)
    _check_option(convention, "convention", CONVENTIONS)
    data = DaskPredictions(y_true, y_prob, sample_weight, labels)
    _, sums = binned_sums(data, n_bins, strategy, convention)
    return float(_debiased_from_bins(*sums))


@register("reliability_diagram")
def reliability_diagram(
    y_true,
    y_prob,
    *,
    n_bins=15,
    strategy="uniform",
    convention="top_label",
    confidence_level=None,
    labels=None,
    sample_weight=None,
):
    """:func:`~sklearn_calib.metrics.reliability_diagram` of Dask input."""
    n_bins = check_n_bins(n_bins)
    _check_option(strategy, "strategy", _STRATEGIES)
    _check_option(convention, "convention", CONVENTIONS)
    level = 0.95 if confidence_level is None else check_confidence_level(confidence_level)
    data = DaskPredictions(y_true, y_prob, sample_weight, labels)
    edges, sums = binned_sums(data, n_bins, strategy, convention)
    diagram = reliability(sums, level)
    diagram.edges = edges
    if confidence_level is None:
        del diagram.accuracy_low, diagram.accuracy_high
    return diagram


def _accumulated(y_true, y_prob, labels, sample_weight, metrics, **options):
    data = DaskPredictions(y_true, y_prob, sample_weight, labels)
    return data.accumulate(metrics=metrics, **options)


@register("classwise_calibration_error")
def classwise_calibration_error(
    y_true, y_prob, *, n_bins=15, norm="l1", labels=None, sample_weight=None
):
    """:func:`~sklearn_calib.metrics.classwise_calibration_error` of Dask input."""
    _check_option(norm, "norm", _NORMS)
    accumulator = _accumulated(
        y_true, y_prob, labels, sample_weight, ["classwise_ece"], n_bins=n_bins
    )
    return float(_calibration_error_from_bins(*accumulator._state["classwise"], norm).mean())


@register("top_label_calibration_error")
def top_label_calibration_error(
    y_true,
    y_prob,
    *,
    n_bins=15,
    strategy="uniform",
    norm="l1",
    average="weighted",
    labels=None,
    sample_weight=None,
):
    """:func:`~sklearn_calib.metrics.top_label_calibration_error` of Dask input."""
    _check_option(strategy, "strategy", _STRATEGIES)
    _check_option(norm, "norm", _NORMS)
    _check_option(average, "average", _AVERAGES)
    if strategy != "uniform":
        raise ValueError(
            "top_label_calibration_error of Dask input takes strategy='uniform' only "
            "(equal-mass bins per predicted class would need a pass per class)."
        )
    accumulator = _accumulated(
        y_true, y_prob, labels, sample_weight, ["top_label_ece"], n_bins=n_bins
    )
    return float(_combine(*accumulator._state["predicted"], norm, average))


def _score_mean(y_true, y_prob, labels, sample_weight, column):
    accumulator = _accumulated(y_true, y_prob, labels, sample_weight, ["nll"])
    scores = accumulator._state["scores"]
    return float(scores[column] / scores[0])


@register("negative_log_likelihood")
def negative_log_likelihood(y_true, y_prob, *, labels=None, sample_weight=None):
    """:func:`~sklearn_calib.metrics.negative_log_likelihood` of Dask input."""
    return _score_mean(y_true, y_prob, labels, sample_weight, 1)


@register("brier_score")
def brier_score(y_true, y_prob, *, labels=None, sample_weight=None):
    """:func:`~sklearn_calib.metrics.brier_score` of Dask input."""
    return _score_mean(y_true, y_prob, labels, sample_weight, 2)


@register("top_label_accuracy")
def top_label_accuracy(y_true, y_prob, *, labels=None, sample_weight=None):
    """:func:`~sklearn_calib.metrics.top_label_accuracy` of Dask input."""
    return _score_mean(y_true, y_prob, labels, sample_weight, 3)


@register("smooth_ece")
def smooth_ece(
    y_true,
    y_prob,
    *,
    bandwidth="auto",
    return_bandwidth=False,
    convention="top_label",
    labels=None,
    sample_weight=None,
):
    """:func:`~sklearn_calib.metrics.smooth_ece` of Dask input."""
    bandwidth = _check_smece_bandwidth(bandwidth)
    if not isinstance(return_bandwidth, (bool, np.bool_)):
        raise ValueError(f"Expected `return_bandwidth` to be a bool, got {return_bandwidth!r}.")
    _check_option(convention, "convention", CONVENTIONS)
    data = DaskPredictions(y_true, y_prob, sample_weight, labels)
    error, bandwidth = smooth_ece_of(data, bandwidth, convention)
    return (error, bandwidth) if return_bandwidth else error


@register("smooth_calibration_error")
def smooth_calibration_error(
    y_true,
    y_prob,
    *,
    bandwidth=0.01,
    include_self=True,
    method="auto",
    convention="top_label",
    labels=None,
    sample_weight=None,
):
    """:func:`~sklearn_calib.metrics.smooth_calibration_error` of Dask input (binned)."""
    if include_self is not True or method == "exact":
        raise ValueError(
            "smooth_calibration_error of Dask input is binned on a fixed grid: it takes "
            "include_self=True and method='auto' or 'binned'."
        )
    _check_option(convention, "convention", CONVENTIONS)
    accumulator = _accumulated(
        y_true, y_prob, labels, sample_weight, ["sece"], convention=convention
    )
    error, _ = grid_sece(accumulator._state["grid"], accumulator.n_samples_total(), bandwidth)
    return error


@register("calibration_test")
def calibration_test(
    y_true,
    y_prob,
    *,
    method="spiegelhalter",
    alternative="two-sided",
    convention="top_label",
    labels=None,
    sample_weight=None,
):
    """:func:`~sklearn_calib.metrics.calibration_test` of Dask input."""
    _check_option(method, "method", _METHODS)
    _check_option(alternative, "alternative", _ALTERNATIVES)
    if method != "spiegelhalter" and alternative != "two-sided":
        raise ValueError(
            f"Expected `alternative='two-sided'` for method={method!r} (only Spiegelhalter's "
            f"test has one-sided forms), got {alternative!r}."
        )
    metrics = ["spiegelhalter"] if method == "spiegelhalter" else ["spiegelhalter", "ks"]
    accumulator = _accumulated(
        y_true, y_prob, labels, sample_weight, metrics, convention=convention
    )
    scores = accumulator._state["scores"]
    if method == "spiegelhalter":
        if scores[5] <= 0:
            raise ValueError(
                "Spiegelhalter's statistic is undefined: every weighted score is 0, 1/2 or 1, "
                "so the Brier score has no variance under the null; use method='ks'."
            )
        statistic = float(scores[4] / np.sqrt(scores[5]))
        tails = {
            "two-sided": 2.0 * normal.sf(abs(statistic)),
            "greater": normal.sf(statistic),
            "less": normal.cdf(statistic),
        }
        return CalibrationTestResult(statistic, float(min(1.0, tails[alternative])))
    ks, kuiper = cumulative_tests(accumulator._state["fine"], float(scores[6]))
    if ks is None:
        raise ValueError(
            "The cumulative-difference statistics are undefined: every weighted score is 0 "
            "or 1, so the outcomes have no variance under the null."
        )
    result = ks if method == "ks" else kuiper
    return CalibrationTestResult(result.statistic, result.pvalue)


#: The metrics whose intervals the Poisson bootstrap of Dask input resamples.
_INTERVAL_NAMES = {
    "expected_calibration_error": "ece",
    "maximum_calibration_error": "mce",
    "top_label_accuracy": "accuracy",
    "negative_log_likelihood": "nll",
    "brier_score": "brier",
    "classwise_calibration_error": "classwise_ece",
    "smooth_ece": "smooth_ece",
}


def _seed(random_state):
    """An integer seed of the counter-based generator from a ``random_state``."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state) % 2**63
    return int(check_random_state(random_state).randint(0, 2**31 - 1))


@register("calibration_error_ci")
def calibration_error_ci(
    metric,
    y_true,
    y_prob,
    *,
    n_resamples=1000,
    confidence_level=0.95,
    method="percentile",
    random_state=None,
    labels=None,
    sample_weight=None,
    **metric_kwargs,
):
    """:func:`~sklearn_calib.metrics.calibration_error_ci` of Dask input (Poisson bootstrap)."""
    n_resamples, confidence_level = check_interval_options(n_resamples, confidence_level)
    name = _INTERVAL_NAMES.get(getattr(metric, "__name__", None))
    if name is None or method != "percentile":
        raise ValueError(
            "calibration_error_ci of Dask input resamples by the Poisson bootstrap, with "
            f"method='percentile', the metrics {sorted(_INTERVAL_NAMES)}; got "
            f"{getattr(metric, '__name__', metric)!r} with method={method!r}."
        )
    options = dict(metric_kwargs)
    bandwidth = options.pop("bandwidth", "auto")
    if set(options) - {"n_bins", "convention"}:
        raise ValueError(
            f"calibration_error_ci of Dask input takes n_bins and convention (and smECE's "
            f"bandwidth) as options; got {sorted(metric_kwargs)}."
        )
    data = DaskPredictions(y_true, y_prob, sample_weight, labels)
    accumulator = data.accumulate(
        metrics=[name],
        n_resamples=n_resamples,
        interval_metrics=[name],
        random_state=_seed(random_state),
        **options,
    )
    result = accumulator.compute(confidence_level=confidence_level, smooth_bandwidth=bandwidth)
    interval = result.intervals[name]
    return Bunch(
        estimate=float(interval.estimate),
        low=interval.low,
        high=interval.high,
        replicates=interval.replicates,
        confidence_level=confidence_level,
        method="percentile",
    )
