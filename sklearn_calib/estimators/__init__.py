"""Neural classifiers (skorch) and their network zoo."""

from ._calibration_scoring import CalibrationScoring
from ._checkpoint import CheckpointWarning
from ._device import resolve_device
from ._faults import NonFiniteLossError
from ._lookahead import LOOKAHEADS, Lookahead
from ._meta import MetaNetClassifier
from ._net import NetClassifier
from ._recipes import DEFAULT_LRS, RECIPES, REFERENCE_PAIRING, Recipe
from ._targets import MixedTarget, WeightedTarget

__all__ = [
    "DEFAULT_LRS",
    "LOOKAHEADS",
    "RECIPES",
    "CalibrationScoring",
    "REFERENCE_PAIRING",
    "CheckpointWarning",
    "Lookahead",
    "MetaNetClassifier",
    "MixedTarget",
    "NetClassifier",
    "NonFiniteLossError",
    "Recipe",
    "WeightedTarget",
    "resolve_device",
]
