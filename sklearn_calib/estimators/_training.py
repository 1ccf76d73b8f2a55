"""What a training run of NetClassifier works on: device data, its batches and the run's state.

A fit moves X, the class indices and the sample weights to the device once
(:class:`BatchSource`, behind a :class:`FitDataset`), shuffles with a seeded generator on
the device and cuts batches by indexing (:class:`TrainingBatches`, what
``NetClassifier.get_iterator`` returns for training), so no step waits for the host.
:class:`TrainingRun` holds what one call of ``fit``, ``partial_fit`` or ``fit_loop``
keeps besides the net: its random generators, the recipe's schedule, the step runner
(CUDA graphs), the non-finite guard and the checkpoint.

Per-batch callbacks: when a callback overrides ``on_batch_begin``, ``on_batch_end`` or
``on_grad_computed`` (skorch's :class:`~skorch.callbacks.ProgressBar` excepted), the
epoch runs "live": every step eagerly, with skorch's per-batch protocol, at the cost of
one host synchronisation per step (:func:`needs_live_batches`).
"""

import math

import numpy as np
import torch
from skorch.callbacks import Callback, EarlyStopping, EpochScoring, LRScheduler, ProgressBar
from skorch.dataset import Dataset

from ._cuda_graph import GraphStepper
from ._device import fits_on_device
from ._faults import NonFiniteGuard
from ._recipes import RecipeSchedule
from ._targets import WeightedTarget

_BATCH_HOOKS = ("on_batch_begin", "on_batch_end", "on_grad_computed")


def needs_live_batches(callbacks):
    """Whether a callback does per-batch work.

    A ProgressBar does not count, nor does an ``LRScheduler`` that steps once per epoch
    or an ``EpochScoring`` (their batch hooks do nothing: NetClassifier's
    ``use_caching=False`` makes ``EpochScoring`` score the whole split at the epoch's end),
    unless a subclass overrides a batch hook.

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
        for hook in _BATCH_HOOKS:
            if all(getattr(type(callback), hook) is not getattr(base, hook) for base in inert):
                return True
    return False


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


class BatchSource:
    """Inputs, class indices and sample weights of one split, on the device when they fit.

    Parameters
    ----------
    X : ndarray of shape (n_samples, ...)
        Validated inputs (float32 or int64).
    y : ndarray of shape (n_samples,)
        Class indices, int64.
    device : torch.device
    weight : ndarray of shape (n_samples,) or None, default=None
        Sample weights (float32); with them the batches' targets are
        :class:`~sklearn_calib.estimators._targets.WeightedTarget`.
    """

    def __init__(self, X, y, device, weight=None):
        self.device = device
        self.n_samples = len(X)
        tensors = [
            torch.from_numpy(np.require(X, requirements=["C", "W"])),
            torch.from_numpy(np.require(y, dtype=np.int64, requirements=["C", "W"])),
        ]
        if weight is not None:
            tensors.append(torch.from_numpy(np.require(weight, np.float32, ["C", "W"])))
        self.resident = fits_on_device(sum(t.nbytes for t in tensors), device)
        if self.resident:
            tensors = [t.to(device) for t in tensors]
        elif device.type == "cuda":
            tensors = [t.pin_memory() for t in tensors]
        self.X, self.y = tensors[:2]
        self.weight = tensors[2] if weight is not None else None

    def permutation(self, generator):
        """Return a random order of the samples (on the device, or the host if not resident)."""
        perm = torch.randperm(self.n_samples, device=generator.device, generator=generator)
        return perm if self.resident else perm.cpu()

    def _batch(self, parts):
        if not self.resident:
            parts = [part.to(self.device, non_blocking=True) for part in parts]
        X, y = parts[:2]
        return (X, y) if len(parts) == 2 else (X, WeightedTarget(y, parts[2]))

    def _parts(self):
        return [self.X, self.y] + ([self.weight] if self.weight is not None else [])

    def take(self, index):
        """Return the batch ``(X[index], target[index])`` on the device."""
        return self._batch([part.index_select(0, index) for part in self._parts()])

    def slices(self, batch_size):
        """Yield consecutive batches ``(X, target)`` on the device, in sample order."""
        for start in range(0, self.n_samples, batch_size):
            yield self._batch([part[start : start + batch_size] for part in self._parts()])


class FitDataset(Dataset):
    """A skorch Dataset of validated training data, with class indices and sample weights.

    Callbacks receive it as ``dataset_train``/``dataset_valid`` (``X`` and the labels
    ``y``, as any skorch Dataset); ``NetClassifier.get_iterator`` batches it on the device.

    Parameters
    ----------
    X : ndarray of shape (n_samples, ...)
        Validated inputs.
    y : ndarray of shape (n_samples,)
        Class labels.
    y_index : ndarray of shape (n_samples,)
        Class indices.
    weight : ndarray of shape (n_samples,) or None
        Sample weights.
    """

    def __init__(self, X, y, y_index, weight):
        super().__init__(X, y)
        self.y_index = y_index
        self.weight = weight
        self._source = None

    def subset(self, index):
        """Return the FitDataset of the samples ``index``."""
        weight = self.weight[index] if self.weight is not None else None
        return FitDataset(self.X[index], self.y[index], self.y_index[index], weight)

    def batch_source(self, device):
        """Return the data on ``device`` (moved once, then kept)."""
        if self._source is None or self._source.device != device:
            self._source = BatchSource(self.X, self.y_index, device, self.weight)
        return self._source


class TrainingBatches:
    """The training batches of one epoch per iteration: shuffled, then prepared by the net.

    Parameters
    ----------
    source : BatchSource
    batch_size : int
    generator : torch.Generator
        Generator on the device for the order of the samples.
    prepare : callable
        ``prepare(X, target) -> (X, target)``: augmentation and mixup.
    """

    def __init__(self, source, batch_size, generator, prepare):
        self.source = source
        self.batch_size = batch_size
        self.generator = generator
        self.prepare = prepare

    def __len__(self):
        return math.ceil(self.source.n_samples / self.batch_size)

    def __iter__(self):
        perm = self.source.permutation(self.generator)
        for start in range(0, self.source.n_samples, self.batch_size):
            yield self.prepare(*self.source.take(perm[start : start + self.batch_size]))


class EvaluationBatches:
    """The batches of a split in sample order, for validation and prediction.

    Parameters
    ----------
    source : BatchSource
    batch_size : int
    channels_last : bool
        Whether image batches are made channels-last (CUDA).
    """

    def __init__(self, source, batch_size, channels_last):
        self.source = source
        self.batch_size = batch_size
        self.channels_last = channels_last

    def __len__(self):
        return math.ceil(self.source.n_samples / self.batch_size)

    def __iter__(self):
        for X, target in self.source.slices(self.batch_size):
            if self.channels_last:
                X = X.contiguous(memory_format=torch.channels_last)
            yield X, target


class TrainingRun:
    """The state of one training run, besides the net's.

    Parameters
    ----------
    net : NetClassifier
        Initialised net, its data already split.
    generators : dict
        ``"generator"``: torch.Generator on the device (shuffling, augmentation, mixup
        pairing); ``"numpy"``: numpy Generator (mixup weights); ``"split_seed"``: int.
    schedule_start : int
        Index in the history of the recipe schedule's first epoch: 0 for a fresh or
        resumed fit, the first epoch of this run for a continued one.
    schedule_epochs : int
        Epochs the schedule spans.
    steps_per_epoch : int
        Training steps per epoch.
    checkpoint : FitCheckpoint or None
        Written after every epoch.
    """

    def __init__(
        self, net, generators, schedule_start, schedule_epochs, steps_per_epoch, checkpoint
    ):
        self.net = net
        self.generators = generators
        self.generator = generators["generator"]
        self.np_rng = generators["numpy"]
        self.checkpoint = checkpoint
        self.schedule_start = schedule_start
        self.schedule = RecipeSchedule(net.recipe, net.optimizer_, schedule_epochs, steps_per_epoch)
        self.live = needs_live_batches(net.callbacks_)
        self.progress = [cb for _, cb in net.callbacks_ if isinstance(cb, ProgressBar)]
        self.guard = NonFiniteGuard(net)
        self.stepper = GraphStepper(net, self.live)
        self.epoch = 0

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

    def rng_state(self):
        """Return the generator states now (the net's ``rng_state_``)."""
        return generator_states(
            self.net.device_, self.generator, self.np_rng, self.generators["split_seed"]
        )


def generator_states(device, generator, np_rng, split_seed):
    """The states of a run's generators now, as a net's ``rng_state_``.

    Parameters
    ----------
    device : torch.device
        The net's device; on CUDA, the device's generator state is recorded too.
    generator : torch.Generator
        The generator of the batch order.
    np_rng : numpy.random.Generator
        numpy's generator (augmentation, mixing).
    split_seed : int
        Seed of the validation split.

    Returns
    -------
    dict
        ``device_type``, ``torch`` (the global generator), ``cuda`` (None off CUDA),
        ``generator``, ``numpy`` and ``split_seed``.
    """
    return {
        "device_type": device.type,
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "generator": generator.get_state(),
        "numpy": np_rng.bit_generator.state,
        "split_seed": split_seed,
    }


def clip_gradient_norm(parameters, max_norm):
    """Scale the gradients in place so that their total 2-norm is at most ``max_norm``.

    ``torch.nn.utils.clip_grad_norm_`` sums the squares in the gradients' dtype: float32
    gradients beyond about 1e19 make the total norm inf, and its clip coefficient
    ``max_norm / inf = 0`` zeroes the step instead of clipping it. Here each gradient's
    norm is accumulated in float64, where the square of any finite float32 value fits;
    torch's ``clip_grads_with_norm_`` applies the coefficient. No host synchronisation,
    so a CUDA graph can capture it.

    Parameters
    ----------
    parameters : list of torch.nn.Parameter
        Parameters whose ``grad`` (where not None) is clipped.
    max_norm : float
        Largest total norm.
    """
    grads = [parameter.grad for parameter in parameters if parameter.grad is not None]
    if not grads:
        return
    norms = torch.stack([torch.linalg.vector_norm(grad, dtype=torch.float64) for grad in grads])
    dtype = grads[0].dtype
    total = torch.linalg.vector_norm(norms).clamp(max=torch.finfo(dtype).max).to(dtype)
    torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, total)


__all__ = [
    "BatchSource",
    "EvaluationBatches",
    "FitDataset",
    "TrainingBatches",
    "TrainingRun",
    "clip_gradient_norm",
    "needs_live_batches",
    "stopped_by_early_stopping",
]
