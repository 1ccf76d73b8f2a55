"""Default callbacks of NetClassifier that follow the net's ``verbose`` setting."""

from skorch.callbacks import ProgressBar


class VerboseProgressBar(ProgressBar):
    """skorch's ProgressBar, shown only while the net's ``verbose`` is true.

    It is always among the default callbacks, so the callback list (and ``get_params``)
    does not depend on ``verbose``.
    """

    def on_epoch_begin(self, net, **kwargs):
        if net.verbose:
            super().on_epoch_begin(net, **kwargs)

    def on_batch_end(self, net, **kwargs):
        if net.verbose:
            super().on_batch_end(net, **kwargs)

    def on_epoch_end(self, net, **kwargs):
        if net.verbose:
            super().on_epoch_end(net, **kwargs)
