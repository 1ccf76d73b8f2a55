"""The metrics of a calibration report (the report table): one list, read from the metric
declarations and shared by the main job and the experiments, and their values."""

from typing import NamedTuple

from .._core._registry import KERNELS, declared
from .._functions._predictions import check_predictions


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


def report_metrics():
    """The metrics of the report table, in the order of its columns: the declared metrics
    with a column (``_core._registry``)."""
    return tuple(
        ReportMetric(
            metric.column.name, metric.column.label, metric.function, metric.takes("n_bins")
        )
        for metric in declared()
        if metric.column is not None
    )


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
    table = {metric.name: metric for metric in report_metrics()}
    if metrics is None:
        chosen = list(table.values())
    else:
        metrics = list(metrics)
        unknown = [name for name in metrics if name not in table]
        if unknown:
            raise ValueError(
                f"Unknown metric names {unknown}; expected names from {sorted(table)}."
            )
        chosen = [table[name] for name in metrics]
    data = check_predictions(y_true, y_prob, labels=labels)
    values = {}
    for metric in chosen:
        options = {"n_bins": n_bins} if metric.binned else {}
        values[metric.name] = float(KERNELS[metric.function].compute(data, **options))
    return values
