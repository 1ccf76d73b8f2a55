"""The optimiser of NetClassifier: its settings from the routed parameters, checked on every path.

The settings come from the net's parameters (``optimizer``, ``recipe``, ``lr`` and the
``optimizer__*`` routes, including skorch's ``optimizer__param_groups`` patterns and the
per-group ``optimizer__param_groups__<i>__<name>``). The same check runs on them whether
they build a new optimiser (a fresh fit, loading) or update a fitted one in place (a
continued fit): every learning rate must be a finite number > 0, and the optimiser class
itself must accept the values (its constructor's own checks, run on a throwaway
parameter), before any of them reaches the optimiser.
"""

import fnmatch
import math
from dataclasses import dataclass, field

import torch
from skorch.utils import params_for

from ._recipes import base_lr, resolve_optimizer, resolve_recipe

#: Optimiser options that depend on the device, not on the training: left out of checks.
DEVICE_FLAGS = ("fused", "foreach", "capturable")


@dataclass
class OptimizerSettings:
    """What an optimiser is built from.

    Attributes
    ----------
    optimizer : type of torch.optim.Optimizer
    defaults : dict
        Hyperparameters of every group (``lr`` included), with the name each came from
        in ``sources``.
    patterns : list of (str, dict)
        skorch's ``optimizer__param_groups``: parameter-name patterns and their groups'
        hyperparameters.
    groups : dict of int to dict
        Hyperparameters of single groups (``optimizer__param_groups__<i>__<name>``).
    sources : dict
        Parameter name of each default, for error messages.
    """

    optimizer: type
    defaults: dict
    patterns: list = field(default_factory=list)
    groups: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)

    @classmethod
    def from_params(cls, params):
        """Return the settings of a mapping of the net's parameters (current or recorded)."""
        recipe = resolve_recipe(params["recipe"])
        optimizer, recipe_defaults = resolve_optimizer(params["optimizer"], recipe)
        routed = params_for("optimizer", params)
        patterns = list(routed.pop("param_groups", []))
        groups = {}
        for key in [key for key in routed if key.startswith("param_groups__")]:
            _, index, name = key.split("__", 2)
            groups.setdefault(int(index), {})[name] = routed.pop(key)
        lr_source = "optimizer__lr" if "lr" in routed else "lr"
        lr = routed.pop("lr", params["lr"])
        lr = base_lr(lr, recipe if recipe_defaults else None, optimizer)
        defaults = {**recipe_defaults, **routed, "lr": lr}
        sources = {name: f"optimizer__{name}" for name in routed}
        sources["lr"] = lr_source
        return cls(optimizer, defaults, patterns, groups, sources)

    def check(self):
        """Raise a ValueError naming the parameter if a value is not valid for the optimiser."""
        check_optimizer_values(self.optimizer, self.defaults, self.sources)
        for i, (pattern, values) in enumerate(self.patterns):
            source = f"optimizer__param_groups[{i}] ({pattern!r})"
            check_optimizer_values(
                self.optimizer, {**self.defaults, **values}, _named(values, source)
            )
        for index, values in self.groups.items():
            names = {name: f"optimizer__param_groups__{index}__{name}" for name in values}
            check_optimizer_values(self.optimizer, {**self.defaults, **values}, names)

    def build(self, named_parameters, device):
        """Check the settings and return the optimiser of ``named_parameters``.

        On CUDA, SGD is built fused and Adam/AdamW fused and capturable, with every
        learning rate a device tensor, unless a flag in :data:`DEVICE_FLAGS` was given.
        """
        self.check()
        params = list(named_parameters)
        param_groups = []
        for pattern, values in self.patterns:
            matches = [i for i, (name, _) in enumerate(params) if fnmatch.fnmatch(name, pattern)]
            if matches:
                group = [params.pop(i)[1] for i in reversed(matches)]
                param_groups.append({"params": group, **values})
        if params:
            param_groups.append({"params": [p for _, p in params]})
        kwargs = dict(self.defaults)
        graphable = (
            device.type == "cuda"
            and self.optimizer in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW)
            and not set(DEVICE_FLAGS) & set(kwargs)
        )
        if graphable:
            kwargs["fused"] = True
            if self.optimizer is not torch.optim.SGD:
                kwargs["capturable"] = True
            kwargs["lr"] = torch.tensor(kwargs["lr"], dtype=torch.float32, device=device)
        optimizer = self.optimizer(param_groups, **kwargs)
        self._write_groups(optimizer, self.groups)
        if graphable:
            for group in optimizer.param_groups:
                if not isinstance(group["lr"], torch.Tensor):
                    group["lr"] = torch.tensor(group["lr"], dtype=torch.float32, device=device)
        return optimizer

    def update(self, optimizer, previous):
        """Check the settings, then write those that differ from ``previous`` into ``optimizer``.

        A changed default is written into every group, then a changed per-group value
        into its group; a new learning rate also becomes the group's ``initial_lr`` (the
        base of a recipe's schedule). Optimiser state (momentum, moments) is kept.

        Parameters
        ----------
        optimizer : torch.optim.Optimizer
            Built from ``previous`` (same class and patterns).
        previous : OptimizerSettings
        """
        self.check()
        changed = {
            name: value
            for name, value in self.defaults.items()
            if not same_value(previous.defaults.get(name, _MISSING), value)
        }
        if changed:
            self._write_groups(
                optimizer, dict.fromkeys(range(len(optimizer.param_groups)), changed)
            )
        groups = {}
        for index, values in self.groups.items():
            old = previous.groups.get(index, {})
            new = {
                name: v for name, v in values.items() if not same_value(old.get(name, _MISSING), v)
            }
            if new:
                groups[index] = new
        self._write_groups(optimizer, groups)

    @staticmethod
    def _write_groups(optimizer, groups):
        n_groups = len(optimizer.param_groups)
        for index, values in groups.items():
            if not 0 <= index < n_groups:
                raise ValueError(
                    f"optimizer__param_groups__{index}__*: the optimizer has {n_groups} "
                    "parameter group(s)."
                )
            group = optimizer.param_groups[index]
            for name, value in values.items():
                if name == "lr":
                    set_lr(group, value)
                else:
                    group[name] = value


def set_lr(group, lr):
    """Set a parameter group's learning rate (in place if it is a device tensor) and base."""
    lr = float(lr)
    if isinstance(group["lr"], torch.Tensor):
        group["lr"].fill_(lr)
    else:
        group["lr"] = lr
    group["initial_lr"] = lr


def same_value(a, b):
    """Whether two parameter values are the same (identical or equal; unequal if unsure)."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError, RuntimeError):
        return False


_MISSING = object()


def _named(values, source):
    return {name: f"{source}[{name!r}]" for name in values}


def check_optimizer_values(optimizer, values, sources):
    """Raise a ValueError naming the parameter if optimiser values are not valid.

    Every learning rate must be a finite number > 0; then the optimiser class checks the
    values itself (its constructor, on a throwaway parameter; the device flags of
    :data:`DEVICE_FLAGS` are left out).

    Parameters
    ----------
    optimizer : type of torch.optim.Optimizer
    values : dict
        Keyword arguments of one parameter group.
    sources : dict
        The parameter name each value came from, for the messages.
    """
    lr = values.get("lr")
    if lr is not None:
        number = float(lr) if isinstance(lr, torch.Tensor) and lr.numel() == 1 else lr
        if (
            isinstance(number, bool)
            or not isinstance(number, (int, float))
            or not (math.isfinite(number) and number > 0)
        ):
            name = sources.get("lr", "lr")
            raise ValueError(
                f"Expected the learning rate `{name}` to be a finite number > 0, got {lr!r}."
            )
    kwargs = {name: value for name, value in values.items() if name not in DEVICE_FLAGS}
    try:
        optimizer([torch.zeros(1, requires_grad=True)], **kwargs)
    except (TypeError, ValueError, RuntimeError) as error:
        given = ", ".join(f"{sources.get(name, name)}={value!r}" for name, value in kwargs.items())
        raise ValueError(
            f"Invalid settings for the optimizer {optimizer.__name__} ({given}): {error}"
        ) from None


__all__ = ["DEVICE_FLAGS", "OptimizerSettings", "check_optimizer_values", "same_value", "set_lr"]
