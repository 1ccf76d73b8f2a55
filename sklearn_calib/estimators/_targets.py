"""Targets of a training batch: class indices, indices with sample weights, or a mixup pair.

A batch is ``(X, target)`` with ``target`` a class-index tensor, a :class:`WeightedTarget`
(when the fit has sample or class weights) or a :class:`MixedTarget` of two of those.
:meth:`NetClassifier.get_loss` turns each into the criterion's calls.
"""

from typing import NamedTuple

import torch


class WeightedTarget(NamedTuple):
    """Class indices with per-sample weights.

    Attributes
    ----------
    y : torch.Tensor of shape (n,)
        Class indices.
    weight : torch.Tensor of shape (n,)
        Non-negative float32 weights of the samples.
    """

    y: torch.Tensor
    weight: torch.Tensor


class MixedTarget(NamedTuple):
    """Targets of a mixup batch: the loss is ``lam * L(z, y_a) + (1 - lam) * L(z, y_b)``.

    Attributes
    ----------
    y_a : torch.Tensor of shape (n,) or WeightedTarget
        Class indices (with their weights) of the first images.
    y_b : torch.Tensor of shape (n,) or WeightedTarget
        Class indices (with their weights) of the images mixed in.
    lam : torch.Tensor of shape ()
        Mixing weight of the first images, a float32 tensor on the batch's device.
    """

    y_a: object
    y_b: object
    lam: torch.Tensor


def take(target, index):
    """Return the rows ``index`` of a class-index tensor or a :class:`WeightedTarget`."""
    if isinstance(target, WeightedTarget):
        return WeightedTarget(target.y.index_select(0, index), target.weight.index_select(0, index))
    return target.index_select(0, index)


def class_indices(target):
    """Return the class indices of a target (the first images' for a mixup pair)."""
    if isinstance(target, MixedTarget):
        target = target.y_a
    return target.y if isinstance(target, WeightedTarget) else target


def sample_weights(target):
    """Return the sample weights of a target, or None if it has none."""
    if isinstance(target, MixedTarget):
        target = target.y_a
    return target.weight if isinstance(target, WeightedTarget) else None


def total_weight(target):
    """Return the sum of a target's sample weights (a tensor), or its number of samples."""
    weight = sample_weights(target)
    return len(class_indices(target)) if weight is None else weight.sum()


def target_loss(criterion, y_pred, target, **criterion_kwargs):
    """Return the criterion's loss of a batch's ``target``, weighted or mixed as it says.

    A :class:`WeightedTarget` passes its weights as ``sample_weight``; a
    :class:`MixedTarget` gives ``lam * L(z, y_a) + (1 - lam) * L(z, y_b)``.
    """
    if isinstance(target, MixedTarget):
        return target.lam * target_loss(criterion, y_pred, target.y_a, **criterion_kwargs) + (
            1.0 - target.lam
        ) * target_loss(criterion, y_pred, target.y_b, **criterion_kwargs)
    if isinstance(target, WeightedTarget):
        return criterion(y_pred, target.y, sample_weight=target.weight, **criterion_kwargs)
    return criterion(y_pred, target, **criterion_kwargs)


def batch_accuracy(logits, target):
    """Return the (weighted) accuracy of a batch's logits as a 0-d tensor."""
    correct = (logits.argmax(1) == class_indices(target)).float()
    weight = sample_weights(target)
    if weight is None:
        return correct.mean()
    return (correct * weight).sum() / weight.sum().clamp_min(torch.finfo(torch.float32).tiny)


__all__ = [
    "MixedTarget",
    "WeightedTarget",
    "batch_accuracy",
    "class_indices",
    "sample_weights",
    "take",
    "target_loss",
    "total_weight",
]
