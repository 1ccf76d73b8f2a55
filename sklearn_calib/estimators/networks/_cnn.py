"""Small convolutional network for images of any size, fast on a CPU."""

from torch import nn

from ._common import FeaturesHead, check_image_shape


class CNN(FeaturesHead):
    """Stages of two 3x3 conv-BN-ReLU layers and a 2x2 max-pool, then a linear head.

    The last stage ends in global average pooling, so any image size works; the max-pools
    round up (``ceil_mode``), so images smaller than the total downsampling (e.g. 8x8
    digits) keep a 1x1 map instead of failing.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    channels : tuple of int, default=(16, 32)
        Width of each stage.
    hidden_units : int, default=64
        Width of the fully connected layer before the head; 0 for none.
    dropout : float, default=0.0
        Dropout probability before the head.
    """

    def __init__(self, input_shape, n_classes, channels=(16, 32), hidden_units=64, dropout=0.0):
        super().__init__()
        width = check_image_shape(input_shape, "cnn")
        layers = []
        for out in channels:
            for _ in range(2):
                layers += [
                    nn.Conv2d(width, out, 3, padding=1, bias=False),
                    nn.BatchNorm2d(out),
                    nn.ReLU(inplace=True),
                ]
                width = out
            layers.append(nn.MaxPool2d(2, ceil_mode=True))
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        if hidden_units:
            layers += [nn.Linear(width, hidden_units), nn.ReLU(inplace=True)]
            width = hidden_units
        if dropout:
            layers.append(nn.Dropout(dropout))
        self._set_layers(layers, width, n_classes)
