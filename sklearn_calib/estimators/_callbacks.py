"""Default callbacks of NetClassifier that follow the net's ``verbose`` setting."""

from skorch.callbacks import ProgressBar


class VerboseProgressBar(ProgressBar):
    """skorch's ProgressBar over the training batches, shown only while ``verbose`` is true.

    It counts the training part of each epoch (the batches of ``dataset_train``; the
    validation pass is short and reported by the epoch's table). It is always among the
    default callbacks, so the callback list (and ``get_params``) does not depend on
    ``verbose``.
    """

    def _get_batches_per_epoch(self, net, dataset_train, dataset_valid):
        return self._get_batches_per_epoch_phase(net, dataset_train, True)

    def on_epoch_begin(self, net, **kwargs):
        if net.verbose:
            super().on_epoch_begin(net, **kwargs)

    def on_batch_end(self, net, training=False, **kwargs):
        if net.verbose and training:
            super().on_batch_end(net, training=training, **kwargs)

    def on_epoch_end(self, net, **kwargs):
        if net.verbose:
            self.pbar_.refresh()
            super().on_epoch_end(net, **kwargs)


def advancing_progress_bars(net):
    """Return the net's progress bars that advance per batch (VerboseProgressBar only while
    ``verbose``): the callbacks a training pass on the device notifies per batch.

    Parameters
    ----------
    net : NetClassifier
        With its callbacks initialised.

    Returns
    -------
    bars : list of skorch.callbacks.ProgressBar
    """
    return [
        callback
        for _, callback in net.callbacks_
        if isinstance(callback, ProgressBar)
        and not (isinstance(callback, VerboseProgressBar) and not net.verbose)
    ]
