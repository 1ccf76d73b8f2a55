"""VGG-16 with batch normalisation, adapted to any channel count and image size."""

from torch import nn

from ._common import FeaturesHead, check_image_shape

_VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


class VGG16(FeaturesHead):
    """VGG-16 (Simonyan & Zisserman 2015, configuration D) with batch norm, CIFAR form.

    Thirteen 3x3 conv-BN-ReLU layers in five stages, each ending in a 2x2 max-pool, then
    global average pooling and one linear head on the 512 features (the CIFAR adaptation
    of the calibration papers' code; on 32x32 images the map is already 1x1 there). The
    convolutions keep their biases, as in the original. The
    max-pools round up (``ceil_mode``), so images smaller than 32x32 keep a 1x1 map.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one image, ``(channels, height, width)``.
    n_classes : int
        Number of outputs (logits).
    """

    def __init__(self, input_shape, n_classes):
        super().__init__()
        width = check_image_shape(input_shape, "vgg16")
        layers = []
        for item in _VGG16:
            if item == "M":
                layers.append(nn.MaxPool2d(2, ceil_mode=True))
            else:
                layers += [
                    nn.Conv2d(width, item, 3, padding=1),
                    nn.BatchNorm2d(item),
                    nn.ReLU(inplace=True),
                ]
                width = item
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self._set_layers(layers, width, n_classes)
