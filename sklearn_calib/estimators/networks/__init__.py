"""Network zoo: every network maps a batch to logits through ``features`` then ``head``.

The protocol every network follows (and a user's own ``nn.Module`` subclass should follow
to be passed to :class:`~sklearn_calib.estimators.NetClassifier`):

- Constructor ``(input_shape, n_classes, **hyperparameters)``: ``input_shape`` is the shape
  of ONE sample (``(n_features,)`` for tabular data, ``(channels, height, width)`` for
  images, ``(seq_len,)`` for token ids) and ``n_classes`` the number of logits, so
  ``NetClassifier`` can infer both from the data; every hyperparameter has a default and
  is routed as ``module__name``.
- Attribute ``features``: an ``nn.Module`` mapping the input batch to the penultimate
  representation, shape ``(n_samples, d)`` (it includes the final pooling and flatten).
- Attribute ``head``: the final ``nn.Linear(d, n_classes)``; ``forward(x)`` is
  ``head(features(x))`` (the meta-learning of ``MetaNetClassifier`` updates ``head`` alone).
- Class attribute ``input_dtype``: the dtype ``X`` must have, ``torch.float32`` for
  tabular and image networks, ``torch.long`` for networks over token ids ("textcnn"), so
  ``NetClassifier`` knows whether to cast ``X`` to float32. A class without it is treated
  as ``torch.float32``.
- :class:`FeaturesHead` implements ``forward`` and ``input_dtype = torch.float32``; its
  subclasses set ``features`` and ``head`` with ``_set_layers(layers, width, n_classes)``.
- Initialisation draws only from torch's global RNG (identical under the same
  ``torch.manual_seed``); image networks accept ``channels_last`` inputs and run under
  bf16 autocast; images of any size >= 1x1 work (adaptive pooling before the head).

Names in :data:`NETWORKS`: "mlp", "cnn", "resnet20", "resnet32", "resnet56", "resnet110",
"resnet18", "resnet50", "vgg16", "wrn26_10", "densenet121", "textcnn".
"""

import inspect

from torch import nn

from ._cnn import CNN
from ._common import FeaturesHead
from ._densenet import DenseNet, DenseNet121
from ._mlp import MLP
from ._resnet import (
    CifarResNet,
    ResNet,
    ResNet18,
    ResNet20,
    ResNet32,
    ResNet50,
    ResNet56,
    ResNet110,
)
from ._textcnn import TextCNN
from ._vgg import VGG16
from ._wide_resnet import WRN26_10, WideResNet

NETWORKS = {
    "mlp": MLP,
    "cnn": CNN,
    "resnet20": ResNet20,
    "resnet32": ResNet32,
    "resnet56": ResNet56,
    "resnet110": ResNet110,
    "resnet18": ResNet18,
    "resnet50": ResNet50,
    "vgg16": VGG16,
    "wrn26_10": WRN26_10,
    "densenet121": DenseNet121,
    "textcnn": TextCNN,
}

__all__ = [
    "CNN",
    "MLP",
    "NETWORKS",
    "VGG16",
    "WRN26_10",
    "CifarResNet",
    "DenseNet",
    "DenseNet121",
    "FeaturesHead",
    "ResNet",
    "ResNet18",
    "ResNet20",
    "ResNet32",
    "ResNet50",
    "ResNet56",
    "ResNet110",
    "TextCNN",
    "WideResNet",
    "resolve_network",
]


def resolve_network(network):
    """Return the network class named by ``network``.

    Parameters
    ----------
    network : str or type of torch.nn.Module
        A name from :data:`NETWORKS` or an ``nn.Module`` subclass.

    Returns
    -------
    network_class : type of torch.nn.Module
        The network class.
    """
    if isinstance(network, str):
        try:
            return NETWORKS[network]
        except KeyError:
            raise ValueError(
                f"Unknown network {network!r}; expected one of {sorted(NETWORKS)} "
                "or a torch.nn.Module subclass."
            ) from None
    if inspect.isclass(network) and issubclass(network, nn.Module):
        return network
    raise ValueError(
        f"Expected `module` to be a network name or a torch.nn.Module subclass, got {network!r}."
    )
