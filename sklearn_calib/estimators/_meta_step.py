"""The outer step of meta-regularisation: a virtual update and a meta-loss descent.

One call of :func:`network_meta_step` or :func:`meta_step` (Luketina et al. 2015; Bohdal
et al. 2021; Wang and Golebiowski 2024):

1. the regularised training loss of a training batch, as a function of the parameters
   that take the virtual step;
2. a virtual SGD step of these parameters, ``theta' = theta - lr * dL/dtheta``, kept in
   the autograd graph (``create_graph=True``), so ``theta'`` depends on the regulariser;
3. the meta loss (SECE, DECE or CE + 0.5 DECE) of a meta-validation batch through the
   network with ``theta'``;
4. its gradient with respect to the regulariser's parameters only, and one step of the
   regulariser's optimiser.

:func:`meta_step` steps the classifier head only, on detached penultimate features, as
Bohdal et al.'s code and Wang and Golebiowski's do; :func:`network_meta_step` steps every
parameter of the network (a functional call of the network with the virtual parameters;
batch-norm statistics are updated on copies, so the network is not modified). Which one
runs, and with which ``lr``, is the estimator's ``lookahead``
(:class:`~sklearn_calib.estimators.Lookahead`). Step 4's gradient is the exact
hypergradient of ``phi -> L_meta(theta - lr grad_theta L_train(theta, phi))``
(tests/test_meta.py checks both against central differences).

Everything stays on the device: no host synchronisation, static shapes, so the step can
be captured in a CUDA graph. :class:`MetaBatches` cuts the meta-validation batches from
tensors on the device by a position counter that is itself a device tensor.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from sklearn_calib.losses import differentiable_calibration_error, smooth_calibration_error
from sklearn_calib.losses._calibration import full_precision

from ._training import BatchSource

#: Meta losses: SECE (Wang and Golebiowski), DECE, and CE + 0.5 DECE (Bohdal et al.'s code).
META_LOSSES = ("sece", "dece", "ce_dece")


def meta_objective(
    logits, target, meta_loss, *, bandwidth, include_self, accuracy, n_bins, t_a, t_b
):
    """Return the meta loss of a batch of logits (0-d tensor).

    Parameters
    ----------
    logits : torch.Tensor of shape (n, K)
    target : torch.Tensor of shape (n,)
        Class indices.
    meta_loss : {"sece", "dece", "ce_dece"}
        "sece": :func:`~sklearn_calib.losses.smooth_calibration_error`; "dece":
        :func:`~sklearn_calib.losses.differentiable_calibration_error`; "ce_dece":
        cross-entropy plus 0.5 times DECE.
    bandwidth, include_self, accuracy : float, bool, {"hard", "soft"}
        SECE's kernel bandwidth, whether ``j = i`` is in its sums and which accuracy it
        smooths (the 0/1 correctness or the all-pairs soft accuracy).
    n_bins, t_a, t_b : int, float, float
        DECE's number of soft bins and its temperatures; ``t_a`` is also the soft
        ranking temperature of SECE's soft accuracy.

    Returns
    -------
    loss : torch.Tensor
    """
    probs = torch.softmax(logits, dim=1)
    if meta_loss == "sece":
        return smooth_calibration_error(
            probs,
            target,
            bandwidth=bandwidth,
            include_self=include_self,
            accuracy=accuracy,
            t_a=t_a,
        )
    dece = differentiable_calibration_error(probs, target, n_bins=n_bins, t_a=t_a, t_b=t_b)
    if meta_loss == "dece":
        return dece
    return F.cross_entropy(logits, target) + 0.5 * dece


def virtual_params(loss, params, lr):
    """Return ``params`` after one differentiable SGD step on ``loss``.

    Parameters
    ----------
    loss : torch.Tensor
        0-d loss, a function of the parameters.
    params : dict of str to torch.Tensor
        The parameters that take the step; one that needs no gradient, or on which
        ``loss`` does not depend, stays as it is.
    lr : float or torch.Tensor
        Step size (a 0-d device tensor is read when the step runs).

    Returns
    -------
    params : dict of str to torch.Tensor
        ``theta - lr * d loss / d theta`` for each parameter, differentiable with respect
        to whatever ``loss`` depends on.
    """
    names = [name for name, param in params.items() if param.requires_grad]
    grads = torch.autograd.grad(
        loss, [params[name] for name in names], create_graph=True, allow_unused=True
    )
    stepped = dict(params)
    for name, grad in zip(names, grads, strict=True):
        if grad is not None:
            stepped[name] = params[name] - lr * grad
    return stepped


def meta_step(
    regularizer, optimizer, loss_fn, objective, batch, meta_batch, head, lr, penalty_scale=1.0
):
    """Make one outer step with a virtual step of the head: meta loss, regulariser update.

    Parameters
    ----------
    regularizer : GammaNet or ElementwiseL2
        Its parameters are the ones stepped.
    optimizer : torch.optim.Optimizer
        Optimiser of the regulariser's parameters.
    loss_fn : callable
        ``loss_fn(logits, target, **criterion_kwargs)``, the network's training loss.
    objective : callable
        ``objective(logits, target)``, the meta loss (see :func:`meta_objective`).
    batch : tuple of (torch.Tensor, target)
        Detached float32 penultimate features (n, d) of a training batch and its targets
        (class indices or a MixedTarget).
    meta_batch : tuple of (torch.Tensor, torch.Tensor)
        Detached float32 features and class indices of a meta-validation batch.
    head : torch.nn.Linear
        The network's classifier head; it is not modified.
    lr : float or torch.Tensor
        Learning rate of the virtual step.
    penalty_scale : float or torch.Tensor, default=1.0
        Factor of the regulariser's penalty in the training loss (see
        ``ElementwiseL2.regularized_loss``).

    Returns
    -------
    meta_loss : torch.Tensor
        The detached 0-d meta loss, before the regulariser's step.
    """
    features, target = batch
    meta_features, meta_target = meta_batch
    optimizer.zero_grad(set_to_none=True)
    with full_precision(features.device):
        logits = F.linear(features, head.weight, head.bias)
        inner = regularizer.regularized_loss(
            loss_fn,
            logits,
            target,
            features,
            head.weight,
            head.bias,
            learn=True,
            penalty_scale=penalty_scale,
        )
        params = {"weight": head.weight}
        if head.bias is not None:
            params["bias"] = head.bias
        stepped = virtual_params(inner, params, lr)
        loss = objective(
            F.linear(meta_features, stepped["weight"], stepped.get("bias")), meta_target
        )
    return _descend(regularizer, optimizer, loss)


class _Features(nn.Module):
    """``network.features`` as a module's forward, for :func:`torch.func.functional_call`."""

    def __init__(self, network):
        super().__init__()
        self.network = network

    def forward(self, X):
        return self.network.features(X)


def network_meta_step(
    regularizer, optimizer, loss_fn, objective, network, batch, meta_batch, lr, penalty_scale=1.0
):
    """Make one outer step with a virtual step of the whole network.

    The forward passes run in the caller's autocast context (the training precision); the
    losses, in the dtype of the head's weight. Batch-norm running statistics are updated
    on copies of the network's buffers, so neither the network nor its statistics change.

    Parameters
    ----------
    regularizer, optimizer, loss_fn, objective, penalty_scale
        As in :func:`meta_step`.
    network : torch.nn.Module
        The network, with ``features`` (the penultimate representation) and ``head`` (an
        ``nn.Linear``) such that ``network(x) == head(features(x))``; it is not modified.
    batch : tuple of (torch.Tensor, target)
        Inputs of a training batch and its targets (class indices or a MixedTarget).
    meta_batch : tuple of (torch.Tensor, torch.Tensor)
        Inputs and class indices of a meta-validation batch.
    lr : float or torch.Tensor
        Learning rate of the virtual step.

    Returns
    -------
    meta_loss : torch.Tensor
        The detached 0-d meta loss, before the regulariser's step.
    """
    (X, target), (X_meta, meta_target) = batch, meta_batch
    features_of = _Features(network)
    params = {f"network.{name}": p for name, p in network.named_parameters()}
    buffers = {f"network.{name}": b.clone() for name, b in network.named_buffers()}
    weight, bias = "network.head.weight", "network.head.bias"
    optimizer.zero_grad(set_to_none=True)
    dtype = params[weight].dtype  # the losses' precision: autocast's half floats cast back
    features = functional_call(features_of, {**params, **buffers}, (X,)).to(dtype)
    with full_precision(features.device):
        logits = F.linear(features, params[weight], params.get(bias))
        inner = regularizer.regularized_loss(
            loss_fn,
            logits,
            target,
            features.detach(),
            params[weight],
            params.get(bias),
            learn=True,
            penalty_scale=penalty_scale,
        )
        params = virtual_params(inner, params, lr)
    meta_features = functional_call(features_of, {**params, **buffers}, (X_meta,)).to(dtype)
    with full_precision(meta_features.device):
        loss = objective(F.linear(meta_features, params[weight], params.get(bias)), meta_target)
    return _descend(regularizer, optimizer, loss)


def _descend(regularizer, optimizer, loss):
    """Step the regulariser's parameters down the gradient of ``loss``; return it detached."""
    loss.backward(inputs=list(regularizer.parameters()))
    optimizer.step()
    regularizer.project_()
    return loss.detach()


class MetaBatches:
    """Meta-validation batches cut on the device, cycling through a shuffled order.

    The batch of each call is ``order[(position + arange(size)) % n]`` and the position
    advances in place, so the same code runs eagerly and replayed in a CUDA graph. Call
    :meth:`shuffle` before each epoch (never inside a captured step).

    Parameters
    ----------
    X : ndarray of shape (n, ...)
    y : ndarray of shape (n,)
        Class indices.
    device : torch.device
    batch_size : int
        Meta batch size; the batches have ``min(batch_size, n)`` samples.
    """

    def __init__(self, X, y, device, batch_size):
        self.source = BatchSource(X, y, device)
        self.n_samples = self.source.n_samples
        self.size = min(batch_size, self.n_samples)
        self.channels_last = device.type == "cuda" and X.ndim == 4
        index_device = device if self.source.resident else torch.device("cpu")
        self.order = torch.arange(self.n_samples, device=index_device)  # shuffled per epoch
        self.offsets = torch.arange(self.size, device=index_device)
        self.position = torch.zeros((), dtype=torch.int64, device=index_device)
        self.loss_sum = torch.zeros((), dtype=torch.float32, device=device)

    @property
    def resident(self):
        """Whether the meta data is on the device (needed for CUDA-graph capture)."""
        return self.source.resident

    def shuffle(self):
        """Draw a new order (torch's default generator), restart it, reset the loss sum.

        All in place. Each epoch then depends only on the random state at its start, so a
        fit resumed from a checkpoint continues exactly.
        """
        self.order.copy_(torch.randperm(self.n_samples, device=self.order.device))
        self.position.zero_()
        self.loss_sum.zero_()

    def next_batch(self):
        """Return the next meta batch ``(X, y)`` on the device."""
        index = self.order[torch.remainder(self.position + self.offsets, self.n_samples)]
        self.position.add_(self.size).remainder_(self.n_samples)
        X, y = self.source.take(index)
        if self.channels_last:
            X = X.contiguous(memory_format=torch.channels_last)
        return X, y

    def record(self, meta_loss):
        """Add a step's meta loss to the epoch's sum (on the device)."""
        self.loss_sum.add_(meta_loss)


__all__ = [
    "META_LOSSES",
    "MetaBatches",
    "meta_objective",
    "meta_step",
    "network_meta_step",
    "virtual_params",
]
