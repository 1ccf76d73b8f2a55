"""Callbacks the training run treats specially: NetClassifier's progress bar, which follows
the net's ``verbose`` setting, and the base of callbacks that read the validation outputs."""

from skorch.callbacks import Callback, ProgressBar


class ValidationBatchCallback(Callback):
    """A skorch callback whose ``on_batch_end`` reads the outputs of validation batches.

    skorch calls ``on_batch_end(net, batch=..., training=False, loss=..., y_pred=...)``
    after each validation step, with the step's outputs; a callback can collect them
    instead of running the validation data through the network again. For callbacks of
    this class, a training run of NetClassifier keeps its fast paths: the validation
    pass on the device calls their ``on_batch_end`` with the step's device tensors (no
    host synchronisation; the batch's history entries are written at the end of the
    pass), and the training pass neither calls it nor runs per batch because of it. When
    another callback makes the run go per batch, ``on_batch_end`` also receives the
    training batches (``training=True``), as skorch sends them.
    """


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
