"""The data of a run: load a data set and cut its seeded train/validation/test split.

Loaded splits are cached per process, so a sweep reads each data set once.
"""

import functools
from dataclasses import asdict, dataclass

import numpy as np
from sklearn.utils import Bunch

from sklearn_calib.datasets import load_digits_images, load_fashion_mnist, make_gaussian_blobs


@dataclass(frozen=True)
class DataSpec:
    """What data a run sees: the data set and its seeded train/validation/test split.

    Parameters
    ----------
    name : {"digits", "fashion_mnist", "gaussians"}
    n_train : int or None
        Training samples (None: all that remain after the validation and test parts).
    n_val : int
        Validation samples, cut from the training data with ``split_seed``.
    n_test : int or None
        Test samples (None: Fashion-MNIST's official 10,000; required otherwise).
    split_seed : int, default=0
        Seed of the split; fixed across the training seeds.
    data_seed : int, default=0
        Seed of the Gaussian means and points ("gaussians" only).
    """

    name: str
    n_train: int | None
    n_val: int
    n_test: int | None
    split_seed: int = 0
    data_seed: int = 0

    def as_dict(self):
        return asdict(self)


def _seeded_parts(n, sizes, seed):
    """Split ``range(n)`` by a seeded permutation into consecutive parts of ``sizes``."""
    order = np.random.default_rng(seed).permutation(n)
    parts, start = [], 0
    for size in sizes:
        parts.append(np.sort(order[start : start + size]))
        start += size
    return parts, order[start:]


def _check_sizes(spec, available):
    wanted = spec.n_val + (spec.n_test or 0) + (spec.n_train or 0)
    if wanted > available:
        raise ValueError(
            f"Expected at most {available} samples of {spec.name} in the split, got "
            f"n_train={spec.n_train}, n_val={spec.n_val}, n_test={spec.n_test}."
        )


def _gaussians(spec):
    """Five 2-D Gaussians N(mu_k, I), means uniform in [-10, 10]^2 (Lin et al. 2025's toy data)."""
    X, y, eta, centers = make_gaussian_blobs(
        spec.n_train // 5, n_classes=5, random_state=spec.data_seed, return_centers=True
    )
    X_val, y_val, eta_val = make_gaussian_blobs(
        spec.n_val // 5, centers=centers, random_state=spec.data_seed + 10_000
    )
    X_test, y_test, eta_test = make_gaussian_blobs(
        spec.n_test // 5, centers=centers, random_state=spec.data_seed + 20_000
    )
    return _standardised_split(
        (X, y),
        (X_val, y_val),
        (X_test, y_test),
        X.mean(axis=0),
        X.std(axis=0),
        n_classes=5,
        eta_val=eta_val,
        eta_test=eta_test,
    )


def _standardised_split(train, val, test, mean, std, **extra):
    """Bunch of the ``(X, y)`` parts with ``X`` standardised by ``mean`` and ``std`` (float32)."""
    parts = {"train": train, "val": val, "test": test}
    data = Bunch(**extra)
    for name, (X, y) in parts.items():
        data[f"X_{name}"] = ((X - mean) / std).astype(np.float32)
        data[f"y_{name}"] = y
    return data


@functools.lru_cache(maxsize=4)
def load_split(spec, data_home=None):
    """Return the split of ``spec``: ``X_train, y_train, X_val, y_val, X_test, y_test``.

    Parameters
    ----------
    spec : DataSpec
    data_home : str or None
        Folder of the Fashion-MNIST files (None: the loader's default).

    Returns
    -------
    data : Bunch
        float32 inputs, int64 labels, ``n_classes``; for "gaussians" also the true
        posteriors ``eta_val`` and ``eta_test``.
    """
    if not isinstance(spec, DataSpec):
        raise TypeError(f"Expected a DataSpec, got {type(spec).__name__}.")
    if spec.name == "gaussians":
        return _gaussians(spec)
    if spec.name == "fashion_mnist":
        X, y, X_test, y_test = load_fashion_mnist(data_home=data_home, return_X_y=True)
        if spec.n_test is not None:
            X_test, y_test = X_test[: spec.n_test], y_test[: spec.n_test]
        _check_sizes(spec, len(X) + (spec.n_test or 0))
        (val,), rest = _seeded_parts(len(X), [spec.n_val], spec.split_seed)
    elif spec.name == "digits":
        X, y = load_digits_images(return_X_y=True)
        _check_sizes(spec, len(X))
        (test, val), rest = _seeded_parts(len(X), [spec.n_test, spec.n_val], spec.split_seed)
        X_test, y_test = X[test], y[test]
    else:
        raise ValueError(f"Unknown data set {spec.name!r}.")
    train = np.sort(rest if spec.n_train is None else rest[: spec.n_train])
    X_train = X[train]
    return _standardised_split(
        (X_train, y[train]),
        (X[val], y[val]),
        (X_test, y_test),
        float(X_train.mean()),
        float(X_train.std()),
        n_classes=10,
    )


def describe(spec):
    """One sentence on the data set, the split and the preprocessing."""
    if spec.name == "gaussians":
        return (
            f"5 two-dimensional Gaussians N(mu_k, I) with means uniform in [-10, 10]^2 (data "
            f"seed {spec.data_seed}); {spec.n_train} training / {spec.n_val} validation / "
            f"{spec.n_test} test points, classes balanced; inputs standardised per "
            "coordinate with the training mean and std"
        )
    train = "all remaining" if spec.n_train is None else f"{spec.n_train:,}"
    if spec.name == "fashion_mnist":
        test = "the official 10,000" if spec.n_test is None else f"the first {spec.n_test:,}"
        where = (
            f"Fashion-MNIST (28x28): {spec.n_val:,} validation images cut from the 60,000 "
            f"training images (seed {spec.split_seed}), {train} for training"
            + (" (55,000)" if spec.n_train is None else "")
            + f", {test} test images"
        )
    else:
        where = (
            f"scikit-learn's digits (8x8, 1,797 images): {spec.n_test} test and {spec.n_val} "
            f"validation images cut by a seeded permutation (seed {spec.split_seed}), "
            f"{train} for training"
        )
    return where + "; pixels standardised with the training mean and std (one scalar each)"
