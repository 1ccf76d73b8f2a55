"""Loaders for the real data sets the machine has, and synthetic data sets."""

import numbers
from pathlib import Path

import numpy as np
from scipy.special import softmax
from sklearn.datasets import load_digits
from sklearn.utils import Bunch, check_random_state

from ._idx import read_idx

__all__ = ["load_digits_images", "load_fashion_mnist", "make_gaussian_blobs"]

FASHION_MNIST_HOME = "/usr/share/datasets/fashion-mnist"

FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)

# key -> (file name without ".gz", shape the file must hold)
_FASHION_MNIST_FILES = {
    "X_train": ("train-images-idx3-ubyte", (60000, 28, 28)),
    "y_train": ("train-labels-idx1-ubyte", (60000,)),
    "X_test": ("t10k-images-idx3-ubyte", (10000, 28, 28)),
    "y_test": ("t10k-labels-idx1-ubyte", (10000,)),
}


def _find_file(folder, name):
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def load_fashion_mnist(*, data_home=None, return_X_y=False, as_image=True, normalize=True):
    """Load Fashion-MNIST (Xiao et al. 2017) from its four IDX files, with numpy only.

    The files may be gzip-compressed or not (``train-images-idx3-ubyte[.gz]``,
    ``train-labels-idx1-ubyte[.gz]``, ``t10k-images-idx3-ubyte[.gz]``,
    ``t10k-labels-idx1-ubyte[.gz]``); their magic numbers, shapes and sizes are checked.

    Parameters
    ----------
    data_home : str or path-like, default=None
        Folder holding the files; None for ``/usr/share/datasets/fashion-mnist``, where the
        Debian package ``dataset-fashion-mnist`` installs them.
    return_X_y : bool, default=False
        If True, return ``(X_train, y_train, X_test, y_test)`` instead of a Bunch.
    as_image : bool, default=True
        If True, images have shape ``(n, 1, 28, 28)`` (for convolutional networks);
        otherwise ``(n, 784)``.
    normalize : bool, default=True
        If True, pixels are float32 in [0, 1] (divided by 255); otherwise the raw uint8
        values 0..255.

    Returns
    -------
    data : Bunch
        ``X_train`` (60000 images), ``y_train`` (int64 labels 0..9), ``X_test`` (10000
        images), ``y_test``, ``target_names`` (the 10 class names) and ``DESCR``.
    (X_train, y_train, X_test, y_test) : tuple of ndarray
        If ``return_X_y`` is True.

    Raises
    ------
    FileNotFoundError
        If a file is missing; the message says how to install the data.
    ValueError
        If a file is not a valid IDX file of the expected shape.

    Examples
    --------
    >>> from sklearn_calib.datasets import load_fashion_mnist
    >>> X_train, y_train, X_test, y_test = load_fashion_mnist(return_X_y=True)  # doctest: +SKIP
    >>> X_train.shape, X_test.shape  # doctest: +SKIP
    ((60000, 1, 28, 28), (10000, 1, 28, 28))
    """
    folder = Path(FASHION_MNIST_HOME if data_home is None else data_home)
    paths = {key: _find_file(folder, name) for key, (name, _) in _FASHION_MNIST_FILES.items()}
    missing = [_FASHION_MNIST_FILES[key][0] for key, path in paths.items() if path is None]
    if missing:
        raise FileNotFoundError(
            f"Fashion-MNIST files not found in {folder}: missing "
            f"{', '.join(name + '[.gz]' for name in missing)}. Install them with "
            "`apt-get install dataset-fashion-mnist` (into "
            f"{FASHION_MNIST_HOME}), or pass `data_home`, a folder holding the four IDX files "
            "of https://github.com/zalandoresearch/fashion-mnist."
        )
    arrays = {}
    for key, (_, shape) in _FASHION_MNIST_FILES.items():
        array = read_idx(paths[key])
        if array.shape != shape or array.dtype != np.uint8:
            raise ValueError(
                f"Expected {paths[key]} to hold uint8 data of shape {shape}, "
                f"got {array.dtype} of shape {array.shape}."
            )
        arrays[key] = array
    for key in ("y_train", "y_test"):
        if arrays[key].max() >= len(FASHION_MNIST_CLASSES):
            raise ValueError(
                f"Expected labels 0..9 in {paths[key]}, got a maximum of {arrays[key].max()}."
            )
        arrays[key] = arrays[key].astype(np.int64)
    for key in ("X_train", "X_test"):
        images = arrays[key]
        images = images[:, np.newaxis] if as_image else images.reshape(len(images), -1)
        arrays[key] = images.astype(np.float32) / np.float32(255) if normalize else images
    if return_X_y:
        return arrays["X_train"], arrays["y_train"], arrays["X_test"], arrays["y_test"]
    return Bunch(
        **arrays,
        target_names=np.array(FASHION_MNIST_CLASSES),
        DESCR=(
            "Fashion-MNIST: 28x28 grayscale images of 10 kinds of clothing, "
            f"60000 training and 10000 test images, read from {folder}."
        ),
    )


def load_digits_images(*, return_X_y=False):
    """The 8x8 digits of scikit-learn as images for convolutional networks.

    Parameters
    ----------
    return_X_y : bool, default=False
        If True, return ``(X, y)`` instead of a Bunch.

    Returns
    -------
    data : Bunch
        ``data`` float32 of shape ``(1797, 1, 8, 8)`` with values in [0, 1] (the 0..16
        intensities divided by 16), ``target`` int64 labels 0..9, ``target_names``.
    (X, y) : tuple of ndarray
        If ``return_X_y`` is True.

    Examples
    --------
    >>> from sklearn_calib.datasets import load_digits_images
    >>> X, y = load_digits_images(return_X_y=True)
    >>> X.shape, X.dtype.name, int(y.max())
    ((1797, 1, 8, 8), 'float32', 9)
    """
    digits = load_digits()
    X = (digits.images[:, np.newaxis] / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    if return_X_y:
        return X, y
    return Bunch(data=X, target=y, target_names=digits.target_names)


def _check_positive_int(value, name, minimum):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"Expected `{name}` to be an integer >= {minimum}, got {value!r}.")


def make_gaussian_blobs(
    n_samples_per_class=10000,
    *,
    n_classes=5,
    n_features=2,
    centers=None,
    center_box=(-10.0, 10.0),
    shuffle=True,
    random_state=None,
    return_centers=False,
):
    """Isotropic Gaussian classes N(mu_k, I) with equal priors and their true posterior.

    The toy experiment of Lin et al. (2025): 5 two-dimensional Gaussians with means drawn uniformly
    in ``[-10, 10]^2``. The posterior is ``eta_k(x) = N(x; mu_k, I) / sum_j N(x; mu_j, I)``,
    a softmax of ``-||x - mu_k||^2 / 2``. Draw a test set from the same classes by passing
    the training set's centers (``return_centers=True``) and another ``random_state``.

    Parameters
    ----------
    n_samples_per_class : int, default=10000
        Points drawn from each class.
    n_classes : int, default=5
        Number of classes (used when ``centers`` is None).
    n_features : int, default=2
        Dimension (used when ``centers`` is None).
    centers : array-like of shape (n_classes, n_features), default=None
        Class means; None to draw them uniformly in ``center_box``.
    center_box : tuple of float, default=(-10.0, 10.0)
        Bounds of the uniform draw of the means, on every axis.
    shuffle : bool, default=True
        If False, the points come class by class.
    random_state : int, RandomState instance or None, default=None
        Seed of the means and the points.
    return_centers : bool, default=False
        If True, also return the means.

    Returns
    -------
    X : ndarray of shape (n_classes * n_samples_per_class, n_features)
        The points.
    y : ndarray of shape (n_classes * n_samples_per_class,)
        Labels 0..n_classes-1, int64.
    eta : ndarray of shape (n_classes * n_samples_per_class, n_classes)
        True posterior of each class at each point (rows sum to 1).
    centers : ndarray of shape (n_classes, n_features)
        The means, if ``return_centers`` is True.

    Examples
    --------
    >>> from sklearn_calib.datasets import make_gaussian_blobs
    >>> X, y, eta, centers = make_gaussian_blobs(100, random_state=0, return_centers=True)
    >>> X.shape, eta.shape, centers.shape
    ((500, 2), (500, 5), (5, 2))
    >>> X_test, y_test, eta_test = make_gaussian_blobs(20, centers=centers, random_state=1)
    >>> bool(abs(eta_test.sum(axis=1) - 1).max() < 1e-12)
    True
    """
    _check_positive_int(n_samples_per_class, "n_samples_per_class", 1)
    rng = check_random_state(random_state)
    if centers is None:
        _check_positive_int(n_classes, "n_classes", 2)
        _check_positive_int(n_features, "n_features", 1)
        low, high = center_box
        if not low < high:
            raise ValueError(
                f"Expected `center_box` (low, high) with low < high, got {center_box!r}."
            )
        centers = rng.uniform(low, high, size=(n_classes, n_features))
    else:
        centers = np.asarray(centers, dtype=np.float64)
        if centers.ndim != 2 or len(centers) < 2 or not np.isfinite(centers).all():
            raise ValueError(
                "Expected `centers` to be a finite array of shape (n_classes >= 2, n_features), "
                f"got shape {centers.shape}."
            )
    n_classes = len(centers)
    y = np.repeat(np.arange(n_classes, dtype=np.int64), n_samples_per_class)
    X = centers[y] + rng.standard_normal((len(y), centers.shape[1]))
    if shuffle:
        order = rng.permutation(len(y))
        X, y = X[order], y[order]
    squared_distances = ((X[:, np.newaxis, :] - centers[np.newaxis]) ** 2).sum(axis=2)
    eta = softmax(-0.5 * squared_distances, axis=1)
    if return_centers:
        return X, y, eta, centers
    return X, y, eta
