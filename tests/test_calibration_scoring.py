"""CalibrationScoring: per-epoch validation calibration in the history, equal to the metric
functions of the net's predictions, from the validation pass the net makes anyway."""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from skorch.callbacks import Callback
from skorch.dataset import Dataset
from skorch.helper import predefined_split

from sklearn_calib.estimators import CalibrationScoring, NetClassifier
from sklearn_calib.estimators._run import needs_live_batches
from sklearn_calib.estimators.networks import MLP
from sklearn_calib.metrics import (
    expected_calibration_error,
    negative_log_likelihood,
    smooth_ece,
)


@pytest.fixture(scope="module")
def digits_split():
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return X[:900], y[:900], X[900:1300], y[900:1300]


def fitted(X, y, X_valid, y_valid, epochs, **callback):
    net = NetClassifier(
        module__hidden_units=(32,),
        max_epochs=epochs,
        batch_size=64,
        random_state=0,
        train_split=predefined_split(Dataset(X_valid, y_valid)),
        callbacks=[CalibrationScoring(**callback)],
    )
    return net.fit(X, y)


@pytest.mark.slow
def test_each_epoch_records_the_metrics_of_that_epochs_predictions(digits_split):
    X, y, X_valid, y_valid = digits_split
    metrics = ("ece", "smooth_ece", "nll")
    two = fitted(X, y, X_valid, y_valid, 2, metrics=metrics)
    one = fitted(X, y, X_valid, y_valid, 1, metrics=metrics)
    for net, epoch in ((one, 0), (two, 1), (two, 0)):
        source = one if epoch == 0 else two
        proba = source.predict_proba(X_valid)
        row = net.history[epoch]
        expected = {
            "valid_ece": expected_calibration_error(y_valid, proba),
            "valid_smooth_ece": smooth_ece(y_valid, proba),
            "valid_nll": negative_log_likelihood(y_valid, proba),
        }
        for key, value in expected.items():
            assert abs(row[key] - value) <= 1e-12 * value, key
    assert two.history[0, "valid_ece_best"] is True
    best = two.history[1, "valid_ece"] < two.history[0, "valid_ece"]
    assert two.history[1, "valid_ece_best"] is best


class _CountingMLP(MLP):
    """The zoo's MLP, counting its forward passes in evaluation mode."""

    eval_passes = 0

    def forward(self, x):
        if not self.training:
            type(self).eval_passes += 1
        return super().forward(x)


class _CountFromTrainBegin(Callback):
    """Counts the evaluation passes of the training run only (not the network's check)."""

    def on_train_begin(self, net, **kwargs):
        _CountingMLP.eval_passes = 0


class _EveryBatch(Callback):
    """A callback with per-batch work: the run then goes per batch."""

    def on_batch_end(self, net, **kwargs):
        pass


@pytest.mark.parametrize("live", [False, True], ids=["on_device", "per_batch"])
def test_it_reads_the_validation_pass_the_net_makes_instead_of_a_second_one(digits_split, live):
    # It ran the validation data through the network again at the end of every epoch:
    # twice the evaluation passes
    X, y, X_valid, y_valid = digits_split
    callbacks = [CalibrationScoring(metrics=("ece", "nll")), _CountFromTrainBegin()]
    callbacks += [_EveryBatch()] if live else []
    net = NetClassifier(
        _CountingMLP,
        module__hidden_units=(16,),
        max_epochs=3,
        batch_size=64,
        iterator_valid__batch_size=100,
        random_state=0,
        train_split=predefined_split(Dataset(X_valid, y_valid)),
        callbacks=callbacks,
    )
    net.fit(X, y)
    assert _CountingMLP.eval_passes == 3 * 4  # 4 validation batches of 100 per epoch
    proba = net.predict_proba(X_valid)
    assert net.history[-1, "valid_ece"] == pytest.approx(
        expected_calibration_error(y_valid, proba), rel=1e-12
    )
    assert net.history[-1, "valid_nll"] == pytest.approx(
        negative_log_likelihood(y_valid, proba), rel=1e-12
    )


def test_it_keeps_the_training_pass_on_the_device_and_needs_a_validation_split(digits_split):
    assert not needs_live_batches([("calibration", CalibrationScoring())])
    for hook in ("on_batch_begin", "on_grad_computed"):
        assert getattr(CalibrationScoring, hook) is getattr(Callback, hook)
    X, y, _, _ = digits_split
    net = NetClassifier(max_epochs=1, random_state=0, callbacks=[CalibrationScoring()])
    with pytest.raises(ValueError, match="train_split"):
        net.fit(X, y)
    bad = NetClassifier(
        max_epochs=1, train_split=0.2, random_state=0, callbacks=[CalibrationScoring(["nope"])]
    )
    with pytest.raises(ValueError, match="metrics"):
        bad.fit(X, y)
