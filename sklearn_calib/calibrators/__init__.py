"""Post-hoc calibrators and the calibrated meta-classifier.

Every calibrator is a scikit-learn estimator fitted on the scores of a fitted classifier:
``fit(scores, y, sample_weight=None)``, then ``predict_proba(scores)`` (also
``transform``) returns calibrated probabilities whose rows sum to 1, and ``predict`` the
most probable class. The ``input`` parameter says what the scores are, never guessed from
their values:

- ``"logits"`` (default): shape (n_samples, n_classes), or 1-D for a binary problem, read
  as the positive-class log-odds ``d`` (``decision_function`` of a binary scikit-learn
  classifier), that is the logits ``(0, d)``.
- ``"probabilities"``: rows summing to 1 (tolerance 1e-3), or 1-D positive-class
  probabilities ``p`` read as ``(1 - p, p)``. Methods that work on logits use
  ``log(max(p, 1e-12))``.

Labels ``y`` are either one distinct label per score column (the sorted labels give the
column order) or integer column indices that include 0; ``fit(..., classes=...)`` names the
label of each column, so a calibration set may lack any class.
:class:`CalibratedClassifier` fits a classifier and a calibrator together;
:func:`classifier_scores` and :func:`fit_calibrator` are its two steps on their own (the
scores of a fitted classifier, and a calibrator fitted on them), which
:mod:`sklearn_calib.evaluation` uses too.
:class:`VennAbersCalibrator` also gives a pair of probabilities per class
(``predict_interval``), one of which is calibrated in the sense of Venn predictors.
:class:`MulticalibrationBoosting` also takes group features (``groups=``) and corrects the
scores within every group.
:func:`grid_ece` is the vectorised search behind ``TemperatureScaling(objective="ece")``:
the expected calibration error of temperature-scaled logits for every temperature of a
grid, on the CPU or a GPU.
"""

from ._temperature_grid import grid_ece
from .binary import BetaCalibration, QuadraticScaling
from .binning import HistogramBinning, ScalingBinning
from .calibrated_classifier import CalibratedClassifier, classifier_scores, fit_calibrator
from .dirichlet import DirichletCalibration
from .isotonic import IsotonicCalibration
from .linear import BiasCorrectedTemperatureScaling, MatrixScaling, VectorScaling
from .multicalibration import MulticalibrationBoosting
from .platt import PlattScaling
from .selection import CalibratorSelector
from .structured import StructuredMatrixScaling, StructuredVectorScaling
from .temperature import EnsembleTemperatureScaling, TemperatureScaling
from .venn_abers import VennAbersCalibrator

__all__ = [
    "BetaCalibration",
    "BiasCorrectedTemperatureScaling",
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
    "VennAbersCalibrator",
    "classifier_scores",
    "fit_calibrator",
    "grid_ece",
]
