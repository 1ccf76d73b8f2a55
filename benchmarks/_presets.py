"""Presets: the data, network, recipes, epochs and seeds of a ``quick``, ``full`` or ``cpu``
sweep.

Two training families cover the papers:

- ``wang2021`` (Wang et al. 2021, and the CIFAR-10 loss study): SGD (momentum 0.9, weight
  decay 1e-4, lr 0.1), lr x0.1 at 50 % and 75 % of the epochs, batch 512, the loss averaged
  over the batch and no gradient clipping (Wang et al.'s code takes the mean);
- ``mukhoti2020`` (Mukhoti et al. 2020's code and its descendants: the Meta-Regularization
  submission, Lin et al. 2025): SGD (momentum 0.9, weight decay 5e-4, lr 0.1), lr x0.1 at
  150/350 and 250/350 of the epochs, batch 128, the loss summed over the batch and the
  gradient norm clipped to 2 (Brier keeps the mean, as in that code).

``full`` trains ResNet-20 on Fashion-MNIST (55,000 / 5,000 / 10,000) with the recipes
scaled down to a few epochs (the decays at the same fractions); ``quick`` trains a small
MLP on scikit-learn's digits on the CPU in seconds. ``cpu`` is the reproduction regime of
a 2-core machine: an MLP (512, 512) trained on 10,000 Fashion-MNIST images (5,000 more for
validation, the official 10,000 for testing) for 40 epochs, long enough that
cross-entropy overfits the NLL and ends overconfident (measured for seed 0: validation
temperature 1.86 in ``wang2021``, 2.64 in ``mukhoti2020``, test accuracy 86.4 % in both),
with each family's initial learning rate set for that network: 0.1 for ``wang2021``, 0.05
for ``mukhoti2020`` (with the summed loss, 0.1 reached a lower accuracy and temperature: 87.2 %
and T 1.76 against 88.2 % and T 2.23 on 20,000 images).
"""

from dataclasses import dataclass, field, replace

import numpy as np

from sklearn_calib.estimators import RECIPES

from ._data import DataSpec, describe

#: Training images of the ``cpu`` preset (the validation part is cut from the rest).
CPU_TRAIN = 10000
#: Epochs of the ``cpu`` preset.
CPU_EPOCHS = 40
#: Validation temperature of cross-entropy below which a regime is not overconfident
#: (the ``cpu`` preset is sized so that CE's stays above it).
OVERCONFIDENT_T = 1.5

PRESETS = ("quick", "full", "cpu")
DATASETS = ("digits", "fashion_mnist", "gaussians")

#: Wang et al. (2021)'s temperature pool {0.01, 0.02, ..., 10}.
GRID_WANG2021 = tuple(np.round(np.arange(1, 1001) * 0.01, 2).tolist())
#: The grid of Mukhoti et al. (2020)'s code and its descendants {0.1, 0.2, ..., 10} (Lin et al.
#: (2025) list 0 too, which is no temperature).
GRID_MUKHOTI2020 = tuple(np.round(np.arange(1, 101) * 0.1, 1).tolist())


_REDUCTION_WORDS = {"sum": "summed", "mean": "averaged"}


@dataclass(frozen=True)
class Family:
    """Training settings shared by the runs that reproduce one group of seeds.

    Parameters
    ----------
    name : str
        "wang2021" or "mukhoti2020".
    recipe : str
        A recipe of :data:`sklearn_calib.estimators.RECIPES`.
    batch_size : int
    reduction : {"mean", "sum"}
        Default loss reduction (a method may override it).
    grad_clip : float or None
    temperatures : tuple of float
        Grid of the validation-ECE temperature search.
    track : bool
        Whether runs record per-epoch test metrics (the ``dynamics`` experiment).
    lr : float or None, default=None
        Initial learning rate; None: the recipe's.
    """

    name: str
    recipe: str
    batch_size: int
    reduction: str
    grad_clip: float | None
    temperatures: tuple = field(repr=False)
    track: bool = False
    lr: float | None = None

    def describe(self, epochs, reductions=None):
        """One sentence on the optimiser, schedule, batch, reduction and clipping.

        Parameters
        ----------
        epochs : int
        reductions : dict of str to str or None, default=None
            Methods whose reduction differs from the family's, by label ("Brier": "mean").
        """
        recipe = RECIPES[self.recipe]
        params = recipe.optimizer_params
        drops = recipe.milestone_epochs(epochs)
        clip = (
            f"gradient norm clipped to {self.grad_clip:g}"
            if self.grad_clip is not None
            else "no gradient clipping"
        )
        exceptions = "; ".join(
            f"{label}: {_REDUCTION_WORDS[reduction]}"
            for label, reduction in (reductions or {}).items()
        )
        return (
            f"SGD (momentum {params['momentum']:g}, weight decay {params['weight_decay']:g}, "
            f"lr {self.lr or recipe.lr:g}), lr x{recipe.gamma:g} after epochs "
            f"{' and '.join(map(str, drops))} of {epochs} (the fractions "
            f"{', '.join(f'{m:.3g}' for m in recipe.milestones)} of recipe `{self.recipe}`), "
            f"batch {self.batch_size}, loss {_REDUCTION_WORDS[self.reduction]} over the batch"
            + (f" ({exceptions})" if exceptions else "")
            + f", {clip}"
        )


@dataclass(frozen=True)
class Config:
    """Everything a sweep needs besides the experiments' methods.

    Parameters
    ----------
    preset : str
    data : DataSpec
    network : str
    network_params : dict
    epochs : int
    seeds : tuple of int
    families : dict of str to Family
    track_train : int
        Training samples followed per epoch in tracked runs (learned epochs).
    epoch_seconds : float
        Prior guess of the seconds per epoch, until runs of this sweep are timed.
    run_overhead : float
        Prior guess of the seconds per run besides its epochs.
    device : str
    data_home : str or None
        Folder of the Fashion-MNIST files.
    toy_samples : int
        Training points per class of the ``toy_gaussians`` experiment.
    toy_seeds : int
        Runs of the ``toy_gaussians`` experiment.
    """

    preset: str
    data: DataSpec
    network: str
    network_params: dict
    epochs: int
    seeds: tuple
    families: dict
    track_train: int
    epoch_seconds: float
    run_overhead: float
    device: str = "auto"
    data_home: str | None = None
    toy_samples: int = 10000
    toy_seeds: int = 5

    def describe_data(self):
        """One sentence on the data, sizes and preprocessing."""
        return describe(self.data)

    def describe_model(self):
        params = ", ".join(f"{k}={v}" for k, v in self.network_params.items())
        return f"`{self.network}`" + (f" ({params})" if params else "")


def _families(batch_wang2021, batch_mukhoti2020, track=True, lr=(None, None)):
    return {
        "wang2021": Family(
            "wang2021", "wang2021", batch_wang2021, "mean", None, GRID_WANG2021, track, lr[0]
        ),
        "mukhoti2020": Family(
            "mukhoti2020", "mukhoti2020", batch_mukhoti2020, "sum", 2.0, GRID_MUKHOTI2020, lr=lr[1]
        ),
    }


def _data(preset, dataset, train_size):
    if dataset == "fashion_mnist":
        spec = DataSpec("fashion_mnist", None, 5000, None)
        if preset == "cpu":
            spec = replace(spec, n_train=CPU_TRAIN)
        elif preset == "quick":
            spec = replace(spec, n_train=5000, n_val=1000, n_test=2000)
    elif dataset == "digits":
        spec = DataSpec("digits", None, 300, 450)
    else:
        spec = DataSpec("gaussians", 2000 if preset == "quick" else 10000, 1000, 2000)
    if train_size is not None:
        spec = replace(spec, n_train=train_size)
    return spec


def make_config(
    preset="quick",
    dataset=None,
    *,
    seeds=None,
    epochs=None,
    train_size=None,
    device="auto",
    data_home=None,
):
    """Resolve a preset for a data set, with the command line's overrides.

    Parameters
    ----------
    preset : {"quick", "full", "cpu"}, default="quick"
    dataset : {"digits", "fashion_mnist", "gaussians"} or None, default=None
        None: digits for ``quick``, Fashion-MNIST for ``full`` and ``cpu``.
    seeds : int or None, default=None
        Number of training seeds (0, 1, ...); None: 2 for ``quick``, 3 otherwise.
    epochs : int or None, default=None
        None: the preset's (12 quick, 10 full, 40 cpu).
    train_size : int or None, default=None
        Limit of the training samples (for smoke tests).
    device : str, default="auto"
    data_home : str or None, default=None

    Returns
    -------
    config : Config
    """
    if preset not in PRESETS:
        raise ValueError(f"Expected `preset` in {PRESETS}, got {preset!r}.")
    dataset = dataset or ("digits" if preset == "quick" else "fashion_mnist")
    if dataset not in DATASETS:
        raise ValueError(f"Expected `dataset` in {DATASETS}, got {dataset!r}.")
    data = _data(preset, dataset, train_size)
    if preset == "cpu":
        network, network_params = "mlp", {"hidden_units": [512, 512]}
        families = _families(512, 128, lr=(0.1, 0.05))
        track_train, epoch_seconds, overhead = 5000, 1.5, 2.0
    elif preset == "full" and dataset == "fashion_mnist":
        network, network_params = "resnet20", {}
        families, track_train, epoch_seconds, overhead = _families(512, 128), 5000, 0.78, 2.0
    elif dataset == "fashion_mnist":
        network, network_params = "cnn", {}
        families, track_train, epoch_seconds, overhead = _families(128, 64), 1000, 0.5, 0.5
    else:
        network, network_params = "mlp", {"hidden_units": [64]}
        families, track_train, epoch_seconds, overhead = _families(128, 64), 1000, 0.05, 0.2
    default_seeds = 2 if preset == "quick" else 3
    n_seeds = default_seeds if seeds is None else int(seeds)
    if n_seeds < 1:
        raise ValueError(f"Expected `seeds` to be an integer >= 1, got {seeds!r}.")
    default_epochs = {"quick": 12, "full": 10, "cpu": CPU_EPOCHS}[preset]
    epochs = default_epochs if epochs is None else int(epochs)
    if epochs < 1:
        raise ValueError(f"Expected `epochs` to be an integer >= 1, got {epochs!r}.")
    return Config(
        preset=preset,
        data=data,
        network=network,
        network_params=network_params,
        epochs=epochs,
        seeds=tuple(range(n_seeds)),
        families=families,
        track_train=track_train,
        epoch_seconds=epoch_seconds,
        run_overhead=overhead,
        device=device,
        data_home=data_home,
        toy_samples=2000 if preset == "quick" else 10000,
        toy_seeds=n_seeds if seeds is not None else (2 if preset == "quick" else 5),
    )
