"""DenseNet-BC (Huang et al. 2017) with the CIFAR stem, for images of any size."""

import torch
import torch.nn.functional as F
from torch import nn

from ._common import FeaturesHead, check_image_shape


class _DenseLayer(nn.Module):
    """BN-ReLU-conv1x1 to ``bn_size * growth`` channels, BN-ReLU-conv3x3 to ``growth``."""

    def __init__(self, in_channels, growth_rate, bn_size):
        super().__init__()
        inner = bn_size * growth_rate
        self.bn1 = nn.BatchNorm2d(in_channels)
        self.conv1 = nn.Conv2d(in_channels, inner, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(inner)
        self.conv2 = nn.Conv2d(inner, growth_rate, 3, padding=1, bias=False)

    def forward(self, x):
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(out)))
        return torch.cat([x, out], dim=1)


def _transition(in_channels, out_channels):
    """BN-ReLU-conv1x1 and a 2x2 average pool that rounds up (a 1x1 map stays 1x1)."""
    return nn.Sequential(
        nn.BatchNorm2d(in_channels),
        nn.ReLU(inplace=True),
        nn.Conv2d(in_channels, out_channels, 1, bias=False),
        nn.AvgPool2d(2, ceil_mode=True),
    )


class DenseNet(FeaturesHead):
    """DenseNet-BC: dense blocks of bottleneck layers joined by compressing transitions.

    CIFAR stem: one 3x3 convolution with stride 1 to ``2 * growth_rate`` channels and no
    max-pool; after the last block a BN-ReLU, global average pooling and a linear head.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    growth_rate : int, default=32
        Channels each layer adds.
    block_config : tuple of int, default=(6, 12, 24, 16)
        Layers per dense block; the default is DenseNet-121.
    compression : float, default=0.5
        Fraction of channels a transition keeps.
    bn_size : int, default=4
        Bottleneck width as a multiple of ``growth_rate``.
    """

    def __init__(
        self,
        input_shape,
        n_classes,
        growth_rate=32,
        block_config=(6, 12, 24, 16),
        compression=0.5,
        bn_size=4,
    ):
        super().__init__()
        in_channels = check_image_shape(input_shape, "a DenseNet")
        if not 0.0 < compression <= 1.0:
            raise ValueError(f"Expected `compression` in (0, 1], got {compression!r}.")
        channels = 2 * growth_rate
        layers = [nn.Conv2d(in_channels, channels, 3, padding=1, bias=False)]
        for index, n_layers in enumerate(block_config):
            for _ in range(n_layers):
                layers.append(_DenseLayer(channels, growth_rate, bn_size))
                channels += growth_rate
            if index < len(block_config) - 1:
                reduced = int(channels * compression)
                layers.append(_transition(channels, reduced))
                channels = reduced
        layers += [
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        ]
        self._set_layers(layers, channels, n_classes)


class DenseNet121(DenseNet):
    """DenseNet-121 (growth 32, CIFAR stem; 7.0M parameters for 10 classes).

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    growth_rate : int, default=32
        Channels each layer adds.
    """

    def __init__(self, input_shape, n_classes, growth_rate=32):
        super().__init__(input_shape, n_classes, growth_rate=growth_rate)
