"""Saving and loading fitted estimators: pickle/joblib, or skops' secure format.

Every estimator of sklearn_calib pickles (``pickle``, ``joblib.dump``). Loading a pickle
runs whatever code the file names, so load pickles only from sources you trust.

skops' format (``skops.io``, the ``dask`` extra installs it) stores the object tree as
data and, when loading, refuses every type that is not on a list of trusted types.
:func:`dump` writes that format and :func:`load` reads it with :func:`trusted_types`,
the types a sklearn_calib model is made of; a file holding any other type is refused
with ``skops.io.exceptions.UntrustedTypesFoundException``.

What skops can hold
-------------------
- The calibrators and :class:`~sklearn_calib.calibrators.CalibratedClassifier` (with any
  estimator skops trusts, such as scikit-learn's).
- :class:`~sklearn_calib.estimators.NetClassifier` and
  :class:`~sklearn_calib.estimators.MetaNetClassifier`: their state stores the network,
  loss, optimiser (and meta-regulariser) as state dicts of numpy arrays, never pickled
  torch objects; loading rebuilds them from the parameters (on the fitted device when it
  exists, otherwise the CPU) and loads the arrays. This needs the parameters to be names
  (``module="resnet20"``, ``criterion="focal"``, ``optimizer="sgd"``,
  ``recipe="seed001"``), classes from :data:`~sklearn_calib.estimators.networks.NETWORKS`,
  :data:`~sklearn_calib.losses.LOSSES` or ``torch.optim`` (SGD, Adam, AdamW), or a
  :class:`~sklearn_calib.estimators.Recipe`.

What it cannot hold without help: parameters that are other objects. Your own network
or loss class, or a callback, is refused at load until you trust it:
``skops.io.get_untrusted_types(file=path)`` lists such types; after checking them, pass
their names to ``load(path, trusted=[...])``. An ``nn.Module`` or tensor given as a
parameter (``module=MyNet()``) cannot be written at all (skops raises): pass the class and
its ``module__*`` hyperparameters instead. Where that is impossible, the safe path for
the weights is ``torch.save(net.module_.state_dict(), path)`` and, on a net fitted or
initialised with the same parameters, ``net.module_.load_state_dict(torch.load(path,
weights_only=True))``.
"""

from . import calibrators
from .estimators import MetaNetClassifier, NetClassifier, Recipe
from .estimators._recipes import OPTIMIZERS
from .estimators.networks import NETWORKS
from .losses import LOSSES

__all__ = ["dump", "load", "trusted_types"]

#: Types that a NetClassifier's default parameters hold (as classes, never instances).
_SKORCH_DEFAULTS = ("torch.utils.data.dataloader.DataLoader", "skorch.dataset.Dataset")

#: Value types a NetClassifier's parameters may hold: ``device=torch.device("cuda")``.
_PARAM_VALUES = ("torch.device",)


def _name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def _skops_io():
    """Return ``skops.io``, or raise an ImportError that says how to install it."""
    try:
        import skops.io
    except ImportError as exc:
        raise ImportError(
            "sklearn_calib.persistence needs skops, which is not installed. Install it with "
            "`pip install skops` or `pip install sklearn-calib[persist]`."
        ) from exc
    return skops.io


def trusted_types():
    """Return the names of the types skops may load for a sklearn_calib model.

    They are sklearn_calib's estimators and calibrators, the network, loss, recipe and
    optimiser classes a NetClassifier's parameters may name, ``torch.device`` (a
    ``device`` parameter given as one) and skorch's default
    ``iterator_train``/``iterator_valid``/``dataset`` classes. scikit-learn's estimators
    and numpy arrays are trusted by skops itself.

    Returns
    -------
    names : list of str
        Fully qualified type names, sorted.
    """
    public = (getattr(calibrators, name) for name in calibrators.__all__)
    classes = [
        *(obj for obj in public if isinstance(obj, type)),
        MetaNetClassifier,
        NetClassifier,
        Recipe,
        *NETWORKS.values(),
        *LOSSES.values(),
        *OPTIMIZERS.values(),
    ]
    return sorted({_name(cls) for cls in classes} | set(_SKORCH_DEFAULTS) | set(_PARAM_VALUES))


def dump(estimator, file):
    """Save an estimator in skops' format.

    Parameters
    ----------
    estimator : object
        A fitted (or unfitted) estimator.
    file : str, path-like or file object
        Where to write.
    """
    _skops_io().dump(estimator, file)


def load(file, trusted=None):
    """Load an estimator saved with :func:`dump`, trusting only :func:`trusted_types`.

    Parameters
    ----------
    file : str, path-like or file object
        A file written by :func:`dump` or ``skops.io.dump``.
    trusted : list of str, default=None
        More type names to trust, after you have checked them (see
        ``skops.io.get_untrusted_types``).

    Returns
    -------
    estimator : object

    Raises
    ------
    skops.io.exceptions.UntrustedTypesFoundException
        If the file holds a type that is not trusted.
    """
    return _skops_io().load(file, trusted=trusted_types() + list(trusted or []))
