"""The checks of NetClassifier's inputs: training data, prediction input, token ids, the network.

Training data is validated once per training call (:func:`training_data`), prediction
input once per call (:func:`validate_input`); a network given as a class or instance is
checked against the data before training (:func:`check_network`). Networks whose class
has an integer ``input_dtype`` take token ids: their input stays integer and must index
the network's first ``nn.Embedding``.
"""

import inspect

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted, validate_data
from skorch.utils import data_from_dataset
from torch import nn
from torch.utils.data import Subset

from .._validation import check_class_labels, check_label_types, encode_labels
from ._training import FitDataset
from ._weights import fit_weights
from .networks import resolve_network

#: Integer dtypes a network's ``input_dtype`` may name (token ids).
INTEGER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.uint8)

#: Float token ids at least this large in magnitude do not fit in int64.
_INT64_BOUND = 2.0**63


def takes_token_ids(module):
    """Whether the network parameter ``module`` (name, class or instance) takes token ids."""
    network = type(module) if isinstance(module, nn.Module) else resolve_network(module)
    return getattr(network, "input_dtype", torch.float32) in INTEGER_DTYPES


def training_data(net, X, y, sample_weight, classes, reset):
    """Validate the training data of a fit; for a fresh fit (``reset``) set its classes.

    A fresh fit sets ``classes_`` (from ``classes``, the net's ``classes`` or ``y``),
    ``input_shape_`` and, through scikit-learn's ``validate_data``, ``n_features_in_``;
    a continued fit checks the data against them.

    Parameters
    ----------
    net : NetClassifier
    X : array-like of shape (n_samples, ...)
    y : array-like of shape (n_samples,)
    sample_weight : array-like of shape (n_samples,) or None
    classes : array-like or None
        ``partial_fit``'s ``classes``.
    reset : bool
        Whether this is a fresh fit.

    Returns
    -------
    data : FitDataset
    """
    integer = takes_token_ids(net.module)
    if not reset:
        check_sample_shape(X, net.input_shape_, before_validation=True)
    X, y = validate_data(
        net, X, y, reset=reset, dtype="numeric" if integer else np.float32, allow_nd=True
    )
    if integer:
        X = as_token_ids(X)
    check_class_labels(y)
    if reset:
        y_index = _set_classes_and_shape(net, X, y, classes, integer)
    else:
        check_sample_shape(X, net.input_shape_)
        try:
            y_index = encode_labels(y, net.classes_)
        except ValueError:
            raise ValueError(
                f"`y` contains labels not seen at the first fit: "
                f"{np.setdiff1d(y, net.classes_).tolist()}; known labels are "
                f"{net.classes_.tolist()}."
            ) from None
    weight = fit_weights(X, y_index, net.classes_, sample_weight, net.class_weight)
    return FitDataset(X, y, y_index, weight)


def split_input(net, X, y):
    """Return what a split hook splits: a training run's FitDataset as it is, or ``X`` and
    ``y`` validated as a continued fit's data (the net must be fitted)."""
    if isinstance(X, FitDataset):
        return X
    check_is_fitted(net)
    return training_data(net, X, y, None, None, reset=False)


def _set_classes_and_shape(net, X, y, classes, integer):
    """Set ``classes_`` and ``input_shape_`` for a fresh fit; return the class indices."""
    if classes is None and net.classes is not None:
        classes = net.classes
    if classes is not None:
        classes = np.asarray(classes)
        check_label_types(classes, "classes")
    known = np.unique(y if classes is None else classes)
    if len(known) < 2:
        raise ValueError(
            f"{type(net).__name__} needs samples of at least 2 classes to train, "
            f"got 1 class: {known.tolist()}."
        )
    if net.augment is not None and X.ndim != 4:
        raise ValueError(
            f"augment={net.augment!r} needs images of shape (n, C, H, W), got X of shape {X.shape}."
        )
    if net.mixup_alpha > 0 and integer:
        raise ValueError("mixup_alpha > 0 needs float inputs, but the network takes token ids.")
    net.classes_inferred_ = known
    net.input_shape_ = X.shape[1:]
    try:
        return encode_labels(y, known)
    except ValueError:
        raise ValueError(
            f"`y` contains labels not in `classes`: {np.setdiff1d(y, known).tolist()}."
        ) from None


def validate_input(net, X):
    """Validate the input of a fitted net (prediction, a foreign validation split).

    Returns
    -------
    X : ndarray
        float32, or int64 token ids (checked against the network's vocabulary).
    """
    integer = takes_token_ids(net.module)
    check_sample_shape(X, net.input_shape_, before_validation=True)
    dtype = "numeric" if integer else np.float32
    X = validate_data(net, X, reset=False, dtype=dtype, allow_nd=True)
    check_sample_shape(X, net.input_shape_)
    if integer:
        X = as_token_ids(X)
        check_token_ids(net.module_, X)
    return X


def as_fit_dataset(net, part, data):
    """Return a split's part as a FitDataset (a foreign dataset validated as input).

    Parameters
    ----------
    net : NetClassifier
        Fitted (its classes are known).
    part : torch Dataset
        A part of ``data`` returned by ``train_split``, or any dataset of ``(X, y)``.
    data : FitDataset or None
        The data that was split.
    """
    if part is data or isinstance(part, FitDataset):
        return part
    if isinstance(part, Subset) and part.dataset is data:
        return data.subset(np.asarray(part.indices))
    check_is_fitted(net)
    X, y = data_from_dataset(part)
    y = np.asarray(y)
    return FitDataset(validate_input(net, X), y, encode_labels(y, net.classes_), None)


def check_sample_shape(X, input_shape, before_validation=False):
    """Raise a ValueError if ``X`` (when it has a shape) has samples of another shape.

    Before ``validate_data``, two-dimensional input to a net fitted on two-dimensional
    input is left to it (scikit-learn's "X has n features" message).

    Parameters
    ----------
    X : array-like or torch.Tensor
    input_shape : tuple of int
        The shape of one sample at fit.
    before_validation : bool, default=False
    """
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) < 2:
        return
    if before_validation and len(shape) == 2 and len(input_shape) == 1:
        return
    if tuple(shape[1:]) != input_shape:
        raise ValueError(
            f"Expected samples of shape {input_shape} (as at fit), got {tuple(shape[1:])}."
        )


def check_token_ids(module, X):
    """Raise a ValueError unless the ids ``X`` index the network's first embedding.

    Parameters
    ----------
    module : torch.nn.Module
        The network.
    X : ndarray or torch.Tensor of integer dtype
        Token ids of a network with an integer ``input_dtype``.
    """
    embedding = next((m for m in module.modules() if isinstance(m, nn.Embedding)), None)
    if embedding is None or not len(X):
        return
    low, high = int(X.min()), int(X.max())
    if low < 0 or high >= embedding.num_embeddings:
        raise ValueError(
            f"Expected token ids in [0, {embedding.num_embeddings}) (the network's "
            f"vocabulary), got ids from {low} to {high}."
        )


def model_input(net, X):
    """Cast an input tensor to the network's dtype: int64 ids (checked) or float32."""
    if takes_token_ids(net.module):
        if X.is_floating_point():
            _check_integral(X[X != torch.round(X)], X[X.abs() >= _INT64_BOUND])
        X = X if X.dtype in INTEGER_DTYPES else X.to(torch.int64)
        check_token_ids(net.module_, X)
        return X
    return X if X.dtype == torch.float32 else X.to(torch.float32)


def as_token_ids(X):
    """Return a validated numeric array as int64 token ids; non-integral values raise."""
    if X.dtype.kind == "f":
        _check_integral(X[X != np.round(X)], X[np.abs(X) >= _INT64_BOUND])
    return X.astype(np.int64, copy=False)


def _check_integral(non_integral, too_large):
    """Raise a ValueError naming the first non-integral or too large float id, if any."""
    for values, expected in (
        (non_integral, "integer values"),
        (too_large, "integer values within int64"),
    ):
        if len(values):
            raise ValueError(
                f"The network takes token ids: expected {expected}, got "
                f"{values.reshape(-1)[0].item()!r}."
            )


def check_network(net):
    """Raise a ValueError naming both numbers if the network does not fit X or the classes.

    One sample of zeros goes through the network in evaluation mode: a layer that fails
    on its input (a ``Linear`` or convolution of another width than X's), an output that
    is not one row of scores per sample (a ``.squeeze()`` that drops the batch
    dimension) and an output width other than the number of classes are reported.

    Parameters
    ----------
    net : NetClassifier
        With ``module_`` built and ``input_shape_`` and ``classes_`` set.
    """
    shape, n_classes = net.input_shape_, len(net.classes_)
    layers = (nn.Linear, nn.modules.conv._ConvNd)
    entered = []
    handles = [
        module.register_forward_pre_hook(
            lambda module, args, name=name: entered.append((name, module, args[0].shape))
        )
        for name, module in net.module_.named_modules()
        if isinstance(module, layers)
    ]
    dtype = torch.int64 if takes_token_ids(net.module) else torch.float32
    net.module_.eval()
    try:
        with torch.no_grad():
            scores = net.forward_logits(torch.zeros((1, *shape), dtype=dtype, device=net.device_))
    except RuntimeError as error:
        raise ValueError(
            f"The network fails on samples of shape {shape} (X's){_layer_mismatch(entered)}: "
            f"{error}"
        ) from None
    finally:
        net.module_.train()
        for handle in handles:
            handle.remove()
    if scores.ndim != 2 or scores.shape[0] != 1:
        raise ValueError(
            f"The network returns scores of shape {tuple(scores.shape)} for a batch of one "
            f"sample; expected (1, {n_classes}), one row of {n_classes} class scores per "
            "sample. Its forward must keep the batch dimension: a `.squeeze()` without a "
            "dimension drops it for a single sample (squeeze a named dimension instead)."
        )
    if scores.shape[1] != n_classes:
        raise ValueError(
            f"The network returns {scores.shape[1]} scores per sample, but y has {n_classes} "
            f"classes: its output width must be the number of classes ({n_classes})."
        )


def _layer_mismatch(entered):
    """Describe the last layer entered if its input width is not the one it takes."""
    if not entered:
        return ""
    name, layer, shape = entered[-1]
    if isinstance(layer, nn.Linear):
        takes, gets, what = layer.in_features, shape[-1], "input features"
    else:
        takes, gets, what = layer.in_channels, shape[1] if len(shape) > 1 else None, "channels"
    if takes in (0, gets):
        return ""
    return f": its layer {name!r} ({type(layer).__name__}) takes {takes} {what} but gets {gets}"


def check_weighted_criterion(criterion):
    """Raise a ValueError if the criterion's ``forward`` takes no ``sample_weight``."""
    parameters = inspect.signature(criterion.forward).parameters.values()
    if not any(p.name == "sample_weight" or p.kind is p.VAR_KEYWORD for p in parameters):
        raise ValueError(
            f"The fit has sample or class weights, but the criterion "
            f"{type(criterion).__name__} takes no `sample_weight`: use a loss of "
            "sklearn_calib.losses (every one takes it) or a criterion whose forward "
            "accepts sample_weight."
        )


__all__ = [
    "INTEGER_DTYPES",
    "as_fit_dataset",
    "as_token_ids",
    "check_network",
    "check_sample_shape",
    "check_token_ids",
    "check_weighted_criterion",
    "model_input",
    "split_input",
    "takes_token_ids",
    "training_data",
    "validate_input",
]
