"""The metrics of a calibration report: one list, shared by the main job and the experiments."""

from typing import NamedTuple

from .._functions._binned import (
    adaptive_calibration_error,
    brier_score,
    classwise_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    top_label_accuracy,
)
from .._functions._kernels import KERNELS
from .._functions._predictions import check_predictions
from .._functions._smece import smooth_calibration_error


class ReportMetric(NamedTuple):
    """One metric of :data:`REPORT_METRICS`.

    Attributes
    ----------
    name : str
        Short identifier, used as a key (``"ece"``).
    label : str
        Column title of a printed table (``"ECE"``).
    function : callable
        ``function(y_true, y_prob, *, labels=None, **options)`` returning a float.
    binned : bool
        Whether ``function`` takes ``n_bins``.
    """

    name: str
    label: str
    function: object
    binned: bool


#: The metrics of a calibration report, in the order of its columns.
REPORT_METRICS = (
    ReportMetric("accuracy", "accuracy", top_label_accuracy, False),
    ReportMetric("nll", "NLL", negative_log_likelihood, False),
    ReportMetric("brier", "Brier", brier_score, False),
    ReportMetric("ece", "ECE", expected_calibration_error, True),
    ReportMetric("mce", "MCE", maximum_calibration_error, True),
    ReportMetric("ada_ece", "AdaECE", adaptive_calibration_error, True),
    ReportMetric("cw_ece", "cw-ECE", classwise_calibration_error, True),
    ReportMetric("sece", "SECE", smooth_calibration_error, False),
)

_BY_NAME = {metric.name: metric for metric in REPORT_METRICS}


def metric_values(y_true, y_prob, *, labels=None, n_bins=15, metrics=None):
    """Compute the metrics of :data:`REPORT_METRICS` for one set of predictions.

    The predictions are checked once, whatever the number of metrics.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    n_bins : int, default=15
        Number of bins of the binned metrics.
    metrics : iterable of str, default=None
        Names of the metrics to compute, from :data:`REPORT_METRICS`; None for all.

    Returns
    -------
    values : dict of str to float
        Metric name to value, in the order of ``metrics`` (of :data:`REPORT_METRICS`
        when None).

    Examples
    --------
    >>> from sklearn_calib.metrics import metric_values
    >>> values = metric_values([0, 1, 1], [0.2, 0.7, 0.4], metrics=["accuracy", "ece"])
    >>> {name: round(value, 4) for name, value in values.items()}
    {'accuracy': 0.6667, 'ece': 0.3667}
    """
    if metrics is None:
        chosen = REPORT_METRICS
    else:
        metrics = list(metrics)
        unknown = [name for name in metrics if name not in _BY_NAME]
        if unknown:
            raise ValueError(
                f"Unknown metric names {unknown}; expected names from {sorted(_BY_NAME)}."
            )
        chosen = [_BY_NAME[name] for name in metrics]
    data = check_predictions(y_true, y_prob, labels=labels)
    values = {}
    for metric in chosen:
        options = {"n_bins": n_bins} if metric.binned else {}
        values[metric.name] = float(KERNELS[metric.function].compute(data, **options))
    return values
