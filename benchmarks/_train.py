"""Train one run from its specification and return what the store keeps.

A run's specification (:func:`make_spec`) is a plain dict holding everything that
defines the trained model: data split, network, estimator, loss, recipe, epochs, batch
size, reduction, clipping, seed and per-epoch tracking. Its hash is the run's key in the
store, so two experiments that need the same model share one run. :func:`train_run`
rebuilds the model from the dict alone, so it also runs in a worker process.
"""

import datetime
import gc
import platform
import time

import numpy as np
import torch
from skorch.callbacks import Callback

import sklearn_calib.estimators as estimators

from ._data import DataSpec, load_split
from ._presets import GRID_MUKHOTI2020, GRID_WANG2021
from ._tracking import EpochTracker, forward_logits

#: Temperature grids by the name used in specifications.
GRIDS = {"wang2021": GRID_WANG2021, "mukhoti2020": GRID_MUKHOTI2020}

#: Inference batch size of the final evaluation and the tracker.
EVAL_BATCH = 2048


def build_spec(
    data,
    network,
    network_params,
    loss,
    loss_params,
    training,
    seed,
    *,
    track=None,
    estimator="net",
    estimator_params=None,
):
    """Assemble a run specification (see the module docstring).

    Parameters
    ----------
    data : DataSpec
    network : str
    network_params : dict
    loss : str
    loss_params : dict
    training : dict
        ``recipe``, ``optimizer``, ``lr``, ``epochs``, ``batch_size``, ``reduction``,
        ``grad_clip``, ``mixup_alpha``, ``augment``.
    seed : int
    track : dict or None, default=None
        ``{"n_train": n, "grid": "wang2021"}`` for per-epoch evaluation.
    estimator : {"net", "meta"}, default="net"
    estimator_params : dict or None, default=None

    Returns
    -------
    spec : dict
    """
    return {
        "data": data.as_dict(),
        "network": {"name": network, "params": dict(network_params)},
        "estimator": {"name": estimator, "params": dict(estimator_params or {})},
        "loss": {"name": loss, "params": dict(loss_params)},
        "training": dict(training),
        "seed": int(seed),
        "track": track,
    }


def make_spec(config, method, seed):
    """The specification of ``method`` trained with ``seed`` under ``config``."""
    family = config.families[method.family]
    training = {
        "recipe": family.recipe,
        "optimizer": None,
        "lr": family.lr,
        "epochs": config.epochs,
        "batch_size": family.batch_size,
        "reduction": method.reduction or family.reduction,
        "grad_clip": family.grad_clip,
        "mixup_alpha": method.mixup_alpha,
        "augment": None,
    }
    track = {"n_train": config.track_train, "grid": "wang2021"} if family.track else None
    return build_spec(
        config.data,
        config.network,
        config.network_params,
        method.loss,
        method.loss_params,
        training,
        seed,
        track=track,
        estimator=method.estimator,
        estimator_params=dict(method.estimator_params),
    )


class EpochProgress(Callback):
    """Calls ``report(epoch, n_epochs, seconds)`` at the end of every epoch."""

    def __init__(self, report):
        self.report = report

    def on_epoch_end(self, net, **kwargs):
        self.report(len(net.history), net.max_epochs, float(net.history[-1, "dur"]))


def build_estimator(spec, device, callbacks):
    """The unfitted estimator of a specification."""
    training = spec["training"]
    kwargs = {
        "criterion": spec["loss"]["name"],
        "max_epochs": training["epochs"],
        "batch_size": training["batch_size"],
        "recipe": training["recipe"],
        "optimizer": training["optimizer"],
        "lr": training["lr"],
        "loss_reduction": training["reduction"],
        "grad_clip": training["grad_clip"],
        "mixup_alpha": training["mixup_alpha"],
        "augment": training["augment"],
        "device": device,
        "random_state": spec["seed"],
        "iterator_valid__batch_size": EVAL_BATCH,
        "callbacks": callbacks,
    }
    for name, value in spec["network"]["params"].items():
        kwargs[f"module__{name}"] = tuple(value) if isinstance(value, list) else value
    for name, value in spec["loss"]["params"].items():
        kwargs[f"criterion__{name}"] = value
    if spec["estimator"]["name"] == "meta":
        cls = estimators.MetaNetClassifier
        kwargs.update(spec["estimator"]["params"])
        kwargs["criterion"] = None
    else:
        cls = estimators.NetClassifier
    return cls(spec["network"]["name"], **kwargs)


def make_tracker(spec, data):
    """The :class:`EpochTracker` of a tracked run's ``spec`` on its ``data``, else None."""
    if spec["track"] is None:
        return None
    n_track = min(spec["track"]["n_train"], len(data.y_train))
    return EpochTracker(
        data.X_test,
        data.y_test,
        data.X_train[:n_track],
        data.y_train[:n_track],
        GRIDS[spec["track"]["grid"]],
        batch_size=EVAL_BATCH,
    )


def train_run(spec, *, device="auto", data_home=None, report=None):
    """Train the run of ``spec`` and return its arrays, history and metadata.

    Parameters
    ----------
    spec : dict
    device : str, default="auto"
    data_home : str or None, default=None
    report : callable or None, default=None
        ``report(epoch, n_epochs, seconds)`` after every epoch.

    Returns
    -------
    arrays : dict of str to ndarray
        ``val_logits``, ``val_y``, ``test_logits``, ``test_y`` (float32 logits computed in
        float32 after training), for γ-Net runs ``test_gamma`` (the final per-sample focal γ
        of the test images) and, for tracked runs, the tracker's arrays.
    history : dict of str to list
        Per epoch: ``train_loss``, ``lr``, ``dur`` and the tracked metrics.
    meta : dict
        Device, versions, the fit's wall and CPU seconds, the wall seconds of the run.
    """
    start = time.perf_counter()
    data = load_split(DataSpec(**spec["data"]), data_home)
    callbacks = []
    if report is not None:
        callbacks.append(("progress", EpochProgress(report)))
    tracker = make_tracker(spec, data)
    if tracker is not None:
        callbacks.append(("tracker", tracker))
    net = build_estimator(spec, device, callbacks)
    fit_start, fit_cpu_start = time.perf_counter(), time.process_time()
    net.fit(data.X_train, data.y_train)
    fit_seconds = time.perf_counter() - fit_start
    fit_cpu_seconds = time.process_time() - fit_cpu_start
    device_ = net.device_
    arrays = {}
    for split in ("val", "test"):
        X = torch.as_tensor(data[f"X_{split}"], device=device_)
        arrays[f"{split}_logits"] = forward_logits(net.module_, X, EVAL_BATCH).cpu().numpy()
        arrays[f"{split}_y"] = np.asarray(data[f"y_{split}"], dtype=np.int16)
    if "gamma_mean" in net.history[-1]:
        arrays["test_gamma"] = net.sample_gamma(data.X_test)
    history = {
        name: [float(v) for v in net.history[:, name]] for name in ("train_loss", "lr", "dur")
    }
    for name in ("meta_loss", "gamma_mean", "gamma_std", "l2_mean", "l2_std"):
        if name in net.history[-1]:
            history[name] = [float(v) for v in net.history[:, name]]
    if tracker is not None:
        tracked_history, tracked_arrays = tracker.results()
        history.update(tracked_history)
        arrays.update(tracked_arrays)
    epochs = len(net.history)
    del net, tracker, callbacks, X
    gc.collect()  # frees the run's CUDA graph and device data before the next run
    meta = {
        "device": str(device_),
        "device_name": (
            torch.cuda.get_device_name(device_)
            if device_.type == "cuda"
            else platform.processor() or platform.machine()
        ),
        "torch": torch.__version__,
        "fit_seconds": fit_seconds,
        "fit_cpu_seconds": fit_cpu_seconds,
        "wall_seconds": time.perf_counter() - start,
        "epochs": epochs,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    return arrays, history, meta
