"""Data sets: loaders for the real data sets the machine has, and synthetic data sets."""

from ._base import (
    FASHION_MNIST_CLASSES,
    FASHION_MNIST_HOME,
    load_digits_images,
    load_fashion_mnist,
    make_gaussian_blobs,
)

__all__ = [
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_HOME",
    "load_digits_images",
    "load_fashion_mnist",
    "make_gaussian_blobs",
]
