"""The virtual step of meta-regularisation: what it updates, on which loss, and how far.

Each meta step of :class:`~sklearn_calib.estimators.MetaNetClassifier` looks ahead: it
takes a differentiable SGD step of the network on the regularised training loss, then
measures the meta loss through the stepped network. :class:`Lookahead` says which
parameters that step moves, along the gradient of which loss, by how much, and how large
the meta-validation batches are. :data:`LOOKAHEADS` names two: Bohdal et al.'s (2021) step
(the default) and the whole-network step we tuned on a positive control.
"""

import numbers
from dataclasses import dataclass

from .._validation import check_number, check_option

#: What the virtual step can move: the classifier head only, or every parameter.
LOOKAHEAD_PARAMETERS = ("head", "network")

#: The loss whose gradient the virtual step follows: summed over the batch, or its mean.
LOOKAHEAD_LOSSES = ("sum", "mean")


@dataclass(frozen=True)
class Lookahead:
    """The virtual SGD step of MetaNetClassifier's meta step.

    The step moves the parameters it updates by ``-lr_scale * lr_now * grad J``, where
    ``lr_now`` is the network optimiser's current learning rate (of its first parameter
    group) and ``J`` the training batch's regularised loss (with the learnable L2
    regulariser, the loss plus its penalty), summed over the batch (``loss="sum"``) or
    divided by the batch size (``loss="mean"``), whatever the net's ``loss_reduction``.
    Under ``loss_reduction="mean"`` with sample weights the summed loss is the batch
    size times the weighted mean, so weights that differ by a constant factor take the
    same step, as they make the same real step. The step is not clipped.

    Parameters
    ----------
    parameters : {"head", "network"}, default="head"
        "head": the classifier head only, on the batch's detached penultimate features;
        "network": every parameter of the network (batch-norm statistics are updated on
        copies).
    loss : {"sum", "mean"}, default="sum"
        The reduction of ``J`` over the batch.
    lr_scale : float, default=1.0
        Ratio of the step's learning rate to ``lr_now``.
    lr : float or None, default=None
        A fixed learning rate of the step instead of ``lr_scale * lr_now``.
    meta_batch_size : int or None, default=None
        Size of the meta-validation batches (at most the meta-validation part's size);
        None: the training ``batch_size``.

    See Also
    --------
    MetaNetClassifier : Takes a Lookahead, or the name of one of :data:`LOOKAHEADS`.

    References
    ----------
    O. Bohdal, Y. Yang and T. Hospedales, "Meta-Calibration: Learning of Model
    Calibration Using Differentiable Expected Calibration Error", arXiv:2106.09613, 2021.

    Examples
    --------
    >>> from sklearn_calib.estimators import LOOKAHEADS, Lookahead
    >>> LOOKAHEADS["bohdal2021"] == Lookahead()
    True
    >>> Lookahead("network", lr_scale=5.0).meta_batch_size is None
    True
    """

    parameters: str = "head"
    loss: str = "sum"
    lr_scale: float = 1.0
    lr: float | None = None
    meta_batch_size: int | None = None

    def __post_init__(self):
        check_option(self.parameters, "Lookahead.parameters", LOOKAHEAD_PARAMETERS)
        check_option(self.loss, "Lookahead.loss", LOOKAHEAD_LOSSES)
        check_number("Lookahead.lr_scale", self.lr_scale, low=0, low_open=True)
        if self.lr is not None:
            check_number("Lookahead.lr", self.lr, low=0, low_open=True)
        size = self.meta_batch_size
        if size is not None and not (
            isinstance(size, numbers.Integral) and not isinstance(size, bool) and size >= 1
        ):
            raise ValueError(
                f"Expected `Lookahead.meta_batch_size` to be None or an integer >= 1, got {size!r}."
            )

    def step_size(self, lr_now, loss_reduction, batch_size):
        """Return the step size on the training loss as the net reduces it.

        The net's training loss is ``J`` divided by the batch size under
        ``loss_reduction="mean"`` and ``J`` itself under ``"sum"``; the returned step
        size turns its gradient into this lookahead's displacement.

        Parameters
        ----------
        lr_now : float or torch.Tensor
            The network optimiser's current learning rate (a 0-d device tensor on CUDA).
        loss_reduction : {"mean", "sum"}
            The net's ``loss_reduction``.
        batch_size : int
            The number of samples in the batch.

        Returns
        -------
        step_size : float or torch.Tensor
            The factor of the gradient of the net's training loss in the virtual step.
        """
        lr = lr_now * self.lr_scale if self.lr is None else self.lr
        if self.loss == loss_reduction:
            return lr
        return lr * batch_size if self.loss == "sum" else lr / batch_size

    def meta_batch(self, batch_size):
        """Return the meta-validation batch size for a training ``batch_size``.

        Parameters
        ----------
        batch_size : int
            The net's training batch size.

        Returns
        -------
        meta_batch_size : int
            This lookahead's ``meta_batch_size``, or ``batch_size`` when it is None.
        """
        return batch_size if self.meta_batch_size is None else self.meta_batch_size


#: The named lookaheads. "bohdal2021": Bohdal et al.'s step, which Wang and Golebiowski's
#: code takes (the head only, the summed loss, the current learning rate, meta batches of
#: the training batch's size). "network_tuned": every parameter, 20 times the current
#: learning rate on the mean loss, meta batches of 512, tuned on a positive control with
#: noisy labels (see the user guide).
LOOKAHEADS = {
    "bohdal2021": Lookahead(),
    "network_tuned": Lookahead("network", loss="mean", lr_scale=20.0, meta_batch_size=512),
}


def resolve_lookahead(lookahead):
    """Return the :class:`Lookahead` that ``lookahead`` names (or is).

    Parameters
    ----------
    lookahead : str or Lookahead

    Returns
    -------
    lookahead : Lookahead
    """
    if isinstance(lookahead, Lookahead):
        return lookahead
    if isinstance(lookahead, str) and lookahead in LOOKAHEADS:
        return LOOKAHEADS[lookahead]
    raise ValueError(
        f"Expected `lookahead` to be a Lookahead or one of {sorted(LOOKAHEADS)}, got {lookahead!r}."
    )


__all__ = [
    "LOOKAHEADS",
    "LOOKAHEAD_LOSSES",
    "LOOKAHEAD_PARAMETERS",
    "Lookahead",
    "resolve_lookahead",
]
