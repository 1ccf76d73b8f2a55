"""CalibrationScoring: a skorch callback that records validation calibration per epoch."""

import torch
from skorch.dataset import unpack_data

from ..metrics import CalibrationAccumulator
from ..metrics._core._registry import declared
from ._callbacks import ValidationBatchCallback
from ._targets import class_indices, sample_weights


def _recorded_metrics():
    """The metrics recorded every epoch: those whose declaration says so
    (``metrics._core._registry``)."""
    return tuple(
        metric.name
        for metric in declared()
        if metric.streaming is not None and metric.streaming.per_epoch
    )


class CalibrationScoring(ValidationBatchCallback):
    """Record calibration errors of the validation split in the history, every epoch.

    The outputs of the validation pass that the net makes each epoch (evaluation mode,
    no gradient) go, batch by batch, into a
    :class:`~sklearn_calib.metrics.CalibrationAccumulator` on the net's device (nothing
    is copied to the host per batch, and the validation data does not go through the
    network a second time); at the end of the epoch the chosen metrics are recorded as
    ``{prefix}_{metric}`` (``valid_ece``, ``valid_smooth_ece``, ...) with
    ``{prefix}_{metric}_best`` (lowest so far), so ``EarlyStopping(monitor="valid_ece")``
    and ``Checkpoint(monitor="valid_ece_best")`` work. The values equal the metric
    functions (:func:`~sklearn_calib.metrics.expected_calibration_error`,
    :func:`~sklearn_calib.metrics.smooth_ece`, ...) of the net's ``predict_proba`` on the
    validation data. It reads the validation batches through skorch's ``on_batch_end``,
    which a NetClassifier's training run calls on the device for the validation pass
    only, so training keeps its fast path.

    Parameters
    ----------
    metrics : tuple of str, default=("ece", "smooth_ece")
        From ``"ece"``, ``"mce"``, ``"adaptive_ece"`` (within its stated bound of
        :func:`~sklearn_calib.metrics.adaptive_calibration_error`),
        ``"classwise_ece"``, ``"smooth_ece"``, ``"nll"``, ``"brier"``.
    n_bins : int, default=15
        Bins of the binned errors.
    input : {"logits", "probabilities"}, default="logits"
        What the network outputs: logits are turned into probabilities by a softmax, as
        ``predict_proba`` does with skorch's default ``predict_nonlinearity``.
    prefix : str, default="valid"
        Start of the history keys.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from sklearn_calib.estimators import CalibrationScoring, NetClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> net = NetClassifier(max_epochs=2, train_split=0.2, random_state=0,
    ...                     callbacks=[CalibrationScoring()])
    >>> net = net.fit((X / 16).astype(np.float32), y)
    >>> sorted(key for key in net.history[-1] if key.startswith("valid_") and "ece" in key)
    ['valid_ece', 'valid_ece_best', 'valid_smooth_ece', 'valid_smooth_ece_best']
    """

    def __init__(self, metrics=("ece", "smooth_ece"), n_bins=15, input="logits", prefix="valid"):
        self.metrics = metrics
        self.n_bins = n_bins
        self.input = input
        self.prefix = prefix

    def initialize(self):
        recorded = _recorded_metrics()
        unknown = [name for name in self.metrics if name not in recorded]
        if unknown or not self.metrics:
            raise ValueError(
                f"Expected `metrics` to name metrics from {list(recorded)}, got "
                f"{list(self.metrics)}."
            )
        # checks n_bins and input
        CalibrationAccumulator(n_bins=self.n_bins, input=self.input, metrics=self.metrics)
        self.best_ = {}
        self.accumulator_ = None
        return self

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        if net.train_split is None:
            raise ValueError(
                "CalibrationScoring scores the validation split, but `train_split` is None; "
                "give the net a validation split (for example train_split=0.2)."
            )

    def on_epoch_begin(self, net, **kwargs):
        self.accumulator_ = None

    def on_batch_end(self, net, batch=None, training=False, y_pred=None, **kwargs):
        """Add a validation batch's outputs to the epoch's sums (training batches are skipped).

        Parameters
        ----------
        net : NetClassifier
            The net (skorch's callback signature).
        batch : tuple, default=None
            The batch's inputs and targets.
        training : bool, default=False
            Whether the batch is a training batch.
        y_pred : torch.Tensor, default=None
            The net's outputs on the batch.
        **kwargs
            Unused; skorch's signature.
        """
        if training:
            return
        if self.accumulator_ is None:
            self.accumulator_ = CalibrationAccumulator(
                n_bins=self.n_bins, input=self.input, metrics=self.metrics
            )
        _, target = unpack_data(batch)
        labels = torch.as_tensor(class_indices(target), device=y_pred.device)
        self.accumulator_.update(labels, y_pred, sample_weights(target))

    def on_epoch_end(self, net, dataset_valid=None, **kwargs):
        accumulator, self.accumulator_ = self.accumulator_, None
        if dataset_valid is None or accumulator is None:
            return
        result = accumulator.compute()
        for name in self.metrics:
            key = f"{self.prefix}_{name}"
            value = float(result[name])
            best = value < self.best_.get(key, float("inf"))
            if best:
                self.best_[key] = value
            net.history.record(key, value)
            net.history.record(f"{key}_best", bool(best))
