"""The learnable regularisers of meta-regularisation: the gamma-Net and the element-wise L2.

Both are training-only modules whose parameters are learned by the outer (meta) loop of
:class:`~sklearn_calib.estimators.MetaNetClassifier`. Each turns the network's training
loss into a regularised loss through :meth:`regularized_loss`, so the bilevel step treats
them alike:

- :class:`GammaNet` (Wang and Golebiowski 2024) predicts one focal-loss exponent per
  sample from the penultimate features;
- :class:`ElementwiseL2` (Bohdal et al. 2021) adds ``sum(c * w ** 2)`` over the entries of
  the classifier head, with one learned coefficient ``c`` per weight and bias entry.
"""

import math

import torch
from torch import nn


class GammaNet(nn.Module):
    """Sample-wise focal gamma from penultimate features (the gamma-Net).

    ``a = x A`` (A: d x K), ``s = softmax(a)``, ``x~ = s A^T``, ``gamma = |x~ W| / tau``:
    ``x~`` is a convex combination of the K columns of A chosen by attention on ``x``.

    The initialisation draws A and W at random and then shifts every column of A along W
    so that ``A_k . W = tau`` for each k. ``x~ W`` is then ``tau`` for every input (the
    attention weights sum to 1), so every sample starts at ``gamma = 1`` (the paper's
    initial value) while both A and W receive non-zero gradients.

    Because of the ``1 / tau`` gain, gamma is very sensitive to the parameters: moving each
    entry of A and W by ``eps`` (as one Adam step of learning rate ``eps`` does) changes
    gamma by up to ``eps * (||x~||_1 + ||W||_1) / tau``, of order ``eps * 100 * sqrt(d)``:
    one unit of gamma or more per step for ``eps = 1e-3``. :meth:`lr_scale` gives the
    Adam learning rate per unit of gamma change, so that a meta learning rate can be set in
    units of gamma (see :class:`~sklearn_calib.estimators.MetaNetClassifier`).

    Parameters
    ----------
    in_features : int
        Dimension d of the penultimate features.
    n_heads : int
        Number of attention heads K (the paper uses the number of classes).
    tau : float, default=0.01
        Temperature; gamma is ``|x~ W| / tau``.
    """

    #: The default meta step: at most about 0.01 of gamma per Adam step (see
    #: MetaNetClassifier's ``meta_lr``).
    default_meta_lr = 1e-2

    def __init__(self, in_features, n_heads, tau=0.01):
        super().__init__()
        scale = 1.0 / math.sqrt(in_features)
        attention = torch.randn(in_features, n_heads) * scale
        weight = torch.randn(in_features) * scale
        shift = (tau - weight @ attention) / (weight @ weight)
        attention += weight.unsqueeze(1) * shift.unsqueeze(0)
        self.attention = nn.Parameter(attention)
        self.weight = nn.Parameter(weight)
        self.tau = tau
        # the sensitivity bound of lr_scale, fixed at initialisation (a buffer, so a
        # resumed or reloaded fit steps exactly as the original one)
        bound = attention.abs().sum(0).max() + weight.abs().sum()
        self.register_buffer("sensitivity", bound)

    def forward(self, features):
        """Return the per-sample gamma, shape (n,), of features of shape (n, d)."""
        weights = torch.softmax(features @ self.attention, dim=1)
        mixed = weights @ self.attention.t()
        return (mixed @ self.weight).abs() / self.tau

    def matches(self, head):
        """Whether this gamma-Net fits the classifier head ``head`` (an ``nn.Linear``)."""
        return tuple(self.attention.shape) == (head.in_features, head.out_features)

    def regularized_loss(
        self, loss_fn, logits, target, features, weight, bias, *, learn, penalty_scale=1.0
    ):
        """Return ``loss_fn(logits, target, gamma=self(features))``.

        Parameters
        ----------
        loss_fn : callable
            ``loss_fn(logits, target, **criterion_kwargs)``, the training loss.
        logits : torch.Tensor of shape (n, K)
        target : torch.Tensor of shape (n,) or MixedTarget
        features : torch.Tensor of shape (n, d)
            Detached penultimate features of the batch.
        weight, bias : torch.Tensor
            The classifier head's parameters (unused here).
        learn : bool
            Whether gamma stays differentiable in this module's parameters (the virtual
            step) or is a constant (the real update).
        penalty_scale : float or torch.Tensor, default=1.0
            Factor of a penalty added to the loss (there is none here).

        Returns
        -------
        loss : torch.Tensor
            0-d tensor.
        """
        with torch.set_grad_enabled(learn and torch.is_grad_enabled()):
            gamma = self(features)
        return loss_fn(logits, target, gamma=gamma)

    def lr_scale(self):
        """Return the optimiser learning rate per unit of gamma change (a float).

        ``tau / (max_k ||A_k||_1 + ||W||_1)`` with A and W at initialisation (the buffer
        ``sensitivity``): the sum of ``|d gamma / d theta|`` over all parameters is at most
        ``(||x~||_1 + ||W||_1) / tau`` with ``x~`` a convex combination of the columns
        ``A_k`` (the attention's own term vanishes at initialisation, where every
        ``A_k . W`` is ``tau``). A step that moves each parameter by at most
        ``lr_scale() * delta`` thus changes every sample's gamma by at most about
        ``delta``. One host synchronisation.
        """
        return self.tau / self.sensitivity.item()

    def project_(self):
        """Keep the parameters feasible after an optimiser step (nothing to do)."""

    def statistics(self, features):
        """Return ``{"gamma_mean", "gamma_std"}`` (0-d tensors) of the gammas of ``features``."""
        gamma = self(features)
        return {"gamma_mean": gamma.mean(), "gamma_std": gamma.std(correction=0)}


class ElementwiseL2(nn.Module):
    """Learnable element-wise L2 penalty on the classifier head (Bohdal et al. 2021).

    ``penalty = sum_ij C_ij W_ij ** 2 + sum_j c_j b_j ** 2``, one coefficient per entry of
    the head's weight ``W`` and bias ``b``. The coefficients start at 0 (plain training, as
    in the authors' code) and are clipped at 0 after each meta step, so the penalty stays a
    penalty (the authors' code leaves them unconstrained).

    Parameters
    ----------
    weight_shape : tuple of int
        Shape of the head's weight, ``(K, d)``.
    bias_shape : tuple of int or None
        Shape of the head's bias, ``(K,)``, or None for a head without bias.
    """

    #: The default meta step: Adam's learning rate 1e-3 on the coefficients (Bohdal et al.).
    default_meta_lr = 1e-3

    def __init__(self, weight_shape, bias_shape):
        super().__init__()
        self.weight_coef = nn.Parameter(torch.zeros(weight_shape))
        self.bias_coef = None if bias_shape is None else nn.Parameter(torch.zeros(bias_shape))

    def forward(self, weight, bias):
        """Return the penalty of the head parameters ``weight`` and ``bias`` (0-d tensor)."""
        penalty = (self.weight_coef * weight.square()).sum()
        if self.bias_coef is not None:
            penalty = penalty + (self.bias_coef * bias.square()).sum()
        return penalty

    def matches(self, head):
        """Whether the coefficients have the shapes of ``head``'s parameters."""
        bias = None if head.bias is None else tuple(head.bias.shape)
        own = None if self.bias_coef is None else tuple(self.bias_coef.shape)
        return tuple(self.weight_coef.shape) == tuple(head.weight.shape) and own == bias

    def lr_scale(self):
        """Return 1.0: the coefficients are the penalty's strengths, stepped as they are."""
        return 1.0

    def regularized_loss(
        self, loss_fn, logits, target, features, weight, bias, *, learn, penalty_scale=1.0
    ):
        """Return ``loss_fn(logits, target) + penalty_scale * penalty(weight, bias)``.

        Parameters are those of :meth:`GammaNet.regularized_loss`; with ``learn=False`` the
        coefficients are constants and only ``weight`` and ``bias`` are differentiated.
        The penalty is on the scale of the summed loss (Bohdal et al.'s code adds it to
        the loss summed over the batch): a loss divided by the batch size takes
        ``penalty_scale = 1 / batch size``.
        """
        if learn:
            penalty = self(weight, bias)
        else:
            penalty = (self.weight_coef.detach() * weight.square()).sum()
            if self.bias_coef is not None:
                penalty = penalty + (self.bias_coef.detach() * bias.square()).sum()
        return loss_fn(logits, target) + penalty_scale * penalty

    def project_(self):
        """Clip the coefficients at 0, in place (no host synchronisation)."""
        with torch.no_grad():
            for coef in self.parameters():
                coef.clamp_(min=0.0)

    def statistics(self, features=None):
        """Return ``{"l2_mean", "l2_std"}``: mean and std of all coefficients (0-d tensors)."""
        coefs = torch.cat([coef.detach().flatten() for coef in self.parameters()])
        return {"l2_mean": coefs.mean(), "l2_std": coefs.std(correction=0)}


def build_regularizer(kind, head, tau):
    """Return a new regulariser for the classifier ``head``.

    Parameters
    ----------
    kind : {"gamma_net", "l2"}
    head : torch.nn.Linear
        The network's final layer.
    tau : float
        Temperature of the gamma-Net.

    Returns
    -------
    regularizer : GammaNet or ElementwiseL2
        On the device of ``head``.
    """
    device = head.weight.device
    if kind == "gamma_net":
        regularizer = GammaNet(head.in_features, head.out_features, tau=tau)
    else:
        bias_shape = None if head.bias is None else tuple(head.bias.shape)
        regularizer = ElementwiseL2(tuple(head.weight.shape), bias_shape)
    return regularizer.to(device)


__all__ = ["ElementwiseL2", "GammaNet", "build_regularizer"]
