"""Training losses of the calibration literature and their building blocks.

Every loss is an ``nn.Module(logits, target) -> scalar`` that skorch can use as a
criterion: ``NetClassifier(module, criterion="focal", criterion__gamma=3)``. The package
holds the named losses and their registry :data:`LOSSES` (``_losses``), their common
base classes (``_base``), the per-sample weights ``u(p)`` of the focal family
(``_weights``; :func:`uncertainty_weights` evaluates them on numpy predictions) and the
differentiable calibration measures SECE, DECE and MMCE in torch (``_calibration``):
:func:`smooth_calibration_error` and :func:`differentiable_calibration_error` are the
twins of the numpy metrics of the same names.
"""

from .._deprecation import renamed_function
from ._base import WeightedCrossEntropy
from ._calibration import differentiable_calibration_error, mmce_weighted, smooth_calibration_error
from ._losses import (
    LOSSES,
    BrierLoss,
    BSCELoss,
    BSCELossGRA,
    CrossEntropy,
    DualFocalLoss,
    DualFocalLossGRA,
    EntropyRegularizedLoss,
    FLSD53Loss,
    FLSD53LossGRA,
    FocalLoss,
    FocalLossGRA,
    InverseFocalLoss,
    LabelSmoothingLoss,
    LpNormLoss,
    MMCELoss,
    get_loss,
    resolve_loss,
)
from ._weights import WEIGHTS, uncertainty_weights

__all__ = [
    "BSCELoss",
    "BSCELossGRA",
    "BrierLoss",
    "CrossEntropy",
    "DualFocalLoss",
    "DualFocalLossGRA",
    "EntropyRegularizedLoss",
    "FLSD53Loss",
    "FLSD53LossGRA",
    "FocalLoss",
    "FocalLossGRA",
    "InverseFocalLoss",
    "LOSSES",
    "LabelSmoothingLoss",
    "LpNormLoss",
    "MMCELoss",
    "WEIGHTS",
    "WeightedCrossEntropy",
    "differentiable_calibration_error",
    "get_loss",
    "mmce_weighted",
    "resolve_loss",
    "smooth_calibration_error",
    "uncertainty_weights",
]

#: The names of 0.1, deprecated: ``smooth_ece`` meant the training SECE, while
#: :func:`sklearn_calib.metrics.smooth_ece` is Błasiok and Nakkiran's smECE.
smooth_ece = renamed_function(smooth_calibration_error, "smooth_ece")
differentiable_ece = renamed_function(differentiable_calibration_error, "differentiable_ece")
