"""Calibration metrics computed with numpy from predicted probabilities.

The metric functions (``_metrics``) bin with the library's one bin rule (``_binning``:
``(lower, upper]`` on the bin edges, 0 in the first bin). :mod:`sklearn_calib.scoring`
re-exports them with their scikit-learn scorers. :data:`REPORT_METRICS` is the one list
of the metrics a calibration report shows (``_report``), and :func:`metric_values`
computes them for one set of predictions.
"""

from ._metrics import (
    NLL_EPS,
    adaptive_calibration_error,
    brier_score,
    classwise_calibration_error,
    differentiable_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    reliability_diagram,
    smooth_calibration_error,
    top_label_accuracy,
)
from ._report import REPORT_METRICS, ReportMetric, metric_values

__all__ = [
    "NLL_EPS",
    "REPORT_METRICS",
    "ReportMetric",
    "adaptive_calibration_error",
    "brier_score",
    "classwise_calibration_error",
    "differentiable_calibration_error",
    "expected_calibration_error",
    "maximum_calibration_error",
    "metric_values",
    "negative_log_likelihood",
    "reliability_diagram",
    "smooth_calibration_error",
    "top_label_accuracy",
]
