"""Multi-layer perceptron for tabular (2-D) input."""

import math

from torch import nn

from ._common import FeaturesHead


class MLP(FeaturesHead):
    """Fully connected network: ``features`` (hidden layers) then a linear ``head``.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one sample; inputs are flattened.
    n_classes : int
        Number of outputs (logits).
    hidden_units : tuple of int, default=(100,)
        Width of each hidden layer.
    dropout : float, default=0.0
        Dropout probability after each hidden layer.
    """

    def __init__(self, input_shape, n_classes, hidden_units=(100,), dropout=0.0):
        super().__init__()
        layers = [nn.Flatten()]
        width = math.prod(input_shape)
        for units in hidden_units:
            layers += [nn.Linear(width, units), nn.ReLU()]
            if dropout:
                layers.append(nn.Dropout(dropout))
            width = units
        self._set_layers(layers, width, n_classes)
