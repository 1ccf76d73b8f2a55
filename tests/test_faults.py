"""Faults during training: non-finite losses, killed processes and calls that fail."""

import os
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.base import clone
from skorch.callbacks import Callback, EarlyStopping

from sklearn_calib.estimators import (
    CheckpointWarning,
    MetaNetClassifier,
    NetClassifier,
    NonFiniteLossError,
    _state,
)
from sklearn_calib.estimators._checkpoint import FitCheckpoint
from sklearn_calib.estimators._inputs import training_data
from sklearn_calib.estimators.networks import MLP
from sklearn_calib.losses import CrossEntropy

REPO = Path(__file__).resolve().parents[1]


def small_net(**params):
    defaults = {
        "module__hidden_units": (32,),
        "lr": 0.01,
        "max_epochs": 4,
        "batch_size": 64,
        "random_state": 0,
    }
    return NetClassifier(**{**defaults, **params})


def weights(net):
    return {name: value.detach().clone() for name, value in net.module_.state_dict().items()}


def assert_same_weights(left, right):
    assert left.keys() == right.keys()
    for name in left:
        assert torch.equal(left[name], right[name]), name


class NaNFromCall(CrossEntropy):
    """Cross-entropy whose value is NaN from the ``nan_from``-th call on (1-based)."""

    def __init__(self, nan_from=10**9):
        super().__init__()
        self.nan_from = nan_from
        self.calls = 0

    def forward(self, logits, target):
        self.calls += 1
        loss = super().forward(logits, target)
        return loss * float("nan") if self.calls >= self.nan_from else loss


class NaNGradientAtCall(CrossEntropy):
    """Cross-entropy with a finite value but NaN gradients at the ``at``-th call."""

    def __init__(self, at=10**9):
        super().__init__()
        self.at = at
        self.calls = 0

    def forward(self, logits, target):
        self.calls += 1
        loss = super().forward(logits, target)
        if self.calls == self.at:
            loss = loss + 0.0 * torch.sqrt(0.0 * logits.sum())
        return loss


class StopAfter(Callback):
    """Raise ``KeyboardInterrupt`` in ``on_epoch_end`` after ``epochs`` epochs (a Ctrl-C)."""

    def __init__(self, epochs):
        self.epochs = epochs

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.epochs:
            raise KeyboardInterrupt


class FailAfter(Callback):
    """Raise an error in ``on_epoch_end`` after ``epochs`` epochs (a crash, not a stop)."""

    def __init__(self, epochs):
        self.epochs = epochs

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.epochs:
            raise RuntimeError("the callback failed")


def checkpoint_durations(directory):
    """Return the recorded epoch durations of the one checkpoint file in ``directory``."""
    (path,) = Path(directory).glob("*.ckpt")
    prefix, fingerprint = path.stem.split("-", 1)
    payload = FitCheckpoint(directory, fingerprint, prefix).load()
    return [row["dur"] for row in payload["meta"]["history"]]


# 1347 training samples in batches of 64: 22 batches per epoch.
BATCHES = 22


# ----------------------------------------------------------------- non-finite losses


def test_nonfinite_loss_raises_naming_epoch_and_batch_and_keeps_the_fitted_model(digits):
    X_train, X_test, y_train, _ = digits
    net = small_net().fit(X_train, y_train)
    proba, before, history = net.predict_proba(X_test), weights(net), list(net.history)
    net.set_params(criterion=NaNFromCall, criterion__nan_from=BATCHES + 9)
    with pytest.raises(NonFiniteLossError, match=r"nan in epoch 2, batch 9 of 22") as caught:
        net.fit(X_train, y_train)
    assert (caught.value.epoch, caught.value.batch) == (2, 9)
    assert isinstance(caught.value, FloatingPointError)
    assert_same_weights(weights(net), before)
    assert list(net.history) == history
    np.testing.assert_array_equal(net.predict_proba(X_test), proba)


def test_nonfinite_loss_in_partial_fit_restores_the_weights_in_place(digits):
    X_train, X_test, y_train, _ = digits
    net = small_net(criterion=NaNFromCall, max_epochs=2).fit(X_train, y_train)
    proba, before, n_epochs = net.predict_proba(X_test), weights(net), len(net.history)
    net.criterion_.nan_from = net.criterion_.calls + 5
    with pytest.raises(NonFiniteLossError, match="epoch 3, batch 5"):
        net.partial_fit(X_train, y_train)
    assert_same_weights(weights(net), before)
    assert len(net.history) == n_epochs
    np.testing.assert_array_equal(net.predict_proba(X_test), proba)
    assert np.isfinite(net.predict_proba(X_test)).all()


def test_a_continued_fit_copies_the_fitted_parts_to_the_host_once_it_changes_them(
    digits, monkeypatch
):
    # Every partial_fit copied the whole torch state on the device first, also one whose
    # input was rejected before anything changed
    X_train, X_test, y_train, _ = digits
    net = small_net(max_epochs=1).fit(X_train, y_train)
    taken, device_copies = [], []
    take, capture = _state.ComponentsCopy.take, _state.capture_components

    def spied_take(self):
        take(self)
        taken.append(self.snapshot)

    def spied_capture(net):
        device_copies.append(net)
        return capture(net)

    monkeypatch.setattr(_state.ComponentsCopy, "take", spied_take)
    monkeypatch.setattr(_state, "capture_components", spied_capture)
    with pytest.raises(ValueError, match="features"):
        net.partial_fit(X_train[:, :10], y_train)
    assert taken == []
    net.partial_fit(X_train, y_train)
    assert len(taken) == 1 and device_copies == []
    leaves = [*taken[0]["module_"].values(), *taken[0]["optimizer_"]["state"][0].values()]
    assert all(leaf.device.type == "cpu" for leaf in leaves if isinstance(leaf, torch.Tensor))
    net.fit(X_train, y_train)  # a fresh fit builds new parts: nothing to copy
    assert len(taken) == 1
    assert np.isfinite(net.predict_proba(X_test)).all()


def test_nonfinite_loss_on_a_fresh_estimator_leaves_it_unfitted(digits):
    X_train, _, y_train, _ = digits
    net = small_net(criterion=NaNFromCall, criterion__nan_from=3)
    with pytest.raises(NonFiniteLossError, match="epoch 1, batch 3"):
        net.fit(X_train, y_train)
    assert not net.__sklearn_is_fitted__()
    assert not hasattr(net, "module_")


def test_a_network_given_as_an_instance_is_restored_too(digits):
    X_train, X_test, y_train, _ = digits
    module = MLP(input_shape=(64,), n_classes=10, hidden_units=(16,))
    initial = {name: value.clone() for name, value in module.state_dict().items()}
    net = NetClassifier(module=module, lr=0.01, max_epochs=2, random_state=0)
    net.fit(X_train, y_train)
    fitted, proba, before = net.module_, net.predict_proba(X_test), weights(net)
    net.set_params(criterion=NaNFromCall, criterion__nan_from=5)
    with pytest.raises(NonFiniteLossError, match="epoch 1, batch 5"):
        net.fit(X_train, y_train)  # trains a new copy of the instance
    assert net.module_ is fitted
    assert_same_weights(weights(net), before)
    np.testing.assert_array_equal(net.predict_proba(X_test), proba)
    for name, value in module.state_dict().items():  # neither fit trained the instance
        assert torch.equal(value, initial[name]), name


def test_nonfinite_weights_behind_a_finite_loss_are_detected(digits):
    X_train, _, y_train, _ = digits
    net = small_net(criterion=NaNGradientAtCall, criterion__at=BATCHES)
    with pytest.raises(NonFiniteLossError, match="weights became non-finite in epoch 1") as caught:
        net.fit(X_train, y_train)
    assert (caught.value.epoch, caught.value.batch) == (1, BATCHES)


def test_restore_keeps_the_last_finite_epoch_and_warns(digits):
    X_train, X_test, y_train, _ = digits
    reference = small_net(criterion=NaNFromCall, max_epochs=2).fit(X_train, y_train)
    net = small_net(
        criterion=NaNFromCall, criterion__nan_from=2 * BATCHES + 4, on_nonfinite="restore"
    )
    with pytest.warns(RuntimeWarning, match=r"epoch 3, batch 4 of 22.*before epoch 3"):
        net.fit(X_train, y_train)
    assert len(net.history) == 2
    assert_same_weights(weights(net), weights(reference))
    assert net.history[:, "train_loss"] == reference.history[:, "train_loss"]
    np.testing.assert_array_equal(net.predict_proba(X_test), reference.predict_proba(X_test))
    reference_state = reference.optimizer_.state_dict()["state"]
    for index, state in net.optimizer_.state_dict()["state"].items():
        for key, value in state.items():
            assert torch.equal(value, reference_state[index][key]), key


# ----------------------------------------------------------------- checkpoints

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    import torch
    from skorch.callbacks import Callback, EarlyStopping
    from sklearn_calib.estimators import NetClassifier

    class KillAfterEpoch(Callback):
        def __init__(self, epoch):
            self.epoch = epoch

        def on_epoch_end(self, net, **kwargs):
            if len(net.history) == self.epoch:
                os.kill(os.getpid(), signal.SIGKILL)

    data, checkpoint_dir, kill_after, out = sys.argv[1:]
    arrays = np.load(data)
    callbacks = [KillAfterEpoch(int(kill_after))] if int(kill_after) else None
    net = NetClassifier(**PARAMS, checkpoint_dir=checkpoint_dir, callbacks=callbacks)
    net.fit(arrays["X"], arrays["y"])
    torch.save(
        {
            "weights": net.module_.state_dict(),
            "losses": [float(v) for v in net.history[:, "train_loss"]],
            "durations": net.history[:, "dur"],
        },
        out,
    )
    """
)

#: Validation split, momentum SGD with a multistep schedule and mixup: every random
#: generator and the optimiser state must be resumed for identical weights.
RESUME_PARAMS = {
    "module__hidden_units": (32,),
    "max_epochs": 5,
    "batch_size": 64,
    "random_state": 3,
    "recipe": "wang2021",
    "lr": 0.05,
    "mixup_alpha": 0.2,
    "train_split": 0.2,
}


def run_child(tmp_path, checkpoint_dir, kill_after):
    script = tmp_path / "child.py"
    script.write_text(f"PARAMS = {RESUME_PARAMS!r}\n" + CHILD)
    out = tmp_path / f"result_{checkpoint_dir.name}_{kill_after}.pt"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "CUDA_VISIBLE_DEVICES": "",
    }
    args = [sys.executable, str(script), str(tmp_path / "data.npz"), str(checkpoint_dir)]
    process = subprocess.run(
        [*args, str(kill_after), str(out)], env=env, capture_output=True, timeout=300
    )
    return process, out


@pytest.mark.slow
def test_killed_fit_resumes_from_its_checkpoint_to_identical_weights(digits, tmp_path):
    """Kill a fit in epoch 3 of 5, resume it in a new process, compare with a third process.

    All three fits run in fresh processes with the same environment, so that CPU kernels
    sum in the same order (the thread count of a process changes the last bits).
    """
    X_train, _, y_train, _ = digits
    np.savez(tmp_path / "data.npz", X=X_train, y=y_train)
    checkpoint_dir = tmp_path / "checkpoints"

    killed, _ = run_child(tmp_path, checkpoint_dir, kill_after=3)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    (path,) = checkpoint_dir.glob("*.ckpt")
    assert list(checkpoint_dir.glob("*.tmp")) == []
    fingerprint = path.stem.split("-", 1)[1]
    payload = FitCheckpoint(checkpoint_dir, fingerprint, "NetClassifier").load()
    assert payload["meta"]["epochs"] == 2  # killed in epoch 3's on_epoch_end, before its save

    resumed, out = run_child(tmp_path, checkpoint_dir, kill_after=0)
    assert resumed.returncode == 0, resumed.stderr.decode()[-2000:]
    result = torch.load(out, weights_only=True)
    # Epochs 1-2 come from the killed process (their recorded durations), 3-5 are new.
    checkpointed = [row["dur"] for row in payload["meta"]["history"]]
    assert result["durations"][:2] == checkpointed
    assert len(result["durations"]) == 5

    uninterrupted, out = run_child(tmp_path, tmp_path / "fresh", kill_after=0)
    assert uninterrupted.returncode == 0, uninterrupted.stderr.decode()[-2000:]
    reference = torch.load(out, weights_only=True)
    assert reference["durations"][:2] != checkpointed
    assert_same_weights(result["weights"], reference["weights"])
    assert result["losses"] == reference["losses"]
    # and the same fit in this process gives the same model, up to the thread count
    net = NetClassifier(**RESUME_PARAMS).fit(X_train, y_train)
    for name, value in net.module_.state_dict().items():
        torch.testing.assert_close(value, result["weights"][name], rtol=1e-4, atol=1e-6)


def test_fit_again_with_the_same_checkpoint_dir_resumes(digits, tmp_path):
    X_train, X_test, y_train, _ = digits
    uninterrupted = small_net(max_epochs=4, mixup_alpha=0.2).fit(X_train, y_train)
    first = small_net(max_epochs=2, mixup_alpha=0.2, checkpoint_dir=tmp_path)
    first.fit(X_train, y_train)
    # A checkpoint written after epoch 2 of a 4-epoch fit: make one by hand from the
    # 2-epoch fit's state, under the name of the 4-epoch fit.
    second = small_net(max_epochs=4, mixup_alpha=0.2, checkpoint_dir=tmp_path)
    training_data(second, X_train, y_train, None, None, reset=True)
    checkpoint = FitCheckpoint.for_fit(second, X_train, y_train)
    checkpoint.save(first)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        second.fit(X_train, y_train)
    assert second.checkpoint_path_ == checkpoint.path
    assert second.history[:2, "dur"] == first.history[:, "dur"]  # resumed, not retrained
    assert len(second.history) == 4
    assert_same_weights(weights(second), weights(uninterrupted))
    assert second.history[:, "train_loss"] == uninterrupted.history[:, "train_loss"]
    np.testing.assert_array_equal(second.predict_proba(X_test), uninterrupted.predict_proba(X_test))
    # The finished fit's checkpoint is kept: fitting again trains nothing.
    again = small_net(max_epochs=4, mixup_alpha=0.2, checkpoint_dir=tmp_path).fit(X_train, y_train)
    assert_same_weights(weights(again), weights(uninterrupted))
    assert again.history[:, "dur"] == second.history[:, "dur"]


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign", "empty"])
@pytest.mark.slow
def test_damaged_checkpoint_is_detected_and_training_starts_anew(digits, tmp_path, damage):
    X_train, _, y_train, _ = digits
    net = small_net(max_epochs=2, checkpoint_dir=tmp_path).fit(X_train, y_train)
    path = Path(net.checkpoint_path_)
    raw = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "flip":
        path.write_bytes(raw[:-10] + bytes([raw[-10] ^ 1]) + raw[-9:])
    elif damage == "foreign":
        path.write_bytes(b"PK\x03\x04 not a checkpoint")
    else:
        path.write_bytes(b"")
    with pytest.warns(CheckpointWarning, match="Ignoring the checkpoint"):
        refit = small_net(max_epochs=2, checkpoint_dir=tmp_path).fit(X_train, y_train)
    assert_same_weights(weights(refit), weights(net))
    assert refit.history[:, "dur"] != net.history[:, "dur"]  # trained again
    fingerprint = path.stem.split("-", 1)[1]
    rewritten = FitCheckpoint(tmp_path, fingerprint, "NetClassifier").load()
    assert rewritten["meta"]["epochs"] == 2


def test_checkpoint_names_differ_with_parameters_and_data(digits, tmp_path):
    X_train, _, y_train, _ = digits
    a = small_net(max_epochs=1, checkpoint_dir=tmp_path).fit(X_train, y_train)
    b = small_net(max_epochs=1, lr=0.02, checkpoint_dir=tmp_path).fit(X_train, y_train)
    c = small_net(max_epochs=1, checkpoint_dir=tmp_path).fit(X_train[:-1], y_train[:-1])
    d = small_net(max_epochs=1, checkpoint_dir=tmp_path, verbose=0, device="cpu")
    d.fit(X_train, y_train)
    assert len({a.checkpoint_path_, b.checkpoint_path_, c.checkpoint_path_}) == 3
    assert d.checkpoint_path_ == a.checkpoint_path_
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        Path(p).name for p in (a.checkpoint_path_, b.checkpoint_path_, c.checkpoint_path_)
    )


def test_partial_fit_does_not_checkpoint(digits, tmp_path):
    X_train, _, y_train, _ = digits
    net = small_net(max_epochs=1, checkpoint_dir=tmp_path).fit(X_train, y_train)
    stamp = Path(net.checkpoint_path_).stat().st_mtime_ns
    net.partial_fit(X_train, y_train)
    assert net.checkpoint_path_ is None
    assert [p.stat().st_mtime_ns for p in tmp_path.iterdir()] == [stamp]


# ----------------------------------------------------------------- failed calls change nothing


def test_failed_calls_leave_a_fitted_net_as_it_was(digits):
    X_train, X_test, y_train, _ = digits
    net = small_net(max_epochs=2).fit(X_train, y_train)
    proba, before = net.predict_proba(X_test), weights(net)
    attributes = {k: v for k, v in net.__dict__.items() if k.endswith("_") and k != "history_"}
    history = list(net.history)
    bad = X_train.copy()
    bad[3, 5] = np.nan
    calls = [
        (net.fit, (bad, y_train), "NaN"),
        (net.fit, (X_train, y_train[:-1]), "inconsistent numbers of samples"),
        (net.fit, (X_train, np.zeros(len(y_train))), "2 classes"),
        (net.fit, (X_train[:0], y_train[:0]), "0 sample"),
        (net.partial_fit, (X_train[:, :10], y_train), "features"),
        (net.partial_fit, (X_train, y_train + 100), "not seen"),
        (net.partial_fit, (bad, y_train), "NaN"),
        (net.predict, (bad,), "NaN"),
        (net.predict_proba, (X_test[:, :3],), "features"),
        (net.decision_function, (X_test.astype(str).astype(object) + "x",), None),
    ]
    for method, args, match in calls:
        with pytest.raises(ValueError, match=match):
            method(*args)
        assert_same_weights(weights(net), before)
        for key, value in attributes.items():
            current = net.__dict__[key]
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(current, value)
            else:
                assert current is value, key
        assert list(net.history) == history
        np.testing.assert_array_equal(net.predict_proba(X_test), proba)


# ----------------------------------------------------------------- the same on CUDA


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("on_nonfinite", ["raise", "restore"])
def test_nonfinite_loss_with_cuda_graphs(digits, on_nonfinite):
    X_train, X_test, y_train, _ = digits
    net = small_net(device="cuda", optimizer="sgd", max_epochs=2, on_nonfinite=on_nonfinite)
    net.fit(X_train, y_train)
    assert net.history[-1, "cuda_graph"]
    proba, before = net.predict_proba(X_test), weights(net)
    group = net.optimizer_.param_groups[0]
    assert isinstance(group["lr"], torch.Tensor)
    group["lr"].fill_(1e12)  # diverges within the next epoch
    if on_nonfinite == "raise":
        with pytest.raises(NonFiniteLossError, match="epoch 3"):
            net.partial_fit(X_train, y_train)
    else:
        with pytest.warns(RuntimeWarning, match="epoch 3"):
            net.partial_fit(X_train, y_train)
    assert len(net.history) == 2
    assert_same_weights(weights(net), before)
    np.testing.assert_array_equal(net.predict_proba(X_test), proba)
    net.optimizer_.param_groups[0]["lr"].fill_(0.01)
    net.partial_fit(X_train, y_train)  # a new CUDA graph over the restored state
    # partial_fit trains max_epochs (2) more epochs.
    assert len(net.history) == 4 and np.isfinite(net.history[-1, "train_loss"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_checkpoint_resume_on_cuda(digits, tmp_path):
    X_train, X_test, y_train, _ = digits
    params = {"device": "cuda", "recipe": "onecycle", "lr": 0.05, "mixup_alpha": 0.2}
    uninterrupted = small_net(max_epochs=4, **params).fit(X_train, y_train)
    first = small_net(max_epochs=4, checkpoint_dir=tmp_path, **params)
    # Interrupt after 2 of 4 epochs (the one-cycle schedule depends on max_epochs).
    with pytest.raises(RuntimeError, match="the callback failed"):
        first.set_params(callbacks=[FailAfter(2)]).fit(X_train, y_train)
    saved = checkpoint_durations(tmp_path)
    assert len(saved) == 2
    resumed = small_net(max_epochs=4, checkpoint_dir=tmp_path, **params).fit(X_train, y_train)
    assert resumed.history[:2, "dur"] == saved
    assert len(resumed.history) == 4 and resumed.history[-1, "cuda_graph"]
    for name, value in weights(resumed).items():
        torch.testing.assert_close(value, weights(uninterrupted)[name], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        resumed.predict_proba(X_test), uninterrupted.predict_proba(X_test), atol=1e-4
    )


@pytest.mark.slow
def test_an_epoch_ended_by_a_callback_is_checkpointed(digits, tmp_path):
    X_train, _, y_train, _ = digits
    # EarlyStopping (its first epoch improves on nothing, its second misses) finishes the
    # fit: a re-run of the same fit trains nothing.
    early = EarlyStopping(monitor="train_loss", patience=1, threshold=10.0)
    stopped = small_net(max_epochs=4, checkpoint_dir=tmp_path, callbacks=[early])
    stopped.fit(X_train, y_train)
    assert len(stopped.history) == 2
    assert checkpoint_durations(tmp_path) == stopped.history[:, "dur"]
    again = small_net(max_epochs=4, checkpoint_dir=tmp_path, callbacks=[clone(early)])
    with pytest.warns(UserWarning, match=r"\.ckpt holds a fit that EarlyStopping stopped"):
        again.fit(X_train, y_train)
    assert again.history[:, "dur"] == stopped.history[:, "dur"]
    assert_same_weights(weights(again), weights(stopped))
    # A fit without EarlyStopping trains the remaining epochs.
    uninterrupted = weights(small_net(max_epochs=4).fit(X_train, y_train))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        longer = small_net(max_epochs=4, checkpoint_dir=tmp_path).fit(X_train, y_train)
    assert longer.history[:2, "dur"] == stopped.history[:, "dur"] and len(longer.history) == 4
    assert_same_weights(weights(longer), uninterrupted)
    # Any other KeyboardInterrupt there (a Ctrl-C landing during the callbacks) ends
    # this fit too, but a re-run resumes it.
    interrupted_dir = tmp_path / "interrupted"
    interrupted = small_net(max_epochs=4, checkpoint_dir=interrupted_dir, callbacks=[StopAfter(2)])
    assert len(interrupted.fit(X_train, y_train).history) == 2
    saved = checkpoint_durations(interrupted_dir)
    resumed = small_net(max_epochs=4, checkpoint_dir=interrupted_dir).fit(X_train, y_train)
    assert resumed.history[:2, "dur"] == saved and len(resumed.history) == 4
    assert_same_weights(weights(resumed), uninterrupted)
    # A callback that fails interrupts the fit: its epoch is saved and a re-run resumes.
    failed_dir = tmp_path / "failed"
    failing = small_net(max_epochs=4, checkpoint_dir=failed_dir, callbacks=[FailAfter(2)])
    with pytest.raises(RuntimeError, match="the callback failed"):
        failing.fit(X_train, y_train)
    saved = checkpoint_durations(failed_dir)
    assert len(saved) == 2
    resumed = small_net(max_epochs=4, checkpoint_dir=failed_dir).fit(X_train, y_train)
    assert resumed.history[:2, "dur"] == saved
    assert len(resumed.history) == 4
    assert_same_weights(weights(resumed), uninterrupted)


def test_unseeded_fits_do_not_reuse_a_finished_checkpoint(digits, tmp_path):
    X_train, X_test, y_train, _ = digits
    first, second = (
        small_net(max_epochs=1, random_state=None, checkpoint_dir=tmp_path).fit(X_train, y_train)
        for _ in range(2)
    )
    assert first.checkpoint_path_ == second.checkpoint_path_
    assert second.history[:, "dur"] != first.history[:, "dur"]  # trained, not loaded
    assert not np.array_equal(first.predict_proba(X_test), second.predict_proba(X_test))
    assert checkpoint_durations(tmp_path) == second.history[:, "dur"]
    # an interrupted unseeded fit is resumed
    failed_dir = tmp_path / "failed"
    failing = small_net(
        max_epochs=3, random_state=None, checkpoint_dir=failed_dir, callbacks=[FailAfter(2)]
    )
    with pytest.raises(RuntimeError, match="the callback failed"):
        failing.fit(X_train, y_train)
    saved = checkpoint_durations(failed_dir)
    resumed = small_net(max_epochs=3, random_state=None, checkpoint_dir=failed_dir)
    resumed.fit(X_train, y_train)
    assert resumed.history[:2, "dur"] == saved
    assert len(resumed.history) == 3


# ----------------------------------------------------------------- MetaNetClassifier


def test_meta_net_nonfinite_loss_restores_network_and_regularizer(digits):
    X_train, X_test, y_train, _ = digits
    net = MetaNetClassifier(module__hidden_units=(16,), max_epochs=2, random_state=0)
    net.fit(X_train, y_train)
    proba, gamma = net.predict_proba(X_test), net.sample_gamma(X_test)
    before = {
        name: {k: v.clone() for k, v in getattr(net, name).state_dict().items()}
        for name in ("module_", "meta_regularizer_")
    }
    net.optimizer_.param_groups[0]["lr"] = 1e12
    with pytest.raises(NonFiniteLossError, match="epoch 3"):
        net.partial_fit(X_train, y_train)
    for name, state in before.items():
        assert_same_weights(getattr(net, name).state_dict(), state)
    assert net.optimizer_.param_groups[0]["lr"] == 1e12  # set before the call, kept
    np.testing.assert_array_equal(net.predict_proba(X_test), proba)
    np.testing.assert_array_equal(net.sample_gamma(X_test), gamma)


def test_meta_net_checkpoint_resumes_to_identical_weights(digits, tmp_path):
    X_train, _, y_train, _ = digits
    params = {"module__hidden_units": (16,), "max_epochs": 3, "random_state": 0}
    uninterrupted = MetaNetClassifier(**params).fit(X_train, y_train)
    failing = MetaNetClassifier(**params, checkpoint_dir=tmp_path, callbacks=[FailAfter(2)])
    with pytest.raises(RuntimeError, match="the callback failed"):
        failing.fit(X_train, y_train)
    saved = checkpoint_durations(tmp_path)
    resumed = MetaNetClassifier(**params, checkpoint_dir=tmp_path).fit(X_train, y_train)
    assert resumed.history[:2, "dur"] == saved
    assert len(resumed.history) == 3
    for name in ("module_", "meta_regularizer_"):
        assert_same_weights(
            getattr(resumed, name).state_dict(), getattr(uninterrupted, name).state_dict()
        )
