"""TrainingRun: one call of ``fit``, ``partial_fit`` or ``fit_loop``, which runs the epochs.

The run owns what one training call keeps besides the net: the split datasets and their
batches, the random generators, the recipe's schedule, the step runner (CUDA graphs),
the non-finite guard and the checkpoint. It runs skorch's protocol (``on_train_begin``;
per epoch ``on_epoch_begin``, the training and validation passes of the net's
``run_single_epoch``, ``on_epoch_end``; ``on_train_end``) and passes itself to the net's
hooks (``get_split_datasets``, ``get_iterator``, ``run_single_epoch``, the steps and the
net's own handlers of those notifications; callbacks receive skorch's arguments only),
which work with defaults outside a run.

A pass over the batches takes one of two paths:

- on the device (:meth:`TrainingRun.run_pass`, the default): the losses stay on the
  device and reach the history at the end of the pass (one host synchronisation per
  pass), and full training batches may replay a CUDA graph;
- per batch (:func:`per_batch_pass`), when the net or a callback does per-batch work
  (:func:`needs_live_batches`), and outside a run: skorch's per-batch protocol
  (``on_batch_begin``, the step, the batch's history entries, ``on_batch_end``), at the
  cost of one host synchronisation per step.
"""

import math
from functools import partial

import torch
from skorch import NeuralNet
from skorch.callbacks import Callback, EarlyStopping, EpochScoring, LRScheduler, ProgressBar
from skorch.utils import TeeGenerator

from ._callbacks import ValidationBatchCallback, advancing_progress_bars
from ._cuda_graph import GraphStepper
from ._faults import NonFiniteGuard
from ._recipes import RecipeSchedule
from ._targets import batch_accuracy, class_indices

_BATCH_HOOKS = ("on_batch_begin", "on_batch_end", "on_grad_computed")


def needs_live_batches(callbacks):
    """Whether a callback does per-batch work.

    A ProgressBar does not count, nor does an ``LRScheduler`` that steps once per epoch
    or an ``EpochScoring`` (their batch hooks do nothing: NetClassifier's
    ``use_caching=False`` makes ``EpochScoring`` score the whole split at the epoch's end),
    unless a subclass overrides a batch hook; nor does the ``on_batch_end`` of a
    ``ValidationBatchCallback``, which the validation pass calls on the device.

    Parameters
    ----------
    callbacks : list of (str, Callback)
        The net's initialised callbacks.

    Returns
    -------
    live : bool
    """
    for _, callback in callbacks:
        if isinstance(callback, ProgressBar):
            continue
        inert = [Callback]
        if isinstance(callback, LRScheduler) and callback.step_every == "epoch":
            inert.append(LRScheduler)
        if isinstance(callback, EpochScoring):
            inert.append(EpochScoring)
        hooks = _BATCH_HOOKS
        if isinstance(callback, ValidationBatchCallback):
            hooks = tuple(hook for hook in _BATCH_HOOKS if hook != "on_batch_end")
        for hook in hooks:
            if all(getattr(type(callback), hook) is not getattr(base, hook) for base in inert):
                return True
    return False


def _net_does_batch_work(net):
    """Whether the net's class overrides one of skorch's per-batch hooks."""
    return any(getattr(type(net), hook) is not getattr(NeuralNet, hook) for hook in _BATCH_HOOKS)


def stopped_by_early_stopping(callbacks):
    """Whether one of the callbacks is a skorch EarlyStopping that has ended training.

    EarlyStopping raises ``KeyboardInterrupt`` from its ``on_epoch_end`` exactly when its
    ``misses_`` reaches ``patience``; any other interrupt (a Ctrl-C) leaves them below.

    Parameters
    ----------
    callbacks : list of (str, Callback)

    Returns
    -------
    stopped : bool
    """
    return any(
        isinstance(callback, EarlyStopping) and getattr(callback, "misses_", 0) >= callback.patience
        for _, callback in callbacks
    )


def notify_grad_computed(net, batch):
    """skorch's ``on_grad_computed`` notification of a training step on ``batch``."""
    net.notify(
        "on_grad_computed",
        named_parameters=TeeGenerator(net.get_all_learnable_params()),
        batch=batch,
        training=True,
    )


def per_batch_pass(net, iterator, training, prefix, step_fn, before_step=None, **fit_params):
    """One pass of ``step_fn`` over ``iterator`` with skorch's per-batch protocol.

    Each batch: ``on_batch_begin`` (which starts the batch's history entry), the step,
    the entries ``{prefix}_loss``, ``valid_acc`` (validation) and
    ``{prefix}_batch_size``, then ``on_batch_end`` with the step's outputs.

    Parameters
    ----------
    net : NetClassifier
    iterator : iterable of batches ``(X, target)``
    training : bool
    prefix : {"train", "valid"}
    step_fn : callable
        ``step_fn(batch, **fit_params) -> {"loss", "y_pred"}``.
    before_step : callable or None, default=None
        Called with the index of each batch before its step (the recipe's schedule).
    **fit_params
        Passed to ``step_fn``.

    Returns
    -------
    losses : list of float
        The batches' losses.
    """
    history = net.history
    losses = []
    for i, batch in enumerate(iterator):
        if before_step is not None:
            before_step(i)
        net.notify("on_batch_begin", batch=batch, training=training)
        step = step_fn(batch, **fit_params)
        target = batch[1]
        losses.append(step["loss"].detach().float().item())
        history.record_batch(f"{prefix}_loss", losses[-1])
        if not training:
            history.record_batch("valid_acc", batch_accuracy(step["y_pred"], target).item())
        history.record_batch(f"{prefix}_batch_size", len(class_indices(target)))
        net.notify("on_batch_end", batch=batch, training=training, **step)
    history.record(f"{prefix}_batch_count", len(losses))
    return losses


class TrainingRun:
    """One training call: it splits the data, batches it and runs the epochs.

    Parameters
    ----------
    net : NetClassifier
        Initialised net, its parts built or updated for this call.
    data : FitDataset
        The validated training data.
    generators : RunGenerators
        The run's random generators.
    schedule_start : int
        Index in the history of the recipe schedule's first epoch: 0 for a fresh or
        resumed fit, the first epoch of this run for a continued one.
    schedule_epochs : int
        Epochs the schedule spans.
    checkpoint : FitCheckpoint or None, default=None
        Written after every epoch's callbacks, also when one of them stops training or
        fails.

    Attributes
    ----------
    dataset_train, dataset_valid : FitDataset
        The net's ``get_split_datasets`` of ``data`` (``dataset_valid`` None without a
        validation split); callbacks receive them.
    iterator_train, iterator_valid : iterable of batches
        The net's ``get_iterator`` of each (``iterator_valid`` None without a split).
    held_out : dict of str to object
        What the net's ``get_split_datasets`` holds out of the data for this run besides
        the validation part, by name (MetaNetClassifier's meta-validation batches,
        ``"meta"``).
    live : bool
        Whether the net or a callback does per-batch work: every pass runs per batch.
    schedule : RecipeSchedule
    guard : NonFiniteGuard
    stepper : GraphStepper
    """

    def __init__(self, net, data, generators, schedule_start, schedule_epochs, checkpoint=None):
        _check_monitors(net)
        self.net = net
        self.data = data
        self.generators = generators
        self.schedule_start = schedule_start
        self.checkpoint = checkpoint
        self.held_out = {}
        self.dataset_train, self.dataset_valid = net.get_split_datasets(
            data, data.y, split_seed=generators.split_seed, run=self
        )
        steps = math.ceil(len(self.dataset_train) / net.batch_size)
        self.schedule = RecipeSchedule(net.recipe, net.optimizer_, schedule_epochs, steps)
        self.live = needs_live_batches(net.callbacks_) or _net_does_batch_work(net)
        self.progress = advancing_progress_bars(net)
        self.validation_readers = [
            callback
            for _, callback in net.callbacks_
            if isinstance(callback, ValidationBatchCallback)
        ]
        self.guard = NonFiniteGuard(net)
        self.epoch = 0
        self.iterator_train = net.get_iterator(self.dataset_train, training=True, run=self)
        self.iterator_valid = None
        if self.dataset_valid is not None:
            self.iterator_valid = net.get_iterator(self.dataset_valid, training=False, run=self)
        self.stepper = GraphStepper(
            net, self.live, partial(net.train_step, run=self), net.train_step_is_capturable(self)
        )

    def train(self, epochs):
        """Train ``epochs`` epochs (fewer if a callback stops training), skorch's protocol.

        A ``KeyboardInterrupt`` (EarlyStopping, a Ctrl-C, a restored non-finite epoch)
        ends training; ``on_train_end`` still runs. The run lets go of its stepper at the
        end: the stepper's step refers to the run, and dropping it frees the run, its
        device data and its CUDA graph as soon as the training call returns.
        """
        net, data = self.net, self.data
        try:
            channels_last = net.device_.type == "cuda" and data.X.ndim == 4
            benchmark = torch.backends.cudnn.benchmark
            if net.device_.type == "cuda":
                torch.backends.cudnn.benchmark = True
            if channels_last:
                net.module_.to(memory_format=torch.channels_last)
            net.notify("on_train_begin", run=self, X=data.X, y=data.y)
            try:
                for _ in range(epochs):
                    self.run_epoch()
            except KeyboardInterrupt:
                pass
            finally:
                net.optimizer_.zero_grad(set_to_none=True)
                torch.backends.cudnn.benchmark = benchmark
                if channels_last:
                    net.module_.to(memory_format=torch.contiguous_format)
        finally:
            self.stepper = None
        net.notify("on_train_end", run=self, X=data.X, y=data.y)

    def run_epoch(self):
        """One epoch: callbacks, the training and validation passes, the checkpoint."""
        net = self.net
        datasets = {"dataset_train": self.dataset_train, "dataset_valid": self.dataset_valid}
        net.notify("on_epoch_begin", run=self, **datasets)
        self.begin_epoch()
        net.run_single_epoch(
            self.iterator_train, training=True, prefix="train", step_fn=net.train_step, run=self
        )
        net.run_single_epoch(
            self.iterator_valid,
            training=False,
            prefix="valid",
            step_fn=net.validation_step,
            run=self,
        )
        net.rng_state_ = self.generators.state(net.device_)
        stopped = False
        try:
            net.notify("on_epoch_end", run=self, **datasets)
        except KeyboardInterrupt:
            stopped = stopped_by_early_stopping(net.callbacks_)  # else a Ctrl-C: resumable
            raise
        finally:  # also when a callback fails: the fit can be resumed
            if self.checkpoint is not None:
                self.checkpoint.save(net, stopped=stopped)

    def begin_epoch(self):
        """Set the epoch's learning rate (its first step's) and record it in the history."""
        net = self.net
        self.epoch = len(net.history) - 1 - self.schedule_start
        self.stepper.restore_lrs()
        self.schedule.apply(self.epoch, 0)
        net.history.record("lr", float(net.optimizer_.param_groups[0]["lr"]))
        net.history.record("cuda_graph", self.stepper.use_graph)

    def before_step(self, step):
        """Set the learning rate of a step of the epoch (per-step schedules)."""
        if step and self.schedule.per_step:
            self.schedule.apply(self.epoch, step)

    def run_pass(self, iterator, training, prefix, step_fn, **fit_params):
        """One training or validation pass of the epoch (the net's ``run_single_epoch``).

        It runs per batch when the run is live, else on the device. A training pass ends
        with the non-finite check (``on_nonfinite``); after a restored epoch it raises
        ``KeyboardInterrupt``, which ends training.
        """
        if not training:
            if self.live:
                per_batch_pass(self.net, iterator, False, prefix, step_fn, run=self, **fit_params)
            else:
                self._validate_on_device(iterator, prefix, step_fn, fit_params)
            return
        self.guard.epoch_begin()
        if self.live:
            losses = per_batch_pass(
                self.net, iterator, True, prefix, step_fn, self.before_step, run=self, **fit_params
            )
        else:
            losses = self._train_on_device(iterator, prefix)
        if not self.guard.check(losses):
            raise KeyboardInterrupt  # restored to the last finite epoch: training stops

    def _train_on_device(self, iterator, prefix):
        """The training steps, their losses kept on the device until the pass ends.

        Each batch gets its history entry (``{prefix}_batch_size``) before its step and
        its ``{prefix}_loss`` at the end; progress bars advance per batch.
        """
        net = self.net
        rows = net.history[-1]["batches"]
        first = len(rows)
        size_key, loss_key = f"{prefix}_batch_size", f"{prefix}_loss"
        per_step, progress, stepper = self.schedule.per_step, self.progress, self.stepper
        copy = stepper.use_graph  # a replayed graph returns the same output tensor each step
        losses = []
        for i, batch in enumerate(iterator):
            size = len(batch[0])
            if per_step and i:
                self.schedule.apply(self.epoch, i)
            rows.append({size_key: size})
            loss = stepper.step(batch, full=size == net.batch_size)["loss"].detach()
            losses.append(loss.clone() if copy else loss)
            for callback in progress:
                callback.on_batch_end(net, batch=None, training=True)
        net.history.record(f"{prefix}_batch_count", len(losses))
        values = torch.stack(losses).float().tolist() if losses else []
        for row, value in zip(rows[first:], values, strict=True):
            row[loss_key] = value
        return values

    def _validate_on_device(self, iterator, prefix, step_fn, fit_params):
        """The validation steps; the batches' history entries are written at the end.

        Each step's outputs go to the ``ValidationBatchCallback``s' ``on_batch_end`` as
        device tensors.
        """
        net = self.net
        losses, accuracies, sizes = [], [], []
        for batch in iterator:
            step = step_fn(batch, run=self, **fit_params)
            for callback in self.validation_readers:
                callback.on_batch_end(net, batch=batch, training=False, **step)
            losses.append(step["loss"].detach().float())
            accuracies.append(batch_accuracy(step["y_pred"], batch[1]))
            sizes.append(len(batch[0]))
        net.history.record(f"{prefix}_batch_count", len(sizes))
        values = torch.stack(losses + accuracies).tolist() if sizes else []
        rows = net.history[-1]["batches"]
        for loss, acc, size in zip(values[: len(sizes)], values[len(sizes) :], sizes, strict=True):
            rows.append({f"{prefix}_loss": loss, "valid_acc": acc, f"{prefix}_batch_size": size})
            for callback in self.progress:
                callback.on_batch_end(net, batch=None, training=False)


def _check_monitors(net):
    """Raise a ValueError if a callback monitors a validation score without a split."""
    if net.train_split is not None:
        return
    for _, callback in net.callbacks_:
        monitor = getattr(callback, "monitor", None)
        if isinstance(monitor, str) and monitor.startswith("valid_"):
            raise ValueError(
                f"The callback {type(callback).__name__!r} monitors {monitor!r}, which is "
                "recorded only with a validation split, but train_split=None: set "
                "train_split (a fraction such as 0.2, or a callable)."
            )


__all__ = [
    "TrainingRun",
    "needs_live_batches",
    "notify_grad_computed",
    "per_batch_pass",
    "stopped_by_early_stopping",
]
