"""Non-finite losses during training: detected once per epoch, without per-step host syncs.

The per-batch losses of an epoch stay on the device and reach the host once at its end
(as they do for the history). :class:`NonFiniteGuard` then looks for the first
non-finite loss and, if all are finite, whether the weights themselves are finite (a
step can turn them non-finite through a finite loss with an infinite gradient). What
follows depends on ``on_nonfinite``: ``"raise"`` raises :class:`NonFiniteLossError`
(``NetClassifier.fit`` then puts the estimator back as it was before the call);
``"restore"`` loads the weights and optimiser state of the end of the last finite epoch,
drops the bad epoch from the history, warns and stops training.
"""

import math
import warnings

import torch

from ._state import capture_components, restore_components

ON_NONFINITE = ("raise", "restore")


class NonFiniteLossError(FloatingPointError):
    """Training produced a non-finite loss (or non-finite weights).

    Parameters
    ----------
    message : str
        What happened.
    epoch, batch : int
        As the attributes.

    Attributes
    ----------
    epoch : int
        1-based epoch (skorch's ``history[:, "epoch"]``) in which it happened.
    batch : int
        1-based batch of that epoch: the first with a non-finite loss, or the last batch
        when only the weights were found non-finite.
    """

    def __init__(self, message, epoch, batch):
        super().__init__(message)
        self.epoch = epoch
        self.batch = batch


class NonFiniteGuard:
    """Checks each epoch's losses and weights and applies the net's ``on_nonfinite``.

    Parameters
    ----------
    net : NetClassifier
        Initialised net whose ``on_nonfinite`` is ``"raise"`` or ``"restore"``.
    """

    def __init__(self, net):
        self.net = net
        self.restore = net.on_nonfinite == "restore"
        self.snapshot = None

    def epoch_begin(self):
        """Keep a device copy of the weights and optimiser state (``"restore"`` only)."""
        if self.restore:
            self.snapshot = capture_components(self.net)

    def check(self, losses):
        """Return whether the epoch was finite; raise or roll back if it was not.

        Parameters
        ----------
        losses : list of float
            The epoch's training losses, one per batch, on the host.

        Returns
        -------
        finite : bool
            False after a roll back (``"restore"``): training must stop.
        """
        net = self.net
        bad = next((i for i, loss in enumerate(losses) if not math.isfinite(loss)), None)
        if bad is None and self._weights_finite():
            return True
        epoch = len(net.history)
        if bad is None:
            batch = len(losses)
            what = (
                f"the weights became non-finite in epoch {epoch} (at the latest in batch {batch})"
            )
        else:
            batch = bad + 1
            what = (
                f"the training loss was {losses[bad]} in epoch {epoch}, batch {batch} of "
                f"{len(losses)}"
            )
        if not self.restore:
            raise NonFiniteLossError(
                f"Training stopped: {what}. Lower the learning rate, clip gradients "
                "(grad_clip) or check the inputs; on_nonfinite='restore' keeps the weights "
                "of the last finite epoch instead. The estimator is left as it was before "
                "this call.",
                epoch=epoch,
                batch=batch,
            )
        restore_components(net, self.snapshot)
        del net.history[-1]
        warnings.warn(
            f"Training stopped: {what}; the weights and optimiser state from before epoch "
            f"{epoch} were restored and that epoch removed from the history.",
            RuntimeWarning,
            stacklevel=6,
        )
        return False

    def _weights_finite(self):
        parameters = [p.detach() for p in self.net.module_.parameters()]
        if not parameters:
            return True
        return bool(torch.stack([torch.isfinite(p).all() for p in parameters]).all())


__all__ = ["ON_NONFINITE", "NonFiniteGuard", "NonFiniteLossError"]
