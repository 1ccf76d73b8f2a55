"""Neural classifiers (skorch) and their network zoo."""

from .._deprecation import module_getattr
from . import _recipes, _targets
from ._calibration_scoring import CalibrationScoring
from ._checkpoint import CheckpointWarning
from ._device import resolve_device
from ._faults import NonFiniteLossError
from ._lookahead import LOOKAHEADS, Lookahead
from ._meta import MetaNetClassifier
from ._net import NetClassifier
from ._recipes import RECIPES, Recipe
from ._targets import WeightedTarget

__all__ = [
    "LOOKAHEADS",
    "RECIPES",
    "CalibrationScoring",
    "CheckpointWarning",
    "Lookahead",
    "MetaNetClassifier",
    "NetClassifier",
    "NonFiniteLossError",
    "Recipe",
    "WeightedTarget",
    "resolve_device",
]

__getattr__ = module_getattr(
    __name__,
    {
        "DEFAULT_LRS": (
            _recipes.DEFAULT_LRS,
            "NetClassifier's lr documents the learning rate of each optimiser",
        ),
        "REFERENCE_PAIRING": (
            _recipes.REFERENCE_PAIRING,
            'pass loss_reduction="sum", grad_clip=2.0 to NetClassifier',
        ),
        "MixedTarget": (_targets.MixedTarget, "the mixup batches' target is internal"),
    },
)
