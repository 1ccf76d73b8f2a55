"""The calibration report table printed by the main job."""

from ._metrics import (
    adaptive_calibration_error,
    brier_score,
    classwise_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    smooth_calibration_error,
    top_label_accuracy,
)

#: Report columns: name, metric, and whether it takes ``n_bins``.
REPORT_METRICS = (
    ("accuracy", top_label_accuracy, False),
    ("NLL", negative_log_likelihood, False),
    ("Brier", brier_score, False),
    ("ECE", expected_calibration_error, True),
    ("MCE", maximum_calibration_error, True),
    ("AdaECE", adaptive_calibration_error, True),
    ("cw-ECE", classwise_calibration_error, True),
    ("SECE", smooth_calibration_error, False),
)

#: Column of the fitted temperature, filled for temperature-scaled models only.
TEMPERATURE_COLUMN = "T"


def calibration_report(y_true, y_prob, *, labels=None, n_bins=15, temperature=None):
    """Compute every metric of the report for one set of predictions.

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
    temperature : float, default=None
        The temperature of a temperature-scaled model, reported in the column
        ``TEMPERATURE_COLUMN``; None leaves the column out.

    Returns
    -------
    report : dict of str to float
        One entry per column of ``REPORT_METRICS``, in order, then the temperature if given.
    """
    report = {}
    for name, metric, binned in REPORT_METRICS:
        options = {"n_bins": n_bins} if binned else {}
        report[name] = metric(y_true, y_prob, labels=labels, **options)
    if temperature is not None:
        report[TEMPERATURE_COLUMN] = float(temperature)
    return report


def format_report(reports, *, digits=4):
    """Format reports as a plain-text table, one row per model.

    The columns are the union of the reports' entries, in order of appearance; a row
    without an entry shows "-".

    Parameters
    ----------
    reports : dict of str to dict of str to float
        Row name (a model) to its report from :func:`calibration_report`.
    digits : int, default=4
        Decimals shown.

    Returns
    -------
    table : str
    """
    columns = list(dict.fromkeys(name for report in reports.values() for name in report))
    first = max([len("model"), *map(len, reports)])
    width = max([digits + 3, *map(len, columns)])
    lines = ["model".ljust(first) + "".join(f"  {name:>{width}}" for name in columns)]
    lines.append("-" * len(lines[0]))
    for model, report in reports.items():
        cells = "".join(
            f"  {report[name]:>{width}.{digits}f}" if name in report else "  " + "-".rjust(width)
            for name in columns
        )
        lines.append(model.ljust(first) + cells)
    return "\n".join(lines)
