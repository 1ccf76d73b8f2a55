"""What a training run of NetClassifier works on: the data on the device and its batches.

A fit moves X, the class indices and the sample weights to the device once
(:class:`BatchSource`, behind a :class:`FitDataset`), shuffles with a seeded generator on
the device and cuts batches by indexing, then augments and mixes them there
(:class:`TrainingBatches`, what ``NetClassifier.get_iterator`` returns for training), so
no step waits for the host. Validation and prediction batches follow the sample order
(:class:`EvaluationBatches`).
"""

import math

import numpy as np
import torch
from skorch.dataset import Dataset

from ._augment import augment_images, mixup
from ._device import fits_on_device
from ._targets import WeightedTarget


class BatchSource:
    """Inputs, class indices and sample weights of one split, on the device when they fit.

    Parameters
    ----------
    X : ndarray of shape (n_samples, ...)
        Validated inputs (float32 or int64).
    y : ndarray of shape (n_samples,)
        Class indices, int64.
    device : torch.device
    weight : ndarray of shape (n_samples,) or None, default=None
        Sample weights (float32); with them the batches' targets are
        :class:`~sklearn_calib.estimators._targets.WeightedTarget`.
    """

    def __init__(self, X, y, device, weight=None):
        self.device = device
        self.n_samples = len(X)
        tensors = [
            torch.from_numpy(np.require(X, requirements=["C", "W"])),
            torch.from_numpy(np.require(y, dtype=np.int64, requirements=["C", "W"])),
        ]
        if weight is not None:
            tensors.append(torch.from_numpy(np.require(weight, np.float32, ["C", "W"])))
        self.resident = fits_on_device(sum(t.nbytes for t in tensors), device)
        if self.resident:
            tensors = [t.to(device) for t in tensors]
        elif device.type == "cuda":
            tensors = [t.pin_memory() for t in tensors]
        self.X, self.y = tensors[:2]
        self.weight = tensors[2] if weight is not None else None

    def permutation(self, generator):
        """Return a random order of the samples (on the device, or the host if not resident)."""
        perm = torch.randperm(self.n_samples, device=generator.device, generator=generator)
        return perm if self.resident else perm.cpu()

    def _batch(self, parts):
        if not self.resident:
            parts = [part.to(self.device, non_blocking=True) for part in parts]
        X, y = parts[:2]
        return (X, y) if len(parts) == 2 else (X, WeightedTarget(y, parts[2]))

    def _parts(self):
        return [self.X, self.y] + ([self.weight] if self.weight is not None else [])

    def take(self, index):
        """Return the batch ``(X[index], target[index])`` on the device."""
        return self._batch([part.index_select(0, index) for part in self._parts()])

    def slices(self, batch_size):
        """Yield consecutive batches ``(X, target)`` on the device, in sample order."""
        for start in range(0, self.n_samples, batch_size):
            yield self._batch([part[start : start + batch_size] for part in self._parts()])


class FitDataset(Dataset):
    """A skorch Dataset of validated training data, with class indices and sample weights.

    Callbacks receive it as ``dataset_train``/``dataset_valid`` (``X`` and the labels
    ``y``, as any skorch Dataset); ``NetClassifier.get_iterator`` batches it on the device.

    Parameters
    ----------
    X : ndarray of shape (n_samples, ...)
        Validated inputs.
    y : ndarray of shape (n_samples,)
        Class labels.
    y_index : ndarray of shape (n_samples,)
        Class indices.
    weight : ndarray of shape (n_samples,) or None
        Sample weights.
    """

    def __init__(self, X, y, y_index, weight):
        super().__init__(X, y)
        self.y_index = y_index
        self.weight = weight
        self._source = None

    def subset(self, index):
        """Return the FitDataset of the samples ``index``."""
        weight = self.weight[index] if self.weight is not None else None
        return FitDataset(self.X[index], self.y[index], self.y_index[index], weight)

    def batch_source(self, device):
        """Return the data on ``device`` (moved once, then kept)."""
        if self._source is None or self._source.device != device:
            self._source = BatchSource(self.X, self.y_index, device, self.weight)
        return self._source


class TrainingBatches:
    """The training batches of one epoch per iteration: shuffled, augmented and mixed.

    Parameters
    ----------
    source : BatchSource
    batch_size : int
    generators : RunGenerators
        The order of the samples, augmentation and mixup pairing come from its torch
        generator on the device, mixup's weights from its numpy generator.
    augment : {"crop_flip", "crop", "flip"} or None, default=None
        Image augmentation (``augment_images``).
    mixup_alpha : float, default=0.0
        Mixup's Beta parameter; 0 turns mixup off.
    channels_last : bool, default=False
        Whether image batches are made channels-last (CUDA).
    """

    def __init__(
        self, source, batch_size, generators, augment=None, mixup_alpha=0.0, channels_last=False
    ):
        self.source = source
        self.batch_size = batch_size
        self.generators = generators
        self.augment = augment
        self.mixup_alpha = mixup_alpha
        self.channels_last = channels_last

    def __len__(self):
        return math.ceil(self.source.n_samples / self.batch_size)

    def __iter__(self):
        generator = self.generators.generator
        perm = self.source.permutation(generator)
        for start in range(0, self.source.n_samples, self.batch_size):
            X, target = self.source.take(perm[start : start + self.batch_size])
            if self.augment is not None:
                X = augment_images(X, self.augment, generator)
            if self.mixup_alpha > 0:
                lam = float(self.generators.np_rng.beta(self.mixup_alpha, self.mixup_alpha))
                X, target = mixup(X, target, lam, generator)
            if self.channels_last:
                X = X.contiguous(memory_format=torch.channels_last)
            yield X, target


class EvaluationBatches:
    """The batches of a split in sample order, for validation and prediction.

    Parameters
    ----------
    source : BatchSource
    batch_size : int
    channels_last : bool
        Whether image batches are made channels-last (CUDA).
    """

    def __init__(self, source, batch_size, channels_last):
        self.source = source
        self.batch_size = batch_size
        self.channels_last = channels_last

    def __len__(self):
        return math.ceil(self.source.n_samples / self.batch_size)

    def __iter__(self):
        for X, target in self.source.slices(self.batch_size):
            if self.channels_last:
                X = X.contiguous(memory_format=torch.channels_last)
            yield X, target


def clip_gradient_norm(parameters, max_norm):
    """Scale the gradients in place so that their total 2-norm is at most ``max_norm``.

    ``torch.nn.utils.clip_grad_norm_`` sums the squares in the gradients' dtype: float32
    gradients beyond about 1e19 make the total norm inf, and its clip coefficient
    ``max_norm / inf = 0`` zeroes the step instead of clipping it. Here each gradient's
    norm is accumulated in float64, where the square of any finite float32 value fits;
    torch's ``clip_grads_with_norm_`` applies the coefficient. No host synchronisation,
    so a CUDA graph can capture it.

    Parameters
    ----------
    parameters : list of torch.nn.Parameter
        Parameters whose ``grad`` (where not None) is clipped.
    max_norm : float
        Largest total norm.
    """
    grads = [parameter.grad for parameter in parameters if parameter.grad is not None]
    if not grads:
        return
    norms = torch.stack([torch.linalg.vector_norm(grad, dtype=torch.float64) for grad in grads])
    dtype = grads[0].dtype
    total = torch.linalg.vector_norm(norms).clamp(max=torch.finfo(dtype).max).to(dtype)
    torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, total)


__all__ = [
    "BatchSource",
    "EvaluationBatches",
    "FitDataset",
    "TrainingBatches",
    "clip_gradient_norm",
]
