"""What a sweep will cost: a measured step of each kind of run, and of the analysis.

Before a sweep the runner times, on this machine and with the threads the runs will use,
short trainings of every distinct kind of run it has to train (:func:`cost_group`: the
network, the estimator and its regulariser, the data, the batch size and the per-epoch
tracking): a first fit of one epoch on a few batches (the process's warm-up), then
:data:`REPEATS` more fits (the set-up of a run), :data:`STEADY_EPOCHS` more epochs (the
steady cost of a batch), the tracker's per-epoch evaluation alone and the run's final
evaluation and record, each of these timed :data:`REPEATS` times. Every piece is the median
of its timings, so that one step timed while the shared machine was busy (or idle) does
not set the estimate. A run's
estimate is then its epochs times its batches at the measured cost per batch, plus the
tracker per epoch, plus the set-up, final evaluation and record. The reports' analysis is
estimated from a timed post-hoc evaluation of the probe's logits (temperature search,
metrics before and after scaling, histogram binning, the bootstrap of the intervals) per
stored run (experiments share the evaluations of the runs they share), and a timed figure
per figure of the reports.
"""

import concurrent.futures
import gc
import json
import math
import multiprocessing
import os
import tempfile
import time
from dataclasses import dataclass, replace

import numpy as np
import torch
from sklearn.utils import Bunch

from ._data import DataSpec, load_split
from ._posthoc import (
    ece_temperature,
    evaluate,
    histogram_binning,
    resampled_metric,
    scaled_probabilities,
)
from ._store import RunStore
from ._tracking import forward_logits
from ._train import EVAL_BATCH, GRIDS, build_estimator, make_tracker
from ._uncertainty import N_RESAMPLES

#: Batches of the probe's training epochs.
PROBE_BATCHES = 8
#: Samples of each evaluation the probe times (validation, test, the tracker's); the time
#: is scaled to the full sizes.
PROBE_EVAL = 2048
#: Steady epochs timed after the set-up fits (the median counts: the machine may be shared).
STEADY_EPOCHS = 3
#: Timings of each other piece of the estimate (the median counts).
REPEATS = 3
#: Figures an experiment writes, for the analysis estimate (the experiments write 1-3).
FIGURES_PER_EXPERIMENT = 2
#: Bootstrap resamplings of a test metric per stored run in the reports (counted: 1,548
#: for the 165 runs of ``run all --preset quick --seeds 3``, about 9.4 a run).
RESAMPLED_PER_RUN = 10


def cost_group(spec):
    """What sets a run's cost per epoch: network, estimator, data, batch and tracking."""
    estimator = spec["estimator"]
    data = {k: v for k, v in spec["data"].items() if not k.endswith("_seed")}
    return json.dumps(
        [
            spec["network"],
            estimator["name"],
            dict(estimator["params"]).get("regularizer"),
            data,
            spec["training"]["batch_size"],
            spec["track"],
        ],
        sort_keys=True,
    )


@dataclass(frozen=True)
class StepCost:
    """Measured seconds of one kind of run.

    Parameters
    ----------
    batches : int
        Training batches per epoch of a run of this kind.
    batch : float
        One training batch.
    track : float
        The tracker's evaluation at the end of an epoch (0 when untracked).
    setup : float
        Model set-up and the final evaluation of the validation and test sets.
    warmup : float
        What the first run of a process costs more (lazy initialisation of torch and the
        estimator's code), once per training process.
    evaluation : float
        One post-hoc evaluation of a stored run of this kind.
    """

    batches: int
    batch: float
    track: float
    setup: float
    warmup: float
    evaluation: float

    def run_seconds(self, spec):
        """Expected seconds of the run of ``spec``."""
        epochs = spec["training"]["epochs"]
        return epochs * (self.batches * self.batch + self.track) + self.setup


def _held_out(spec):
    """Fraction of the training data the estimator holds out (its meta-validation part)."""
    if spec["estimator"]["name"] != "meta":
        return 0.0
    return dict(spec["estimator"]["params"]).get("meta_fraction", 0.1)


def _fit_samples(spec, n_train):
    """Training samples a run's optimiser steps over."""
    return n_train - round(_held_out(spec) * n_train)


def _probe_spec(spec, n_samples):
    """``spec`` trained for one epoch on its first ``n_samples`` training samples."""
    data = replace(DataSpec(**spec["data"]), n_train=n_samples)
    training = dict(spec["training"], epochs=1)
    return dict(spec, data=data.as_dict(), training=training)


def measure(spec, *, device="cpu", data_home=None):
    """Time a short training of the kind of run of ``spec`` (see the module docstring).

    Parameters
    ----------
    spec : dict
        A run specification (:func:`benchmarks._train.build_spec`).
    device : str, default="cpu"
    data_home : str or None, default=None

    Returns
    -------
    cost : StepCost
    """
    data = load_split(DataSpec(**spec["data"]), data_home)
    batch_size = spec["training"]["batch_size"]
    n_samples = min(len(data.y_train), round(PROBE_BATCHES * batch_size / (1 - _held_out(spec))))
    probe = _probe_spec(spec, n_samples)
    X, y = data.X_train[:n_samples], data.y_train[:n_samples]
    start = time.perf_counter()
    build_estimator(probe, device, []).fit(X, y)
    first = time.perf_counter() - start
    nets = [build_estimator(probe, device, []) for _ in range(REPEATS)]
    second = median_seconds([lambda net=net: net.fit(X, y) for net in nets])
    net = nets[-1]
    steady = median_seconds([lambda: net.partial_fit(X, y)] * STEADY_EPOCHS)
    track = _time_tracker(net, spec, data)
    logits, scale = {}, 1.0

    def final_evaluation():
        nonlocal scale
        for split in ("val", "test"):
            X_split, n_split = _head(data[f"X_{split}"]), len(data[f"y_{split}"])
            scale = n_split / len(X_split)  # val and test are cut alike
            X_split = torch.as_tensor(X_split, device=net.device_)
            head = forward_logits(net.module_, X_split, EVAL_BATCH).cpu().numpy()
            logits[split] = np.resize(head, (n_split, head.shape[1]))

    final = median_seconds([final_evaluation] * REPEATS) * scale

    def record():
        arrays = {f"{split}_logits": values for split, values in logits.items()}
        with tempfile.TemporaryDirectory() as folder:
            RunStore(folder).save("probe", spec, arrays, {"dur": [steady]}, {"epochs": 1})
        gc.collect()

    final += median_seconds([record] * REPEATS)
    batch = steady / math.ceil(_fit_samples(probe, n_samples) / batch_size)
    batches = math.ceil(_fit_samples(spec, len(data.y_train)) / batch_size)
    evaluation = _time_evaluation(logits, data, spec)
    setup = max(second - steady, 0.0) + final
    return StepCost(batches, batch, track, setup, max(first - second, 0.0), evaluation)


def median_seconds(calls):
    """The median of the seconds each of ``calls`` (functions of no argument) takes, run
    one after the other."""
    seconds = []
    for call in calls:
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds))


def _head(X, total=PROBE_EVAL):
    """The first ``total`` samples of ``X`` (the probe's evaluations run on them)."""
    return X[: max(1, min(len(X), total))]


def _time_tracker(net, spec, data):
    """Seconds of the tracker's per-epoch evaluation, timed on a part of the test set and
    of the followed samples and scaled to their full sizes (0 for an untracked run)."""
    tracker = make_tracker(spec, data)
    if tracker is None:
        return 0.0
    full = len(tracker.X_test) + len(tracker.X_track)
    share = min(1.0, PROBE_EVAL / full)
    part = Bunch(
        X_test=tracker.X_test[: max(1, round(share * len(tracker.X_test)))],
        y_test=tracker.y_test[: max(1, round(share * len(tracker.y_test)))],
        X_train=tracker.X_track[: max(1, round(share * len(tracker.X_track)))],
        y_train=tracker.y_track[: max(1, round(share * len(tracker.y_track)))],
    )
    tracker = make_tracker(spec, part)
    tracker.on_train_begin(net)
    seconds = median_seconds([lambda: tracker.on_epoch_end(net)] * REPEATS)
    return seconds * full / (len(part.y_test) + len(part.y_train))


def _time_evaluation(logits, data, spec):
    """Seconds of one post-hoc evaluation of a run's logits: temperature, metrics, HB and
    :data:`RESAMPLED_PER_RUN` bootstrap resamplings of the test ECE (the intervals)."""
    grid = GRIDS.get(spec["training"]["recipe"], GRIDS["mukhoti2020"])
    val, test = logits["val"], logits["test"]
    if not (np.isfinite(val).all() and np.isfinite(test).all()):
        return 0.0

    def evaluation():
        temperature = ece_temperature(val, data.y_val, grid)
        evaluate(data.y_test, scaled_probabilities(test))
        proba = scaled_probabilities(test, temperature)
        evaluate(data.y_test, proba)
        histogram_binning(val, data.y_val, test)
        return proba

    proba = evaluation()
    evaluated = median_seconds([evaluation] * REPEATS)
    resampled = median_seconds(
        [lambda: resampled_metric("ece", np.asarray(data.y_test), proba, 15, N_RESAMPLES)] * REPEATS
    )
    return evaluated + RESAMPLED_PER_RUN * resampled


def time_figure():
    """Seconds to import matplotlib's pyplot (once per sweep), and to draw and save one
    figure of a report."""
    from ._report import pyplot

    start = time.perf_counter()
    plt = pyplot()
    imported = time.perf_counter() - start

    def figure():
        fig, axes = plt.subplots(2, 4, figsize=(12, 6), layout="constrained")
        for ax in axes.ravel():
            ax.plot(np.arange(50), np.random.default_rng(0).random(50))
            ax.hist(np.random.default_rng(1).random(1000), bins=30)
        with tempfile.TemporaryDirectory() as folder:
            fig.savefig(os.path.join(folder, "probe.png"), dpi=80)
        plt.close(fig)

    return imported, median_seconds([figure] * REPEATS)


def _load_data(data, data_home):
    load_split(DataSpec(**data), data_home)


def time_worker_start(spec, data_home=None):
    """Seconds to start a worker process (spawned: it imports torch, the library and
    these modules) and load the data of ``spec`` there, as every ``--jobs`` worker does."""
    context = multiprocessing.get_context("spawn")
    start = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        pool.submit(_load_data, spec["data"], data_home).result()
    return time.perf_counter() - start


def parallel_jobs(jobs):
    """Runs that actually train at once: ``jobs``, at most the cores this process may use."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        cores = os.cpu_count() or 1
    return max(1, min(jobs, cores))
