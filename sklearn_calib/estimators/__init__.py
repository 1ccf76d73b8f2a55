"""Neural classifiers (skorch) and their network zoo."""

from ._augment import MixedTarget
from ._checkpoint import CheckpointWarning
from ._device import resolve_device
from ._faults import NonFiniteLossError
from ._meta import MetaNetClassifier
from ._net import NetClassifier
from ._recipes import RECIPES, REFERENCE_PAIRING, Recipe

__all__ = [
    "RECIPES",
    "REFERENCE_PAIRING",
    "CheckpointWarning",
    "MetaNetClassifier",
    "MixedTarget",
    "NetClassifier",
    "NonFiniteLossError",
    "Recipe",
    "resolve_device",
]
