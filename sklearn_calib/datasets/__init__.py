"""Data sets: loaders for the real data sets the machine has, and synthetic data sets."""

from ._base import (
    FASHION_MNIST_CLASSES,
    FASHION_MNIST_HOME,
    load_digits_images,
    load_fashion_mnist,
    make_gaussian_blobs,
)
from ._miscalibrated_groups import make_miscalibrated_groups

__all__ = [
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_HOME",
    "load_digits_images",
    "load_fashion_mnist",
    "make_gaussian_blobs",
    "make_miscalibrated_groups",
]
