"""Running a fitted NetClassifier over input: validated batches on the device, no gradients.

Arrays are validated once (``_inputs.validate_input``) and cut into batches of the
inference batch size; a torch Dataset (skorch passes its own, such as the validation
``Subset`` to ``EpochScoring``) is batched by skorch's ``iterator_valid`` and each batch
cast and checked.
"""

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted
from skorch.utils import to_tensor
from torch.utils.data import Dataset

from ._inputs import check_sample_shape, model_input, validate_input


def evaluate(net, X, function):
    """Return ``function`` of the device batches of ``X``, concatenated.

    The network is in evaluation mode and no gradient is recorded.

    Parameters
    ----------
    net : NetClassifier
        Fitted.
    X : array-like of shape (n_samples, ...) or torch Dataset
    function : callable
        ``function(X_batch) -> torch.Tensor`` with one row per sample.

    Returns
    -------
    values : torch.Tensor
    """
    check_is_fitted(net)
    if isinstance(X, Dataset):
        batches = _dataset_batches(net, X)
    else:
        batches = _array_batches(net, validate_input(net, X))
    net._set_training(False)
    with torch.inference_mode():
        chunks = [function(batch) for batch in batches]
    if not chunks:
        raise ValueError(f"Expected at least 1 sample, got an empty {type(X).__name__}.")
    return torch.cat(chunks)


def _array_batches(net, X):
    """Yield the inference batches of a validated array on the device."""
    batch_size = net.inference_batch_size()
    for start in range(0, len(X), batch_size):
        chunk = np.require(X[start : start + batch_size], requirements=["C", "W"])
        yield torch.from_numpy(chunk).to(net.device_, non_blocking=True)


def _dataset_batches(net, dataset):
    """Yield the inputs of a torch Dataset's batches (skorch's iterator) on the device.

    They are not re-validated as arrays: each batch is cast to the network's input dtype
    and its sample shape checked.
    """
    for X, _ in net.get_iterator(dataset, training=False):
        check_sample_shape(X, net.input_shape_)
        yield model_input(net, to_tensor(X, device=net.device_))


__all__ = ["evaluate"]
