"""Training losses of the calibration literature and their building blocks.

Every loss is an ``nn.Module(logits, target) -> scalar`` that skorch can use as a
criterion: ``NetClassifier(module, criterion="focal", criterion__gamma=3)``. The package
holds the named losses and their registry :data:`LOSSES` (``_losses``), their common
base classes (``_base``), the per-sample weights ``u(p)`` of the focal family
(``_weights``; :func:`uncertainty_weights` evaluates them on numpy predictions) and the
differentiable calibration measures SECE, DECE and MMCE in torch (``_calibration``).
"""

from ._base import WeightedCrossEntropy
from ._calibration import differentiable_ece, mmce_weighted, smooth_ece
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
    "differentiable_ece",
    "get_loss",
    "mmce_weighted",
    "resolve_loss",
    "smooth_ece",
    "uncertainty_weights",
]
