"""sklearn_calib: calibrated neural classifiers, post-hoc calibrators and calibration metrics.

The top-level names are imported from their parts when first used (a module
``__getattr__``, PEP 562), so that ``import sklearn_calib`` is quick and the metrics load
neither torch nor skorch: the calibrators import torch, the estimators skorch.
"""

import importlib

#: The version of sklearn_calib installed, as a string (``"0.2.0"``).
__version__ = "0.2.0"

#: The top-level names of each part of the package.
_EXPORTS = {
    "calibrators": (
        "BetaCalibration",
        "CalibratedClassifier",
        "CalibratorSelector",
        "DirichletCalibration",
        "EnsembleTemperatureScaling",
        "HistogramBinning",
        "IsotonicCalibration",
        "MatrixScaling",
        "MulticalibrationBoosting",
        "PlattScaling",
        "QuadraticScaling",
        "ScalingBinning",
        "StructuredMatrixScaling",
        "StructuredVectorScaling",
        "TemperatureScaling",
        "VectorScaling",
    ),
    "estimators": ("MetaNetClassifier", "NetClassifier"),
    "losses": ("get_loss",),
    "plotting": ("ReliabilityDisplay",),
    "scoring": (
        "adaptive_calibration_error",
        "brier_score",
        "calibration_audit",
        "calibration_decomposition",
        "calibration_error_ci",
        "calibration_report",
        "calibration_test",
        "classwise_calibration_error",
        "debiased_calibration_error",
        "differentiable_calibration_error",
        "expected_calibration_error",
        "get_scorer",
        "get_scorer_names",
        "make_calibration_scorer",
        "make_worst_group_scorer",
        "maximum_calibration_error",
        "negative_log_likelihood",
        "refinement_loss",
        "reliability_diagram",
        "smooth_calibration_error",
        "smooth_ece",
        "smooth_reliability_diagram",
        "top_label_accuracy",
        "top_label_calibration_error",
        "worst_group_calibration_error",
    ),
}
_PART_OF = {name: part for part, names in _EXPORTS.items() for name in names}
#: The public parts, imported as attributes when first used.
_PARTS = (
    "calibrators",
    "datasets",
    "estimators",
    "evaluation",
    "losses",
    "metrics",
    "persistence",
    "plotting",
    "scoring",
)

__all__ = [*_PART_OF, "__version__"]


def __getattr__(name):
    """Import a top-level name, or a part of the package, when first used."""
    if name in _PARTS:
        return importlib.import_module(f"{__name__}.{name}")
    if name not in _PART_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_PART_OF[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *__all__, *_PARTS})
