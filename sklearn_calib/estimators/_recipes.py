"""Optimiser and learning-rate presets: the papers' training recipes and a one-cycle.

"wang2021" is the recipe of D.-B. Wang, L. Feng and M.-L. Zhang, "Rethinking Calibration of
Deep Neural Networks: Do Not Be Afraid of Overconfidence", NeurIPS 2021; "mukhoti2020" that
of J. Mukhoti et al., "On using Focal Loss for Neural Network Calibration", 2020, and of the
papers built on their code. Their former names (:data:`RECIPE_ALIASES`) still work and
warn.

A recipe fixes the optimiser, its base learning rate and hyperparameters, and a schedule:
the factor applied to the base learning rate at each step. :class:`NetClassifier` applies
the factor by writing into the optimiser's learning rate in place, so a CUDA graph that
captured the optimiser step sees every change.
"""

import inspect
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

#: The reference pairing of Mukhoti et al.'s code: the loss summed over the batch and the
#: gradient norm clipped to 2. Use as ``NetClassifier(**REFERENCE_PAIRING)``.
REFERENCE_PAIRING = {"loss_reduction": "sum", "grad_clip": 2.0}

OPTIMIZERS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}

#: Optimiser used when neither ``optimizer`` nor ``recipe`` names one.
DEFAULT_OPTIMIZER = torch.optim.AdamW

#: Learning rate of each optimiser when neither ``lr`` nor a recipe sets one, chosen from
#: the test accuracy after 3 to 20 epochs of the zoo's MLP and CNN on digits and on 3,000
#: Fashion-MNIST images over a grid of rates: 3e-3 for Adam and AdamW had the best mean
#: after 3 epochs (79 % against 71 % at 1e-3, the earlier default) and was within a point of
#: the best at the end; SGD (no momentum) 0.1, a factor 3 below 0.3 (2-5 points better on
#: average) and 10 below 1.0, which diverged on Fashion-MNIST.
DEFAULT_LRS = {torch.optim.SGD: 0.1, torch.optim.Adam: 3e-3, torch.optim.AdamW: 3e-3}

#: Learning rate of any other optimiser class when neither ``lr`` nor a recipe sets one.
DEFAULT_LR = 1e-3


@dataclass(frozen=True)
class Recipe:
    """A training preset.

    Parameters
    ----------
    name : str
        Name used in ``NetClassifier(recipe=name)``.
    optimizer : type of torch.optim.Optimizer
        Optimiser class, unless the caller names another.
    lr : float
        Base learning rate, unless the caller sets ``lr``.
    optimizer_params : dict
        Optimiser hyperparameters; ``optimizer__*`` arguments override them.
    milestones : tuple of float, default=()
        Fractions of ``max_epochs`` at whose epoch (rounded, and at least epoch 1, so the
        first epoch always runs at the base rate) the learning rate is multiplied by
        ``gamma`` (a multistep schedule, applied per epoch).
    gamma : float, default=0.1
        Multiplier at each milestone.
    cycle : tuple of (tuple of float, tuple of float) or None, default=None
        One-cycle schedule, applied per step: the factor is the piecewise-linear
        interpolation of ``cycle[1]`` at the points ``cycle[0]`` of the training progress
        ``step / total_steps``.
    """

    name: str
    optimizer: type
    lr: float
    optimizer_params: dict = field(default_factory=dict)
    milestones: tuple = ()
    gamma: float = 0.1
    cycle: tuple | None = None

    @property
    def per_step(self):
        """Whether the schedule changes the learning rate within an epoch."""
        return self.cycle is not None

    def factor(self, epoch, step, max_epochs, steps_per_epoch):
        """Return the learning-rate factor at a step of training.

        Parameters
        ----------
        epoch : int
            0-based epoch.
        step : int
            0-based step within the epoch.
        max_epochs : int
            Planned number of epochs.
        steps_per_epoch : int
            Optimiser steps per epoch.

        Returns
        -------
        factor : float
            The multiplier of the base learning rate.
        """
        if self.cycle is not None:
            progress = (epoch * steps_per_epoch + step) / max(max_epochs * steps_per_epoch, 1)
            return float(np.interp(progress, self.cycle[0], self.cycle[1]))
        passed = sum(epoch >= drop for drop in self.milestone_epochs(max_epochs))
        return self.gamma**passed

    def milestone_epochs(self, max_epochs):
        """Return the 0-based epochs from which each decay applies (never the first).

        Parameters
        ----------
        max_epochs : int
            Planned number of epochs.

        Returns
        -------
        epochs : list of int
            The 0-based epoch from which each decay applies.
        """
        return [max(round(m * max_epochs), 1) for m in self.milestones]


_RECIPES = {
    "wang2021": Recipe(
        "wang2021",
        torch.optim.SGD,
        0.1,
        {"momentum": 0.9, "weight_decay": 1e-4},
        milestones=(0.5, 0.75),
    ),
    "mukhoti2020": Recipe(
        "mukhoti2020",
        torch.optim.SGD,
        0.1,
        {"momentum": 0.9, "weight_decay": 5e-4},
        milestones=(150 / 350, 250 / 350),
    ),
    "onecycle": Recipe(
        "onecycle",
        torch.optim.SGD,
        0.1,
        {"momentum": 0.9, "nesterov": True, "weight_decay": 5e-4},
        cycle=((0.0, 0.25, 1.0), (0.1, 1.0, 0.0)),
    ),
}

#: Former recipe names and the names that replace them; they still work, with a
#: FutureWarning.
RECIPE_ALIASES = {"seed001": "wang2021", "seed002": "mukhoti2020"}

#: Recipes by name: the papers' recipes, the one-cycle, and the former names
#: (:data:`RECIPE_ALIASES`, which warn when a recipe is resolved).
RECIPES = {**_RECIPES, **{alias: _RECIPES[name] for alias, name in RECIPE_ALIASES.items()}}


def resolve_recipe(recipe):
    """Return the :class:`Recipe` named by ``recipe``, or None.

    Parameters
    ----------
    recipe : str, Recipe or None

    Returns
    -------
    recipe : Recipe or None
    """
    if recipe is None or isinstance(recipe, Recipe):
        return recipe
    if isinstance(recipe, str) and recipe in RECIPE_ALIASES:
        warnings.warn(
            f"The recipe name {recipe!r} is deprecated; use {RECIPE_ALIASES[recipe]!r}, the "
            "same recipe.",
            FutureWarning,
            stacklevel=2,
        )
    if isinstance(recipe, str) and recipe in RECIPES:
        return RECIPES[recipe]
    raise ValueError(
        f"Expected `recipe` to be None, a Recipe or one of {sorted(_RECIPES)}, got {recipe!r}."
    )


def resolve_optimizer(optimizer, recipe):
    """Return the optimiser class and the recipe's defaults for it.

    Parameters
    ----------
    optimizer : str, type of torch.optim.Optimizer or None
        A name from :data:`OPTIMIZERS`, a class, or None for the recipe's optimiser
        (AdamW without a recipe).
    recipe : Recipe or None

    Returns
    -------
    optimizer_class : type of torch.optim.Optimizer
    defaults : dict
        The recipe's hyperparameters when the recipe's optimiser is used, else empty.
    """
    if optimizer is None:
        if recipe is None:
            return DEFAULT_OPTIMIZER, {}
        return recipe.optimizer, dict(recipe.optimizer_params)
    if isinstance(optimizer, str):
        if optimizer not in OPTIMIZERS:
            raise ValueError(
                f"Unknown optimizer {optimizer!r}; expected one of {sorted(OPTIMIZERS)} "
                "or a torch.optim.Optimizer subclass."
            )
        optimizer = OPTIMIZERS[optimizer]
    if not (inspect.isclass(optimizer) and issubclass(optimizer, torch.optim.Optimizer)):
        raise ValueError(
            "Expected `optimizer` to be None, an optimizer name or a torch.optim.Optimizer "
            f"subclass, got {optimizer!r}."
        )
    if recipe is not None and optimizer is recipe.optimizer:
        return optimizer, dict(recipe.optimizer_params)
    return optimizer, {}


def base_lr(lr, recipe, optimizer):
    """Return the base learning rate: ``lr`` if given, else the recipe's, else the optimiser's.

    Parameters
    ----------
    lr : float or None
        Returned as given (it is checked with the optimiser's other settings).
    recipe : Recipe or None
        The recipe, when its optimiser is the one used.
    optimizer : type of torch.optim.Optimizer

    Returns
    -------
    lr : float
    """
    if lr is not None:
        return lr
    if recipe is not None:
        return recipe.lr
    return DEFAULT_LRS.get(optimizer, DEFAULT_LR)


class RecipeSchedule:
    """A recipe's learning-rate schedule over one training run, written into an optimiser.

    The factor of each step multiplies each parameter group's base learning rate (its
    ``initial_lr``, set to its learning rate the first time) and is written into the
    group in place (into the device tensor of a CUDA-graph optimiser).

    Parameters
    ----------
    recipe : str, Recipe or None
        None: the learning rates are left as they are.
    optimizer : torch.optim.Optimizer
    epochs : int
        Epochs the schedule spans.
    steps_per_epoch : int
        Optimiser steps per epoch.
    """

    def __init__(self, recipe, optimizer, epochs, steps_per_epoch):
        self.recipe = resolve_recipe(recipe)
        self.optimizer = optimizer
        self.epochs = epochs
        self.steps_per_epoch = steps_per_epoch
        self.base_lrs = [
            float(group.setdefault("initial_lr", float(group["lr"])))
            for group in optimizer.param_groups
        ]

    @property
    def per_step(self):
        """Whether the learning rate changes within an epoch."""
        return self.recipe is not None and self.recipe.per_step

    def apply(self, epoch, step):
        """Write the learning rates of ``step`` of ``epoch`` (0-based, of this run)."""
        if self.recipe is None:
            return
        factor = self.recipe.factor(epoch, step, self.epochs, self.steps_per_epoch)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(base * factor)
            else:
                group["lr"] = base * factor
