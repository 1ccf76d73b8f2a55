"""Shared checks and initialisation for the image networks."""

import numbers

from torch import nn


def check_image_shape(input_shape, network):
    """Return the channel count of one image's shape ``(channels, height, width)``.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one sample.
    network : str
        Network name used in the error message.

    Returns
    -------
    in_channels : int
    """
    shape = tuple(input_shape)
    if len(shape) != 3 or not all(
        isinstance(size, numbers.Integral) and size >= 1 for size in shape
    ):
        raise ValueError(
            f"Expected `input_shape` to be (channels, height, width) with positive sizes for "
            f"{network}, got {input_shape!r}; pass images as an array of shape "
            "(n_samples, channels, height, width)."
        )
    return int(shape[0])


def init_convolutions(module):
    """Give every ``nn.Conv2d`` in ``module`` He-normal (fan-out) weights and zero bias."""
    for layer in module.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
