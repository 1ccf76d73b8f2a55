"""Evaluate the calibration of classifiers: post-hoc calibration on held-out scores, then
the metrics of every prediction as one table.

This is the pipeline shared by the main job (``python -m sklearn_calib``) and the
experiments of the repository's ``benchmarks/``:

1. a fitted classifier scores a calibration part and a test part
   (:func:`~sklearn_calib.calibrators.classifier_scores`: ``decision_function`` as logits
   when it has one, else ``predict_proba`` as probabilities, the rule of
   :class:`~sklearn_calib.calibrators.CalibratedClassifier`, re-exported here);
2. each post-hoc calibrator is fitted on the calibration scores
   (:func:`~sklearn_calib.calibrators.fit_calibrator`, as ``CalibratedClassifier`` fits
   it) and calibrates the test scores (:func:`calibrate_scores`;
   :func:`posthoc_predictions` does both steps for every calibrator);
3. every prediction is measured with the metrics of
   :data:`sklearn_calib.metrics.REPORT_METRICS`, with bootstrap intervals for the
   metrics asked for (:func:`evaluation_table`), and printed (:func:`format_table`).
"""

from typing import NamedTuple

from ._deprecation import module_getattr
from .calibrators import classifier_scores, fit_calibrator
from .metrics import REPORT_METRICS, calibration_error_ci, metric_values

__all__ = [
    "Prediction",
    "calibrate_scores",
    "classifier_scores",
    "evaluation_table",
    "format_table",
    "posthoc_predictions",
]

#: Column of the fitted temperature, filled for temperature-scaled predictions only.
_TEMPERATURE_COLUMN = "T"


class Prediction(NamedTuple):
    """Test probabilities of one model and the temperature that scaled them, if any.

    Attributes
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Predicted probabilities.
    temperature : float or None
        The fitted temperature of a temperature-scaling calibrator, else None.
    """

    proba: object
    temperature: float | None = None


def calibrate_scores(
    calibrator, calibration_scores, y_calibration, test_scores, *, input=None, classes=None
):
    """Fit a clone of ``calibrator`` on held-out scores and calibrate ``test_scores``.

    Parameters
    ----------
    calibrator : calibrator
        A calibrator of :mod:`sklearn_calib.calibrators`; it is cloned, never changed.
    calibration_scores : array-like of shape (n_calibration, n_classes) or (n_calibration,)
        Scores of the calibration part, never seen in training.
    y_calibration : array-like of shape (n_calibration,)
        Labels of the calibration part.
    test_scores : array-like of shape (n_test, n_classes) or (n_test,)
        Scores to calibrate.
    input : {"logits", "probabilities"}, default=None
        What the scores are; None keeps the calibrator's ``input``.
    classes : array-like of shape (n_classes,), default=None
        Label of each score column (the classifier's ``classes_``); None for the sorted
        labels of ``y_calibration`` or column indices, see
        :mod:`sklearn_calib.calibrators`.

    Returns
    -------
    proba : ndarray of shape (n_test, n_classes)
        Calibrated test probabilities.
    fitted : calibrator
        The fitted clone.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import TemperatureScaling
    >>> from sklearn_calib.evaluation import calibrate_scores
    >>> rng = np.random.default_rng(0)
    >>> logits = 3 * rng.standard_normal((200, 3))
    >>> y = rng.integers(0, 3, 200)
    >>> proba, fitted = calibrate_scores(TemperatureScaling(), logits[:100], y[:100], logits[100:])
    >>> proba.shape, bool(fitted.temperature_ > 1)  # random labels: flatten the scores
    ((100, 3), True)
    """
    fitted = fit_calibrator(
        calibrator, calibration_scores, y_calibration, input=input, classes=classes
    )
    return fitted.predict_proba(test_scores), fitted


def posthoc_predictions(estimator, calibrators, X_calibration, y_calibration, X_test):
    """Test probabilities of a fitted classifier, as is and after each post-hoc calibrator.

    Each calibrator is fitted on the classifier's scores of the calibration part
    (:func:`classifier_scores`), as ``CalibratedClassifier(FrozenEstimator(estimator),
    calibrator=calibrator)`` would fit it.

    Parameters
    ----------
    estimator : fitted classifier
        The classifier whose scores are calibrated.
    calibrators : dict of str to calibrator
        Name (a row suffix such as ``"TS"``) to an unfitted calibrator.
    X_calibration : array-like
        Calibration part, never seen in training.
    y_calibration : array-like of shape (n_calibration,)
        Its labels.
    X_test : array-like
        Test part.

    Returns
    -------
    predictions : dict of str to Prediction
        ``""`` for the classifier's own ``predict_proba``, then one entry per calibrator;
        the temperature is that of a fitted calibrator with ``temperature_``.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import train_test_split
    >>> from sklearn_calib.calibrators import HistogramBinning, TemperatureScaling
    >>> from sklearn_calib.evaluation import posthoc_predictions
    >>> X, y = load_digits(return_X_y=True)
    >>> X_fit, X_test, y_fit, y_test = train_test_split(X / 16, y, random_state=0)
    >>> X_train, X_cal, y_train, y_cal = train_test_split(X_fit, y_fit, random_state=0)
    >>> model = LogisticRegression(max_iter=1000).fit(X_train, y_train)
    >>> calibrators = {"TS": TemperatureScaling(), "HB": HistogramBinning()}
    >>> predictions = posthoc_predictions(model, calibrators, X_cal, y_cal, X_test)
    >>> list(predictions), predictions["TS"].proba.shape
    (['', 'TS', 'HB'], (450, 10))
    """
    predictions = {"": Prediction(estimator.predict_proba(X_test))}
    calibration_scores, kind = classifier_scores(estimator, X_calibration)
    test_scores = classifier_scores(estimator, X_test)[0]
    for name, calibrator in calibrators.items():
        proba, fitted = calibrate_scores(
            calibrator,
            calibration_scores,
            y_calibration,
            test_scores,
            input=kind,
            classes=estimator.classes_,
        )
        predictions[name] = Prediction(proba, getattr(fitted, "temperature_", None))
    return predictions


def _interval_column(label, confidence_level=0.95):
    """Return the title of the column of a metric's interval in :func:`evaluation_table`
    (``"ECE 95% CI"`` for the label ``"ECE"``)."""
    return f"{label} {100 * confidence_level:g}% CI"


def evaluation_table(
    predictions,
    y_true,
    *,
    labels=None,
    n_bins=15,
    intervals=(),
    confidence_level=0.95,
    n_resamples=1000,
    random_state=None,
):
    """Measure every prediction with the metrics of a calibration report.

    Parameters
    ----------
    predictions : dict of str to Prediction
        Row name to its predictions of the samples ``y_true`` labels.
    y_true : array-like of shape (n_samples,)
        True labels.
    labels : array-like of shape (n_classes,), default=None
        The class of each probability column.
    n_bins : int, default=15
        Number of bins of the binned metrics.
    intervals : iterable of str, default=()
        Names of metrics of :data:`~sklearn_calib.metrics.REPORT_METRICS` (``"ece"``,
        ``"nll"``, ...) that get a bootstrap interval over the samples
        (:func:`~sklearn_calib.metrics.calibration_error_ci`, percentile), in a column
        ``"<label> <level>% CI"`` (``"ECE 95% CI"``) right after the metric's: how much
        the value would vary over other samples of the same size.
    confidence_level : float, default=0.95
        Coverage of the intervals.
    n_resamples : int, default=1000
        Bootstrap replicates of each interval.
    random_state : int, RandomState instance or None, default=None
        Seeds the resampling; an int resamples the same rows for every prediction.

    Returns
    -------
    table : dict of str to dict of str to float or tuple
        Row name to column title to value: the columns are the labels of
        :data:`~sklearn_calib.metrics.REPORT_METRICS`, each metric of ``intervals``
        followed by its interval ``(low, high)``, then ``"T"`` for a prediction with a
        temperature.

    Examples
    --------
    >>> from sklearn_calib.evaluation import Prediction, evaluation_table
    >>> table = evaluation_table({"model": Prediction([0.2, 0.7, 0.4], 1.5)}, [0, 1, 1])
    >>> list(table["model"])
    ['accuracy', 'NLL', 'Brier', 'ECE', 'MCE', 'AdaECE', 'cw-ECE', 'SECE', 'T']
    >>> table = evaluation_table({"model": Prediction([0.2, 0.7, 0.4])}, [0, 1, 1],
    ...                          intervals=["ece"], random_state=0)
    >>> list(table["model"])[3:5]
    ['ECE', 'ECE 95% CI']
    """
    intervals = set(intervals)
    known = {metric.name for metric in REPORT_METRICS}
    if not intervals <= known:
        raise ValueError(
            f"Expected `intervals` to name metrics of REPORT_METRICS {sorted(known)}, got "
            f"{sorted(intervals - known)}."
        )
    table = {}
    for name, (proba, temperature) in predictions.items():
        values = metric_values(y_true, proba, labels=labels, n_bins=n_bins)
        row = {}
        for metric in REPORT_METRICS:
            row[metric.label] = values[metric.name]
            if metric.name in intervals:
                options = {"n_bins": n_bins} if metric.binned else {}
                interval = calibration_error_ci(
                    metric.function,
                    y_true,
                    proba,
                    n_resamples=n_resamples,
                    confidence_level=confidence_level,
                    random_state=random_state,
                    labels=labels,
                    **options,
                )
                row[_interval_column(metric.label, confidence_level)] = (
                    float(interval.low),
                    float(interval.high),
                )
        if temperature is not None:
            row[_TEMPERATURE_COLUMN] = float(temperature)
        table[name] = row
    return table


def _cell(value, digits):
    """A value, or an interval ``(low, high)`` as ``[low, high]``."""
    if isinstance(value, tuple):
        low, high = value
        return f"[{low:.{digits}f}, {high:.{digits}f}]"
    return f"{value:.{digits}f}"


def format_table(table, *, digits=4):
    """Format a table as plain text, one line per row.

    The columns are the union of the rows' entries, in order of appearance; a row without
    an entry shows "-". Intervals ``(low, high)`` show as ``[low, high]``; the columns
    are separated by at least two spaces.

    Parameters
    ----------
    table : dict of str to dict of str to float or tuple
        Row name (a model) to column title to value, as from :func:`evaluation_table`.
    digits : int, default=4
        Decimals shown.

    Returns
    -------
    text : str
        The table, one line per row.

    Examples
    --------
    >>> from sklearn_calib.evaluation import format_table
    >>> print(format_table({"a": {"ECE": 0.05, "T": 1.5}, "b": {"ECE": 0.1}}, digits=2))
    model    ECE      T
    -------------------
    a       0.05   1.50
    b       0.10      -
    >>> print(format_table({"a": {"ECE": 0.05, "ECE 95% CI": (0.03, 0.08)}}, digits=2))
    model    ECE    ECE 95% CI
    --------------------------
    a       0.05  [0.03, 0.08]
    """
    columns = list(dict.fromkeys(name for row in table.values() for name in row))
    cells = {
        model: {name: _cell(value, digits) for name, value in row.items()}
        for model, row in table.items()
    }
    intervals = {
        name for row in table.values() for name, value in row.items() if isinstance(value, tuple)
    }
    # the values share one width, each column of intervals has its own
    common = max([digits + 3, *(len(name) for name in columns if name not in intervals)])
    widths = {
        name: max([len(name), *(len(row[name]) for row in cells.values() if name in row)])
        if name in intervals
        else common
        for name in columns
    }
    first = max([len("model"), *map(len, table)])
    lines = ["model".ljust(first) + "".join(f"  {name:>{widths[name]}}" for name in columns)]
    lines.append("-" * len(lines[0]))
    for model, row in cells.items():
        lines.append(
            model.ljust(first)
            + "".join(f"  {row.get(name, '-'):>{widths[name]}}" for name in columns)
        )
    return "\n".join(lines)


__getattr__ = module_getattr(
    __name__,
    {
        "TEMPERATURE_COLUMN": (_TEMPERATURE_COLUMN, 'the temperature\'s column is "T"'),
        "interval_column": (
            _interval_column,
            'an interval\'s column is "<label> <level>% CI", such as "ECE 95% CI"',
        ),
    },
)
