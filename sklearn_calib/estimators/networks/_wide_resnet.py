"""Wide residual network (Zagoruyko & Komodakis 2016) for images of any size."""

import numbers

import torch.nn.functional as F
from torch import nn

from ._common import FeaturesHead, check_image_shape


class _WideBlock(nn.Module):
    """Pre-activation block: BN-ReLU-conv3x3, BN-ReLU, dropout, conv3x3, plus a shortcut."""

    def __init__(self, in_channels, planes, stride, dropout):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_channels)
        self.conv1 = nn.Conv2d(in_channels, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()
        if stride == 1 and in_channels == planes:
            self.shortcut = None
        else:
            self.shortcut = nn.Conv2d(in_channels, planes, 1, stride=stride, bias=False)

    def forward(self, x):
        pre = F.relu(self.bn1(x))
        out = F.relu(self.bn2(self.conv1(pre)))
        out = self.conv2(self.dropout(out))
        return out + (x if self.shortcut is None else self.shortcut(pre))


class WideResNet(FeaturesHead):
    """Wide ResNet WRN-d-k: three stages of ``n`` wide pre-activation blocks.

    A 3x3 stem with 16 channels, stages of ``16k``, ``32k`` and ``64k`` channels (stages 2
    and 3 halve the resolution; 1x1 convolution shortcuts where the shape changes), a final
    BN-ReLU, global average pooling and a linear head. ``depth`` counts the stem, the two
    convolutions of each block and the head, ``6n + 2``, as in the calibration papers'
    WRN-26-10 (n = 4 blocks per stage, the layout Zagoruyko & Komodakis name WRN-28-10
    because they also count the three 1x1 shortcut convolutions).

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    depth : int, default=26
        ``6n + 2`` with ``n >= 1``.
    width : int, default=10
        Widening factor ``k``.
    dropout : float, default=0.0
        Dropout probability before the second convolution of each block.
    """

    def __init__(self, input_shape, n_classes, depth=26, width=10, dropout=0.0):
        super().__init__()
        in_channels = check_image_shape(input_shape, "a wide ResNet")
        if not isinstance(depth, numbers.Integral) or depth < 8 or (depth - 2) % 6:
            raise ValueError(f"Expected `depth` to be an integer 6n + 2 >= 8, got {depth!r}.")
        if not isinstance(width, numbers.Integral) or width < 1:
            raise ValueError(f"Expected `width` to be an integer >= 1, got {width!r}.")
        n_blocks = (depth - 2) // 6
        layers = [nn.Conv2d(in_channels, 16, 3, padding=1, bias=False)]
        channels = 16
        for planes, stride in ((16 * width, 1), (32 * width, 2), (64 * width, 2)):
            for index in range(n_blocks):
                layers.append(_WideBlock(channels, planes, stride if index == 0 else 1, dropout))
                channels = planes
        layers += [
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        ]
        self._set_layers(layers, channels, n_classes)


class WRN26_10(WideResNet):
    """WRN-26-10 (36.5M parameters for 10 classes); see :class:`WideResNet`.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    dropout : float, default=0.0
        Dropout probability before the second convolution of each block.
    """

    def __init__(self, input_shape, n_classes, dropout=0.0):
        super().__init__(input_shape, n_classes, depth=26, width=10, dropout=dropout)
