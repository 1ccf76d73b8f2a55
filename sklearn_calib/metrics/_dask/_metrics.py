"""The metric functions, ``calibration_test`` and ``calibration_error_ci`` on Dask
collections.

Each handler gets the arguments of its function's call (a Bunch, defaults filled in),
checks the options the same way, and computes through ``_chunks``: one or more passes of
per-chunk sums merged on the active Dask scheduler (see ``_chunks`` for what is exact
and what is bounded). A metric's handler is named in its declaration
(``metrics/_catalogue.py``); the statistics' are registered here.
"""

import numbers

import numpy as np
from scipy.stats import norm as normal
from sklearn.utils import check_random_state

from ..._validation import check_confidence_level, check_n_bins, check_option
from .._core._dispatch import register_handler
from .._core._registry import declared
from .._core._resampling import check_interval_options
from .._core._scores import CONVENTIONS
from .._functions._binned import _NORMS, _STRATEGIES, _calibration_error_from_bins
from .._functions._debiased import _debiased_from_bins
from .._functions._smece import _check_smece_bandwidth
from .._functions._top_label import _AVERAGES, _combine
from .._statistics._bootstrap import _check_ci_method
from .._statistics._hypothesis_tests import (
    CalibrationTestResult,
    check_test_options,
    reason_undefined,
    undefined_error,
)
from .._streaming._layout import SPREAD, VARIANCE
from .._streaming._results import (
    cumulative_tests,
    reliability,
    scaled_bins,
    spiegelhalter_statistic,
)
from .._streaming._smooth_grid import grid_sece
from ._chunks import DaskPredictions, binned_sums, smooth_ece_of


def _data(call):
    return DaskPredictions(call.y_true, call.y_prob, call.sample_weight, call.labels)


def _bins(call, strategy):
    """The exact bins' edges and sums (an accumulator's ``top``, in those bins)."""
    n_bins = check_n_bins(call.n_bins)
    check_option(strategy, "strategy", _STRATEGIES)
    check_option(call.convention, "convention", CONVENTIONS)
    return binned_sums(_data(call), n_bins, strategy, call.convention)


def _binned_error(call, strategy, norm):
    check_option(norm, "norm", _NORMS)
    _, sums = _bins(call, strategy)
    return float(_calibration_error_from_bins(*sums[:3], norm))


def expected_calibration_error(call):
    """:func:`~sklearn_calib.metrics.expected_calibration_error` of Dask input."""
    return _binned_error(call, call.strategy, call.norm)


def maximum_calibration_error(call):
    """:func:`~sklearn_calib.metrics.maximum_calibration_error` of Dask input."""
    return _binned_error(call, call.strategy, "max")


def adaptive_calibration_error(call):
    """:func:`~sklearn_calib.metrics.adaptive_calibration_error` of Dask input."""
    return _binned_error(call, "quantile", call.norm)


def debiased_calibration_error(call):
    """:func:`~sklearn_calib.metrics.debiased_calibration_error` of Dask input."""
    _, sums = _bins(call, call.strategy)
    return float(_debiased_from_bins(*scaled_bins(sums)))


def reliability_diagram(call):
    """:func:`~sklearn_calib.metrics.reliability_diagram` of Dask input."""
    level = call.confidence_level
    level = None if level is None else check_confidence_level(level)
    edges, sums = _bins(call, call.strategy)
    diagram = reliability(sums, level)
    diagram.edges = edges
    return diagram


def _accumulated(call, metrics, **options):
    return _data(call).accumulate(metrics=metrics, **options)


def classwise_calibration_error(call):
    """:func:`~sklearn_calib.metrics.classwise_calibration_error` of Dask input."""
    check_option(call.norm, "norm", _NORMS)
    accumulator = _accumulated(call, ["classwise_ece"], n_bins=call.n_bins)
    return float(_calibration_error_from_bins(*accumulator._state["classwise"], call.norm).mean())


def top_label_calibration_error(call):
    """:func:`~sklearn_calib.metrics.top_label_calibration_error` of Dask input."""
    check_option(call.strategy, "strategy", _STRATEGIES)
    check_option(call.norm, "norm", _NORMS)
    check_option(call.average, "average", _AVERAGES)
    if call.strategy != "uniform":
        raise ValueError(
            "top_label_calibration_error of Dask input takes strategy='uniform' only "
            "(equal-mass bins per predicted class would need a pass per class)."
        )
    accumulator = _accumulated(call, ["top_label_ece"], n_bins=call.n_bins)
    return float(_combine(*accumulator._state["predicted"], call.norm, call.average))


def _score_mean(call, column):
    scores = _accumulated(call, ["nll"])._state["scores"]
    return float(scores[column] / scores[0])


def negative_log_likelihood(call):
    """:func:`~sklearn_calib.metrics.negative_log_likelihood` of Dask input."""
    return _score_mean(call, 1)


def brier_score(call):
    """:func:`~sklearn_calib.metrics.brier_score` of Dask input."""
    return _score_mean(call, 2)


def top_label_accuracy(call):
    """:func:`~sklearn_calib.metrics.top_label_accuracy` of Dask input."""
    return _score_mean(call, 3)


def smooth_ece(call):
    """:func:`~sklearn_calib.metrics.smooth_ece` of Dask input."""
    bandwidth = _check_smece_bandwidth(call.bandwidth)
    if not isinstance(call.return_bandwidth, (bool, np.bool_)):
        raise ValueError(
            f"Expected `return_bandwidth` to be a bool, got {call.return_bandwidth!r}."
        )
    check_option(call.convention, "convention", CONVENTIONS)
    error, bandwidth = smooth_ece_of(_data(call), bandwidth, call.convention)
    return (error, bandwidth) if call.return_bandwidth else error


def smooth_calibration_error(call):
    """:func:`~sklearn_calib.metrics.smooth_calibration_error` of Dask input (binned)."""
    if call.include_self is not True or call.method == "exact":
        raise ValueError(
            "smooth_calibration_error of Dask input is binned on a fixed grid: it takes "
            "include_self=True and method='auto' or 'binned'."
        )
    check_option(call.convention, "convention", CONVENTIONS)
    accumulator = _accumulated(call, ["sece"], convention=call.convention)
    error, _ = grid_sece(accumulator._state["grid"], accumulator.n_positive_rows(), call.bandwidth)
    return error


def undefined_test(scores, method):
    """:func:`reason_undefined` of a test from an accumulator's ``scores``: the weighted
    ``s (1 - s)`` terms are positive when some score lies in (0, 1), Spiegelhalter's
    spread when one of them is not 1/2."""
    return reason_undefined(method, bool(scores[VARIANCE].any()), bool(scores[SPREAD].any()))


@register_handler("calibration_test")
def calibration_test(call):
    """:func:`~sklearn_calib.metrics.calibration_test` of Dask input."""
    method, alternative = call.method, call.alternative
    check_test_options(method, alternative)
    metrics = ["spiegelhalter"] if method == "spiegelhalter" else ["spiegelhalter", "ks"]
    accumulator = _accumulated(call, metrics, convention=call.convention)
    scores = accumulator._state["scores"]
    reason = undefined_test(scores, method)
    if reason is not None:
        raise undefined_error(method, reason)
    if method == "spiegelhalter":
        statistic = spiegelhalter_statistic(scores)
        tails = {
            "two-sided": 2.0 * normal.sf(abs(statistic)),
            "greater": normal.sf(statistic),
            "less": normal.cdf(statistic),
        }
        return CalibrationTestResult(statistic, float(min(1.0, tails[alternative])))
    ks, kuiper = cumulative_tests(accumulator._state["fine"], scores)
    result = ks if method == "ks" else kuiper
    return CalibrationTestResult(result.statistic, result.pvalue)


def _resampled_functions():
    """The metric functions whose intervals the Poisson bootstrap of Dask input resamples,
    to their accumulator names."""
    return {
        metric.function: metric.name
        for metric in declared()
        if metric.function is not None
        and metric.streaming is not None
        and metric.streaming.interval is not None
    }


def seed_of(random_state):
    """An integer seed of the counter-based generator from a ``random_state``."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state) % 2**63
    return int(check_random_state(random_state).randint(0, 2**31 - 1))


@register_handler("calibration_error_ci")
def calibration_error_ci(call):
    """:func:`~sklearn_calib.metrics.calibration_error_ci` of Dask input (Poisson bootstrap)."""
    options = dict(call.metric_kwargs)
    ci_method = _check_ci_method(call.ci_method, options)
    n_resamples, confidence_level = check_interval_options(call.n_resamples, call.confidence_level)
    metric = call.metric
    resampled = _resampled_functions()
    name = resampled.get(metric)
    if name is None or ci_method != "percentile":
        raise ValueError(
            "calibration_error_ci of Dask input resamples by the Poisson bootstrap, with "
            f"ci_method='percentile', the metrics {sorted(f.__name__ for f in resampled)}; "
            f"got {getattr(metric, '__name__', metric)!r} with ci_method={ci_method!r}."
        )
    bandwidth = options.pop("bandwidth", "auto")
    if set(options) - {"n_bins", "convention"}:
        raise ValueError(
            "calibration_error_ci of Dask input takes n_bins and convention (and smECE's "
            f"bandwidth) as options; got {sorted(options)}."
        )
    accumulator = _data(call).accumulate(
        metrics=[name],
        n_resamples=n_resamples,
        interval_metrics=[name],
        random_state=seed_of(call.random_state),
        **options,
    )
    result = accumulator.compute(confidence_level=confidence_level, smooth_bandwidth=bandwidth)
    return result.intervals[name]
