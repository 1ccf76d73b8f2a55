"""Residual networks: CIFAR ResNets (6n+2 layers) and ResNet-18/50 with a CIFAR stem."""

import numbers

import torch.nn.functional as F
from torch import nn

from ._common import FeaturesHead, check_image_shape


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class _ZeroPadShortcut(nn.Module):
    """Option-A shortcut: subsample by ``stride`` and append zero channels (no parameters)."""

    def __init__(self, extra_channels, stride):
        super().__init__()
        self.extra_channels = extra_channels
        self.stride = stride

    def forward(self, x):
        x = x[:, :, :: self.stride, :: self.stride]
        return F.pad(x, (0, 0, 0, 0, 0, self.extra_channels))


def _projection(in_channels, out_channels, stride):
    """Option-B shortcut: 1x1 convolution with ``stride`` and batch norm."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
        nn.BatchNorm2d(out_channels),
    )


class _BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers and a residual connection (He et al. 2016)."""

    expansion = 1

    def __init__(self, in_channels, planes, stride=1, shortcut="B"):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        if stride == 1 and in_channels == planes:
            self.shortcut = nn.Identity()
        elif shortcut == "A":
            self.shortcut = _ZeroPadShortcut(planes - in_channels, stride)
        else:
            self.shortcut = _projection(in_channels, planes, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class _Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride), 1x1 expand by 4, with a projection shortcut."""

    expansion = 4

    def __init__(self, in_channels, planes, stride=1):
        super().__init__()
        out_channels = planes * self.expansion
        self.conv1 = nn.Conv2d(in_channels, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        if stride == 1 and in_channels == out_channels:
            self.shortcut = nn.Identity()
        else:
            self.shortcut = _projection(in_channels, out_channels, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


def _stem(in_channels, width):
    """CIFAR stem: 3x3 convolution with stride 1, batch norm, ReLU and no max-pool."""
    return [
        nn.Conv2d(in_channels, width, 3, padding=1, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(inplace=True),
    ]


class CifarResNet(FeaturesHead):
    """CIFAR ResNet of He et al. (2016, §4.2): ``6n + 2`` layers, stages of 16/32/64 channels.

    A 3x3 stem, three stages of ``n`` basic blocks (the first of stages 2 and 3 halves the
    resolution), global average pooling and a linear head. Stride-2 3x3 convolutions with
    padding 1 map any size >= 1 to a size >= 1, so images of any size work.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    depth : int, default=20
        ``6n + 2``: 20, 32, 44, 56, 110, ...
    shortcut : {"A", "B"}, default="A"
        Where the shape changes: "A" subsamples and zero-pads the channels (parameter-free,
        the paper's CIFAR choice, giving its parameter counts: 0.27M for depth 20, 0.46M
        for 32, 0.85M for 56, 1.7M for 110); "B" uses a 1x1 convolution and batch norm.
    """

    def __init__(self, input_shape, n_classes, depth=20, shortcut="A"):
        super().__init__()
        in_channels = check_image_shape(input_shape, "a CIFAR ResNet")
        if not _is_int(depth) or depth < 8 or (depth - 2) % 6:
            raise ValueError(f"Expected `depth` to be an integer 6n + 2 >= 8, got {depth!r}.")
        if shortcut not in ("A", "B"):
            raise ValueError(f'Expected `shortcut` to be "A" or "B", got {shortcut!r}.')
        n_blocks = (depth - 2) // 6
        layers = _stem(in_channels, 16)
        width = 16
        for planes, stride in ((16, 1), (32, 2), (64, 2)):
            for index in range(n_blocks):
                layers.append(_BasicBlock(width, planes, stride if index == 0 else 1, shortcut))
                width = planes
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self._set_layers(layers, width, n_classes)


class ResNet20(CifarResNet):
    """CIFAR ResNet-20 (0.27M parameters); see :class:`CifarResNet`.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    shortcut : {"A", "B"}, default="A"
        As in :class:`CifarResNet`.
    """

    def __init__(self, input_shape, n_classes, shortcut="A"):
        super().__init__(input_shape, n_classes, depth=20, shortcut=shortcut)


class ResNet32(CifarResNet):
    """CIFAR ResNet-32 (0.46M parameters); see :class:`CifarResNet`.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    shortcut : {"A", "B"}, default="A"
        As in :class:`CifarResNet`.
    """

    def __init__(self, input_shape, n_classes, shortcut="A"):
        super().__init__(input_shape, n_classes, depth=32, shortcut=shortcut)


class ResNet56(CifarResNet):
    """CIFAR ResNet-56 (0.85M parameters); see :class:`CifarResNet`.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    shortcut : {"A", "B"}, default="A"
        As in :class:`CifarResNet`.
    """

    def __init__(self, input_shape, n_classes, shortcut="A"):
        super().__init__(input_shape, n_classes, depth=56, shortcut=shortcut)


class ResNet110(CifarResNet):
    """CIFAR ResNet-110 (1.7M parameters); see :class:`CifarResNet`.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    shortcut : {"A", "B"}, default="A"
        As in :class:`CifarResNet`.
    """

    def __init__(self, input_shape, n_classes, shortcut="A"):
        super().__init__(input_shape, n_classes, depth=110, shortcut=shortcut)


class ResNet(FeaturesHead):
    """ImageNet-style ResNet (4 stages of 64/128/256/512 planes) with the CIFAR stem.

    The stem is a 3x3 convolution with stride 1 and no max-pool, as in the calibration
    papers' code for 32x32 images; stages 2-4 halve the resolution (stride-2 3x3
    convolutions, 1x1 projection shortcuts), so any image size >= 1 works.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    block : {"basic", "bottleneck"}, default="basic"
        Residual block: two 3x3 convolutions, or 1x1-3x3-1x1 with 4x expansion.
    layers : tuple of 4 int, default=(2, 2, 2, 2)
        Blocks per stage: (2, 2, 2, 2) with "basic" is ResNet-18, (3, 4, 6, 3) with
        "bottleneck" ResNet-50.
    """

    def __init__(self, input_shape, n_classes, block="basic", layers=(2, 2, 2, 2)):
        super().__init__()
        in_channels = check_image_shape(input_shape, "a ResNet")
        blocks = {"basic": _BasicBlock, "bottleneck": _Bottleneck}
        if block not in blocks:
            raise ValueError(f'Expected `block` to be "basic" or "bottleneck", got {block!r}.')
        if len(layers) != 4 or not all(_is_int(n) and n >= 1 for n in layers):
            raise ValueError(f"Expected `layers` to be 4 integers >= 1, got {layers!r}.")
        block_class = blocks[block]
        modules = _stem(in_channels, 64)
        width = 64
        for planes, stride, n_blocks in zip((64, 128, 256, 512), (1, 2, 2, 2), layers, strict=True):
            for index in range(n_blocks):
                modules.append(block_class(width, planes, stride if index == 0 else 1))
                width = planes * block_class.expansion
        modules += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self._set_layers(modules, width, n_classes)


class ResNet18(ResNet):
    """ResNet-18 with the CIFAR stem (11.2M parameters for 10 classes); see :class:`ResNet`.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    """

    def __init__(self, input_shape, n_classes):
        super().__init__(input_shape, n_classes, block="basic", layers=(2, 2, 2, 2))


class ResNet50(ResNet):
    """ResNet-50 with the CIFAR stem (23.5M parameters for 10 classes); see :class:`ResNet`.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    """

    def __init__(self, input_shape, n_classes):
        super().__init__(input_shape, n_classes, block="bottleneck", layers=(3, 4, 6, 3))
