"""Calibration metrics computed with numpy from predicted probabilities.

The metric functions (``_metrics``) bin with the library's one bin rule (``_binning``:
``(lower, upper]`` on the bin edges, 0 in the first bin). :mod:`sklearn_calib.scoring`
re-exports them with their scikit-learn scorers.
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

__all__ = [
    "NLL_EPS",
    "adaptive_calibration_error",
    "brier_score",
    "classwise_calibration_error",
    "differentiable_calibration_error",
    "expected_calibration_error",
    "maximum_calibration_error",
    "negative_log_likelihood",
    "reliability_diagram",
    "smooth_calibration_error",
    "top_label_accuracy",
]
