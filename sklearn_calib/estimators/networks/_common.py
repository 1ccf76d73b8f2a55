"""The zoo's base class, and the checks and initialisation its image networks share."""

import numbers

import torch
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


class FeaturesHead(nn.Module):
    """Base of the zoo's networks: ``forward(x)`` is ``head(features(x))``.

    Subclasses build their layers and pass them to :meth:`_set_layers`; see the protocol in
    :mod:`sklearn_calib.estimators.networks`.

    Parameters
    ----------
    *args, **kwargs
        Passed to :class:`torch.nn.Module`.
    """

    input_dtype = torch.float32

    def _set_layers(self, layers, width, n_classes):
        """Set ``features`` to ``layers`` in sequence and ``head`` to a linear layer.

        Then every ``nn.Conv2d`` gets He-normal weights (:func:`init_convolutions`).

        Parameters
        ----------
        layers : list of nn.Module
            From the input to the penultimate representation of ``width`` values.
        width : int
        n_classes : int
        """
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(width, n_classes)
        init_convolutions(self)

    def forward(self, x):
        return self.head(self.features(x))
