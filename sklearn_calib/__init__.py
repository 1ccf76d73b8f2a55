"""sklearn_calib: calibrated neural classifiers, post-hoc calibrators and calibration metrics."""

from .plotting import ReliabilityDisplay
from .scoring import (
    adaptive_calibration_error,
    brier_score,
    classwise_calibration_error,
    differentiable_calibration_error,
    expected_calibration_error,
    get_scorer,
    get_scorer_names,
    make_calibration_scorer,
    maximum_calibration_error,
    negative_log_likelihood,
    reliability_diagram,
    smooth_calibration_error,
    top_label_accuracy,
)

__version__ = "0.1.0"

__all__ = [
    "ReliabilityDisplay",
    "__version__",
    "adaptive_calibration_error",
    "brier_score",
    "classwise_calibration_error",
    "differentiable_calibration_error",
    "expected_calibration_error",
    "get_scorer",
    "get_scorer_names",
    "make_calibration_scorer",
    "maximum_calibration_error",
    "negative_log_likelihood",
    "reliability_diagram",
    "smooth_calibration_error",
    "top_label_accuracy",
]
