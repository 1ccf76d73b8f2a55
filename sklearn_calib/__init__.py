"""sklearn_calib: calibrated neural classifiers, post-hoc calibrators and calibration metrics."""

from .calibrators import (
    CalibratedClassifier,
    EnsembleTemperatureScaling,
    HistogramBinning,
    IsotonicCalibration,
    MatrixScaling,
    PlattScaling,
    ScalingBinning,
    TemperatureScaling,
    VectorScaling,
)
from .estimators import MetaNetClassifier, NetClassifier
from .losses import get_loss
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
    "CalibratedClassifier",
    "EnsembleTemperatureScaling",
    "HistogramBinning",
    "IsotonicCalibration",
    "MatrixScaling",
    "MetaNetClassifier",
    "NetClassifier",
    "PlattScaling",
    "ScalingBinning",
    "TemperatureScaling",
    "VectorScaling",
    "get_loss",
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
