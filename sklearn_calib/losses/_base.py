"""Base classes of the losses: input handling, reduction and the weighted cross-entropy.

:class:`WeightedCrossEntropy` is the one mechanism behind the focal family (Lin et al.): a
per-sample weight ``u(p)`` from :mod:`sklearn_calib.losses._weights` times cross-entropy, the
weight either differentiated or computed from detached probabilities ("GRA").
"""

import inspect

import torch
import torch.nn.functional as F
from torch import nn

from sklearn_calib._validation import check_number
from sklearn_calib.losses._calibration import (
    full_precision,
    prepare_inputs,
    prepare_sample_weight,
)

_REDUCTIONS = ("mean", "sum", "none")


class Loss(nn.Module):
    """Base class: checks inputs, disables autocast, weights and reduces per-sample losses.

    Subclasses implement ``per_sample_loss(logits, target, **kwargs) -> (n,)`` and, for a
    term computed from the whole batch (MMCE), ``batch_term(logits, target, sample_weight)
    -> 0-d tensor``, which is added to every sample's loss.
    """

    def __init__(self, reduction="mean"):
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(
                f"Expected `reduction` to be one of {list(_REDUCTIONS)}, got {reduction!r}."
            )
        self.reduction = reduction

    def forward(self, logits, target, sample_weight=None, **kwargs):
        """Return the loss of a batch.

        Parameters
        ----------
        logits : torch.Tensor of shape (n_samples, n_classes)
            Unnormalised scores; float16/bfloat16 are cast to float32.
        target : torch.Tensor of shape (n_samples,)
            Integer class indices.
        sample_weight : torch.Tensor of shape (n_samples,) or None, default=None
            Non-negative weights. Each sample's loss is multiplied by its weight before
            the reduction: ``"sum"`` gives ``sum_i w_i l_i`` and ``"mean"`` gives
            ``sum_i w_i l_i / sum_i w_i`` (0 when the weights sum to 0), so integer
            weights equal repeated samples (batch terms such as MMCE's are weighted too).
            The values are not checked (that would synchronise with the host).
        **kwargs
            Per-call weight parameters, e.g. a per-sample ``gamma`` tensor for the focal
            losses.

        Returns
        -------
        loss : torch.Tensor
            0-d tensor (shape (n_samples,) when ``reduction="none"``), at least float32.
        """
        logits, target = prepare_inputs(logits, target, "logits")
        weight = prepare_sample_weight(sample_weight, logits)
        with full_precision(logits.device):
            losses = self.per_sample_loss(logits, target, **kwargs)
            batch = self.batch_term(logits, target, weight)
            if batch is not None:
                losses = losses + batch
            if weight is not None:
                losses = losses * weight
            if self.reduction == "none":
                return losses
            if self.reduction == "sum":
                return losses.sum()
            if weight is None:
                return losses.mean()
            return losses.sum() / weight.sum().clamp_min(torch.finfo(losses.dtype).tiny)

    def per_sample_loss(self, logits, target, **kwargs):
        """Return the loss of each sample, before weighting and reduction.

        Parameters
        ----------
        logits : torch.Tensor of shape (n_samples, n_classes)
            Scores, in float32 or float64.
        target : torch.Tensor of shape (n_samples,)
            Integer class indices.
        **kwargs
            Per-call weight parameters, as :meth:`forward` takes them.

        Returns
        -------
        losses : torch.Tensor of shape (n_samples,)
            The loss of each sample.
        """
        raise NotImplementedError(f"{type(self).__name__} does not define per_sample_loss.")

    def batch_term(self, logits, target, sample_weight):
        """Return a term of the whole batch added to each sample's loss, or None (here).

        Parameters
        ----------
        logits : torch.Tensor of shape (n_samples, n_classes)
            Scores, in float32 or float64.
        target : torch.Tensor of shape (n_samples,)
            Integer class indices.
        sample_weight : torch.Tensor of shape (n_samples,) or None
            The weights of the samples, as :meth:`forward` takes them.

        Returns
        -------
        term : torch.Tensor of shape () or None
            The term, None for none.
        """
        return None

    def extra_repr(self):
        names = inspect.signature(type(self).__init__).parameters
        return ", ".join(f"{name}={getattr(self, name)!r}" for name in names if name != "self")


def log_probs_and_nll(logits, target):
    """Return ``log_softmax(logits)`` (n, K) and the cross-entropy ``-log p_y`` (n,)."""
    log_probs = F.log_softmax(logits, dim=1)
    return log_probs, -log_probs.gather(1, target.unsqueeze(1)).squeeze(1)


class WeightedCrossEntropy(Loss):
    """Uncertainty-weighted cross-entropy ``u(p) * CE`` (Lin et al.'s framework).

    Parameters
    ----------
    weight_fn : callable or None, default=None
        ``weight_fn(probs, target, **kwargs) -> (n,)`` tensor of per-sample weights; a
        module-level function keeps the loss picklable. None gives plain cross-entropy.
    detach_weight : bool, default=False
        False: the weight multiplies the loss and is differentiated (focal loss as in the
        code of Mukhoti et al. and its descendants). True: the weight is computed from
        detached probabilities, so ``d loss / d z = u(p) * d CE / d z`` ("GRA", Lin et al.;
        also Wang et al.'s focal loss). Parameters of the weight passed as tensors (a
        per-sample gamma) still receive gradients.
    reduction : {"mean", "sum", "none"}, default="mean"

    References
    ----------
    J. Lin, L. Tao, M. Dong and C. Xu, "Uncertainty Weighted Gradients for Model
    Calibration", CVPR 2025.

    J. Mukhoti, V. Kulharia, A. Sanyal, S. Golodetz, P. H. S. Torr and P. K. Dokania,
    "On using Focal Loss for Neural Network Calibration", ICML 2020 Workshop on
    Uncertainty and Robustness in Deep Learning.

    D.-B. Wang, L. Feng and M.-L. Zhang, "Rethinking Calibration of Deep Neural
    Networks: Do Not Be Afraid of Overconfidence", NeurIPS 2021.
    """

    def __init__(self, weight_fn=None, detach_weight=False, reduction="mean"):
        super().__init__(reduction)
        if weight_fn is not None and not callable(weight_fn):
            raise ValueError(f"Expected `weight_fn` to be callable or None, got {weight_fn!r}.")
        if not isinstance(detach_weight, bool):
            raise ValueError(f"Expected `detach_weight` to be a bool, got {detach_weight!r}.")
        self.weight_fn = weight_fn
        self.detach_weight = detach_weight

    def sample_weight(self, probs, target, **kwargs):
        """Return the per-sample weights u(p), or None for u = 1.

        Parameters
        ----------
        probs : torch.Tensor of shape (n_samples, n_classes)
            The probabilities, detached when ``detach_weight`` is True.
        target : torch.Tensor of shape (n_samples,)
            Integer class indices.
        **kwargs
            Per-call parameters of ``weight_fn``.

        Returns
        -------
        weight : torch.Tensor of shape (n_samples,) or None
            The weight of each sample.
        """
        if self.weight_fn is None:
            if kwargs:
                raise TypeError(
                    f"{type(self).__name__} takes no per-call arguments, got {sorted(kwargs)}."
                )
            return None
        return self.weight_fn(probs, target, **kwargs)

    def per_sample_loss(self, logits, target, **kwargs):
        log_probs, nll = log_probs_and_nll(logits, target)
        probs = log_probs.exp()
        weight = self.sample_weight(
            probs.detach() if self.detach_weight else probs, target, **kwargs
        )
        return nll if weight is None else weight * nll


class GammaWeighted(WeightedCrossEntropy):
    """A weighted cross-entropy whose weight has an exponent ``gamma``.

    ``forward(logits, target, gamma=t)`` overrides ``self.gamma`` for one call; ``t`` may be
    a tensor of shape (n,) giving one gamma per sample (the gamma-Net of
    :class:`~sklearn_calib.estimators.MetaNetClassifier`). Subclasses
    set ``_weight`` to a weight function ``(probs, target, gamma) -> (n,)``.
    """

    _weight = None

    def __init__(self, gamma, detach_weight, reduction):
        super().__init__(detach_weight=detach_weight, reduction=reduction)
        check_number("gamma", gamma, low=0)
        self.gamma = gamma

    def sample_weight(self, probs, target, gamma=None):
        return self._weight(probs, target, self.gamma if gamma is None else gamma)
