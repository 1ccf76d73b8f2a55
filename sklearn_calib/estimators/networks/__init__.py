"""Network zoo: every network maps a batch to logits through ``features`` then ``head``.

Each network class takes ``input_shape`` (the shape of one sample) and ``n_classes`` as its
first two constructor arguments, so :class:`~sklearn_calib.estimators.NetClassifier` can
infer them from the data; ``features(x)`` returns the penultimate representation and
``head`` is the final ``nn.Linear`` (the meta-learning of seed 003 updates it alone).
"""

import inspect

from torch import nn

from ._mlp import MLP

NETWORKS = {"mlp": MLP}

__all__ = ["MLP", "NETWORKS", "resolve_network"]


def resolve_network(network):
    """Return the network class named by ``network``.

    Parameters
    ----------
    network : str or type of torch.nn.Module
        A name from :data:`NETWORKS` or an ``nn.Module`` subclass.

    Returns
    -------
    network_class : type of torch.nn.Module
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
