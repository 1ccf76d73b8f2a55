"""Saving and loading fitted estimators: pickle/joblib, or skops' secure format.

Every estimator of sklearn_calib pickles (``pickle``, ``joblib.dump``). Loading a pickle
runs whatever code the file names, so load pickles only from sources you trust.

skops' format (``skops.io``, the ``persist`` extra installs it) stores the object tree as
data and, when loading, refuses every type that is not on a list of trusted types.
:func:`dump` writes that format and :func:`load` reads it trusting :func:`trusted_types`
on top of what skops trusts itself (builtins, numpy, scipy and scikit-learn); a file
holding any other type is refused with
``skops.io.exceptions.UntrustedTypesFoundException``.

What is trusted, and why it is safe
-----------------------------------
Trusting a type lets skops rebuild an object of it from the file's data, without running
its ``__init__``, or hand out the class or function itself as a value; every type inside
it must be trusted too. The list holds exactly:

- sklearn_calib's own types: the calibrators and
  :class:`~sklearn_calib.calibrators.CalibratedClassifier`,
  :class:`~sklearn_calib.estimators.NetClassifier`,
  :class:`~sklearn_calib.estimators.MetaNetClassifier`,
  :class:`~sklearn_calib.estimators.Recipe`, :class:`~sklearn_calib.estimators.Lookahead`,
  the label-shift estimators of :mod:`sklearn_calib.label_shift` with what an adapted one
  holds (the source's summary of priors and confusion matrix, the test of "no shift" and
  the priors' :class:`~sklearn_calib.metrics.BootstrapInterval` objects, all numbers and
  arrays), and the network, loss and optimiser classes
  (:data:`~sklearn_calib.estimators.networks.NETWORKS`,
  :data:`~sklearn_calib.losses.LOSSES`, ``torch.optim`` SGD, Adam, AdamW) that a net's
  parameters may name. A net's state stores the network, loss, optimiser (and
  meta-regulariser) as state dicts of numpy arrays, never pickled torch objects; loading
  rebuilds them from the parameters and loads the arrays.
- ``torch.device``, a ``device`` parameter given as one.
- skorch's types that a net's parameters hold and that carry settings only: the default
  ``dataset`` and ``iterator_train``/``iterator_valid`` classes (skorch's ``Dataset``,
  torch's ``DataLoader``), ``skorch.dataset.ValidSplit`` as ``train_split``, and the
  callbacks EarlyStopping, EpochScoring, BatchScoring, PassthroughScoring, ProgressBar,
  EpochTimer, PrintLog and GradientNormClipping. Their state is numbers, strings and
  the types listed here; they act only in a later ``fit``, with those settings.
- The functions those callbacks hold by default: ``print`` (the ``sink`` of EarlyStopping
  and PrintLog), ``skorch.utils.to_numpy`` (the scorers' ``target_extractor``) and the
  function skorch picks to index the labels (an array, or None).

No module is trusted as a whole, and nothing that runs code of the file's choosing (such
as ``eval``, ``getattr`` or a class from an arbitrary module) is on the list.

What must be trusted by hand: types of your own, such as your own network class
(``module=MyNet``), loss or callback, and any skorch or torch type not listed above.
:func:`untrusted_types` lists those in a file; after checking them, pass them to
``load(path, trusted=[...])``, for example
``load("model.skops", trusted=["mypackage.nets.MyNet"])``. An ``nn.Module`` or tensor
given as a parameter (``module=MyNet()``) cannot be written at all (skops raises): pass
the class and its ``module__*`` hyperparameters instead. Where that is impossible, the
safe path for the weights is ``torch.save(net.module_.state_dict(), path)`` and, on a net
fitted or initialised with the same parameters,
``net.module_.load_state_dict(torch.load(path, weights_only=True))``.
"""

import numpy as np
import torch
from skorch.callbacks import (
    BatchScoring,
    EarlyStopping,
    EpochScoring,
    EpochTimer,
    GradientNormClipping,
    PassthroughScoring,
    PrintLog,
    ProgressBar,
)
from skorch.dataset import Dataset, ValidSplit
from skorch.utils import check_indexing, to_numpy
from torch.utils.data import DataLoader

from . import calibrators, label_shift
from .estimators import Lookahead, MetaNetClassifier, NetClassifier, Recipe
from .estimators._recipes import OPTIMIZERS
from .estimators.networks import NETWORKS
from .label_shift._source import SourceSummary
from .losses import LOSSES
from .metrics import BootstrapInterval

__all__ = ["dump", "load", "trusted_types", "untrusted_types"]

#: Dependency types a net's parameters may hold, all of them settings only: the device, the
#: default dataset and iterator classes, the validation split and skorch's callbacks.
_DEPENDENCY_TYPES = (
    torch.device,
    Dataset,
    DataLoader,
    ValidSplit,
    EarlyStopping,
    EpochScoring,
    BatchScoring,
    PassthroughScoring,
    ProgressBar,
    EpochTimer,
    PrintLog,
    GradientNormClipping,
)

#: Functions those callbacks hold by default: the sink of EarlyStopping and PrintLog, the
#: scorers' target extractor, and the indexing skorch picks for labels (an array or None).
_DEPENDENCY_FUNCTIONS = (print, to_numpy, check_indexing(np.empty(0)), check_indexing(None))


def _name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def _skops_io():
    """Return ``skops.io``, or raise an ImportError that says how to install it."""
    try:
        import skops.io
    except ImportError as exc:
        raise ImportError(
            "sklearn_calib.persistence needs skops, which is not installed. Install it with "
            '`pip install skops` (or, from the repository root, `pip install ".[persist]"`).'
        ) from exc
    return skops.io


def trusted_types():
    """Return the names of the types skops may load for a sklearn_calib model.

    They are sklearn_calib's estimators, calibrators and label-shift estimators (with the
    source summary, test result and bootstrap intervals an adapted one holds), the network,
    loss, recipe, lookahead and optimiser classes a net's parameters may name, and the
    dependency types and functions listed in :mod:`sklearn_calib.persistence`
    (``torch.device``, skorch's default dataset and iterator classes, its validation split
    and settings-only callbacks). scikit-learn's estimators and numpy arrays are trusted by
    skops itself.

    Returns
    -------
    names : list of str
        Fully qualified type names, sorted.

    Examples
    --------
    >>> from sklearn_calib.persistence import trusted_types
    >>> "sklearn_calib.estimators._net.NetClassifier" in trusted_types()
    True
    """
    public = [getattr(part, name) for part in (calibrators, label_shift) for name in part.__all__]
    classes = [
        *(obj for obj in public if isinstance(obj, type)),
        SourceSummary,
        BootstrapInterval,
        MetaNetClassifier,
        NetClassifier,
        Recipe,
        Lookahead,
        *NETWORKS.values(),
        *LOSSES.values(),
        *OPTIMIZERS.values(),
        *_DEPENDENCY_TYPES,
        *_DEPENDENCY_FUNCTIONS,
    ]
    return sorted({_name(cls) for cls in classes})


def untrusted_types(file):
    """Return the types in a skops file that :func:`load` refuses unless you trust them.

    These are the types neither skops nor :func:`trusted_types` trusts: your own classes
    and functions, or dependency types not on the list. Check them before passing them to
    ``load(file, trusted=...)``.

    Parameters
    ----------
    file : str, path-like or file object
        A file written by :func:`dump` or ``skops.io.dump``.

    Returns
    -------
    names : list of str
        Fully qualified type names, sorted; empty when :func:`load` needs no more trust.
    """
    trusted = set(trusted_types())
    return [name for name in _skops_io().get_untrusted_types(file=file) if name not in trusted]


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
        :func:`untrusted_types`).

    Returns
    -------
    estimator : object
        The object the file holds.

    Raises
    ------
    skops.io.exceptions.UntrustedTypesFoundException
        If the file holds a type that is not trusted.
    """
    return _skops_io().load(file, trusted=trusted_types() + list(trusted or []))
