"""The experiments, by command-line name, in the order a full sweep runs them.

The order is the priority of ``run all``: the ``wang2021`` family first (``regularizers``
trains the runs that ``calibratable``, ``dynamics`` and ``validation_size`` reuse), then
the ``mukhoti2020`` family (``focal``, ``gra``, ``meta``; ``bins`` reuses ``meta``'s runs),
then the toy study.
"""

from .bins import Bins
from .calibratable import Calibratable
from .dynamics import Dynamics
from .focal import Focal
from .gra import Gra
from .meta import Meta
from .regularizers import Regularizers
from .toy_gaussians import ToyGaussians
from .validation_size import ValidationSize

#: Experiment instances by name (priority order of ``run all``).
EXPERIMENTS = {
    experiment.name: experiment
    for experiment in (
        Regularizers(),
        Calibratable(),
        ValidationSize(),
        Dynamics(),
        Focal(),
        Gra(),
        Meta(),
        Bins(),
        ToyGaussians(),
    )
}

__all__ = ["EXPERIMENTS"]
