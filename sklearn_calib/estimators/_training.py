"""The training engine of NetClassifier: epochs over tensors kept on the device.

One fit moves X and y to the device once, shuffles with a seeded generator on the device
and cuts batches by indexing, so no step waits for the host. The per-batch losses are
kept on the device and reach the history once per epoch. On CUDA the whole step
(``NetClassifier.train_step``: forward under autocast, loss, backward, clipping and the
optimiser step with its learning rate as a device tensor) is captured once in a
``torch.cuda.CUDAGraph`` after a few real warm-up steps on a side stream, and replayed
for every full batch; the last, partial batch of an epoch runs eagerly.

Per-batch callbacks: when a callback overrides ``on_batch_begin``, ``on_batch_end`` or
``on_grad_computed`` (skorch's :class:`~skorch.callbacks.ProgressBar` excepted), the
epoch runs "live": every step eagerly, with skorch's per-batch protocol (the batch is the
device tensors ``(X_batch, y_batch)``, the loss is recorded in the batch history before
``on_batch_end``), at the cost of one host synchronisation per step. Otherwise batch
entries of the history (``train_loss``, ``train_batch_size``; ``valid_loss``,
``valid_acc``, ``valid_batch_size``) are created during the epoch and filled in at its
end, and ProgressBar is advanced per batch without loss values.

Faults and checkpoints: at the end of each epoch (the one host synchronisation it has
anyway) :class:`~sklearn_calib.estimators._faults.NonFiniteGuard` checks the epoch's
losses and the weights, and an optional
:class:`~sklearn_calib.estimators._checkpoint.FitCheckpoint` is written after the
epoch's ``on_epoch_end`` callbacks have completed its history row (also when one of
them stops training or fails). Only skorch's EarlyStopping marks it finished; any other
``KeyboardInterrupt`` (a Ctrl-C) leaves it to be resumed.
"""

import warnings

import numpy as np
import torch
from skorch.callbacks import Callback, EarlyStopping, EpochScoring, LRScheduler, ProgressBar

from ._augment import augment_images, mixup
from ._device import fits_on_device
from ._faults import NonFiniteGuard

#: Real training steps run eagerly on a side stream before the CUDA graph is captured.
GRAPH_WARMUP_STEPS = 3

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


def raised_by_early_stopping(interrupt):
    """Whether a ``KeyboardInterrupt`` is skorch's EarlyStopping ending training.

    EarlyStopping raises it from its own ``on_epoch_end`` once ``misses_`` reaches
    ``patience``; any other (a Ctrl-C, another callback's) is an interruption.

    Parameters
    ----------
    interrupt : KeyboardInterrupt
        The exception, with its traceback.

    Returns
    -------
    stopped : bool
    """
    tb = interrupt.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    callback = frame.f_locals.get("self")
    return (
        isinstance(callback, EarlyStopping)
        and frame.f_code is EarlyStopping.on_epoch_end.__code__
        and callback.misses_ >= callback.patience
    )


class BatchSource:
    """Inputs and class indices of one split, on the device when they fit there.

    Parameters
    ----------
    X : ndarray of shape (n_samples, ...)
        Validated inputs (float32 or int64).
    y : ndarray of shape (n_samples,)
        Class indices, int64.
    device : torch.device
    """

    def __init__(self, X, y, device):
        self.device = device
        self.n_samples = len(X)
        X_host = torch.from_numpy(np.require(X, requirements=["C", "W"]))
        y_host = torch.from_numpy(np.require(y, dtype=np.int64, requirements=["C", "W"]))
        self.resident = fits_on_device(X_host.nbytes + y_host.nbytes, device)
        if self.resident:
            self.X, self.y = X_host.to(device), y_host.to(device)
        elif device.type == "cuda":
            self.X, self.y = X_host.pin_memory(), y_host.pin_memory()
        else:
            self.X, self.y = X_host, y_host

    def permutation(self, generator):
        """Return a random order of the samples (on the device, or the host if not resident)."""
        perm = torch.randperm(self.n_samples, device=generator.device, generator=generator)
        return perm if self.resident else perm.cpu()

    def take(self, index):
        """Return ``(X[index], y[index])`` on the device."""
        X, y = self.X.index_select(0, index), self.y.index_select(0, index)
        if self.resident:
            return X, y
        return X.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def slices(self, batch_size):
        """Yield consecutive batches ``(X, y)`` on the device, in sample order."""
        for start in range(0, self.n_samples, batch_size):
            X, y = self.X[start : start + batch_size], self.y[start : start + batch_size]
            if not self.resident:
                X, y = X.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            yield X, y


def _static_copy(value):
    """Return a new tensor (or tuple of tensors) with ``value``'s shapes, layout and data."""
    if isinstance(value, torch.Tensor):
        return value.clone(memory_format=torch.preserve_format)
    copies = [_static_copy(v) for v in value]
    return type(value)(*copies) if hasattr(value, "_fields") else type(value)(copies)


def _copy_into(static, value):
    """Copy ``value`` into the tensors of ``static`` (same structure)."""
    if isinstance(static, torch.Tensor):
        static.copy_(value, non_blocking=True)
        return
    for s, v in zip(static, value, strict=True):
        _copy_into(s, v)


class GraphedStep:
    """The net's whole ``train_step`` captured in one CUDA graph.

    Parameters
    ----------
    net : NetClassifier
        Initialised net whose optimiser state exists (after the warm-up steps).
    batch : tuple
        A full batch ``(X, target)`` on the device; it fixes the static shapes. The
        capture records the step without running it; call the object to run it.
    """

    def __init__(self, net, batch):
        self.static_batch = _static_copy(batch)
        net.optimizer_.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_step = net.train_step(self.static_batch)

    def __call__(self, batch):
        """Run the captured step on ``batch`` and return the step's static outputs."""
        _copy_into(self.static_batch, batch)
        self.graph.replay()
        return self.static_step


class TrainingLoop:
    """Runs the epochs of a fit.

    Parameters
    ----------
    net : NetClassifier
        Initialised net; its ``train_step`` is the step hook.
    train : BatchSource
    valid : BatchSource or None
    rngs : dict
        ``"generator"``: torch.Generator on the device (shuffling, augmentation, mixup
        pairing); ``"numpy"``: numpy Generator (mixup weights).
    recipe : Recipe or None
        Learning-rate schedule applied on top of the optimiser's initial learning rates.
    epoch_kwargs : dict
        ``dataset_train``/``dataset_valid`` passed to the epoch callbacks.
    checkpoint : FitCheckpoint or None, default=None
        Written at the end of every finished epoch.
    """

    def __init__(self, net, train, valid, rngs, recipe, epoch_kwargs, checkpoint=None):
        self.net = net
        self.train = train
        self.valid = valid
        self.rngs = rngs
        self.generator = rngs["generator"]
        self.np_rng = rngs["numpy"]
        self.recipe = recipe
        self.epoch_kwargs = epoch_kwargs
        self.checkpoint = checkpoint
        self.guard = NonFiniteGuard(net)
        self.device = net.device_
        self.channels_last = self.device.type == "cuda" and train.X.ndim == 4
        self.live = needs_live_batches(net.callbacks_)
        self.progress = [cb for _, cb in net.callbacks_ if isinstance(cb, ProgressBar)]
        self.use_graph = self._graph_possible()
        self.graph = None
        self.graph_lrs = None
        self.side_stream = None
        self.warm_steps = 0
        self.base_lrs = [
            float(group.setdefault("initial_lr", _as_float(group["lr"])))
            for group in net.optimizer_.param_groups
        ]

    def _graph_possible(self):
        """Decide whether full batches replay a CUDA graph; warn when asked but impossible."""
        net = self.net
        if net.cuda_graphs is False:
            return False
        reasons = []
        if self.device.type != "cuda":
            reasons.append("the device is not CUDA")
        if self.live:
            reasons.append("a callback does per-batch work")
        if not net.train_step_is_capturable():
            reasons.append(f"{type(net).__name__}.train_step is not marked capturable")
        if not optimizer_capturable(net.optimizer_):
            reasons.append(
                f"the optimizer {type(net.optimizer_).__name__} is not capturable "
                "(use SGD, Adam or AdamW, or pass optimizer__capturable=True and a tensor lr)"
            )
        if reasons and net.cuda_graphs is True:
            warnings.warn(
                "cuda_graphs=True but training runs eagerly: " + "; ".join(reasons) + ".",
                UserWarning,
                stacklevel=5,
            )
        return not reasons

    def run(self, epochs, schedule_start=0):
        """Train for ``epochs`` epochs with skorch's epoch-level callback protocol.

        Parameters
        ----------
        epochs : int
            Epochs to train.
        schedule_start : int, default=0
            Index in the history of the recipe schedule's epoch 0: the first epoch of a
            continued fit (``partial_fit``, ``warm_start``), which runs the whole schedule
            over its own epochs; 0 for a fresh or resumed fit.
        """
        net = self.net
        module = net.module_
        benchmark = torch.backends.cudnn.benchmark
        if self.device.type == "cuda":
            torch.backends.cudnn.benchmark = True
        if self.channels_last:
            module.to(memory_format=torch.channels_last)
        try:
            for _ in range(epochs):
                net.notify("on_epoch_begin", **self.epoch_kwargs)
                epoch = len(net.history) - 1 - schedule_start  # of the schedule
                self.guard.epoch_begin()
                self._restore_graph_lrs()
                self._apply_schedule(epoch, 0)
                net.history.record("lr", _as_float(net.optimizer_.param_groups[0]["lr"]))
                net.history.record("cuda_graph", self.use_graph)
                losses = self._train_epoch(epoch)
                if not self.guard.check(losses):
                    break
                if self.valid is not None:
                    self._valid_epoch()
                net.record_rng_state(self.rngs)
                stopped = False
                try:
                    net.notify("on_epoch_end", **self.epoch_kwargs)
                except KeyboardInterrupt as interrupt:
                    stopped = raised_by_early_stopping(interrupt)  # else Ctrl-C: resumable
                    raise
                finally:  # also when a callback fails: the fit can be resumed
                    if self.checkpoint is not None:
                        self.checkpoint.save(net, stopped=stopped)
        finally:
            torch.backends.cudnn.benchmark = benchmark
            if self.channels_last:
                module.to(memory_format=torch.contiguous_format)

    def _restore_graph_lrs(self):
        """Put the captured learning-rate tensors back where a callback assigned a float."""
        if self.graph_lrs is None:
            return
        for group, captured in zip(self.net.optimizer_.param_groups, self.graph_lrs, strict=True):
            if group["lr"] is not captured:
                captured.fill_(_as_float(group["lr"]))
                group["lr"] = captured

    def _apply_schedule(self, epoch, step):
        """Write the recipe's learning rate for this step into the optimiser, in place."""
        if self.recipe is None:
            return
        factor = self.recipe.factor(epoch, step, self.net.max_epochs, self.steps_per_epoch)
        for group, base in zip(self.net.optimizer_.param_groups, self.base_lrs, strict=True):
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(base * factor)
            else:
                group["lr"] = base * factor

    @property
    def steps_per_epoch(self):
        return -(-self.train.n_samples // self.net.batch_size)

    def _prepare(self, index):
        """Gather, augment and mix one training batch, all on the device."""
        X, y = self.train.take(index)
        net = self.net
        if net.augment is not None:
            X = augment_images(X, net.augment, self.generator)
        if net.mixup_alpha > 0:
            lam = float(self.np_rng.beta(net.mixup_alpha, net.mixup_alpha))
            X, y = mixup(X, y, lam, self.generator)
        if self.channels_last:
            X = X.contiguous(memory_format=torch.channels_last)
        return X, y

    def _step(self, batch, full):
        """Run one training step: graph replay, side-stream warm-up, capture, or eager."""
        net = self.net
        if not (self.use_graph and full):
            return net.train_step(batch)
        if self.graph is not None:
            return self.graph(batch)
        current = torch.cuda.current_stream(self.device)
        if self.warm_steps < GRAPH_WARMUP_STEPS:
            self.warm_steps += 1
            if self.side_stream is None:
                self.side_stream = torch.cuda.Stream(self.device)
            self.side_stream.wait_stream(current)
            with torch.cuda.stream(self.side_stream):
                step = net.train_step(batch)
            current.wait_stream(self.side_stream)
            return step
        try:
            self.graph = GraphedStep(net, batch)
        except RuntimeError as error:
            warnings.warn(
                f"CUDA graph capture of {type(net).__name__}.train_step failed ({error}); "
                "training continues eagerly.",
                UserWarning,
                stacklevel=6,
            )
            self.use_graph = False
            net.history.record("cuda_graph", False)
            return net.train_step(batch)
        self.graph_lrs = [group["lr"] for group in net.optimizer_.param_groups]
        return self.graph(batch)

    def _train_epoch(self, epoch):
        """Train one epoch (``epoch`` of the schedule); return its batch losses on the host."""
        net = self.net
        history = net.history
        net._set_training(True)
        batch_size = net.batch_size
        n = self.train.n_samples
        n_batches = self.steps_per_epoch
        per_step = self.recipe is not None and self.recipe.per_step
        perm = self.train.permutation(self.generator)
        losses = torch.empty(n_batches, dtype=torch.float32, device=self.device)
        live_losses = []
        for i in range(n_batches):
            size = min(batch_size, n - i * batch_size)
            if i and per_step:
                self._apply_schedule(epoch, i)
            batch = self._prepare(perm[i * batch_size : (i + 1) * batch_size])
            if self.live:
                net.notify("on_batch_begin", batch=batch, training=True)
                step = net.train_step(batch)
                live_losses.append(step["loss"].item())
                history.record_batch("train_loss", live_losses[-1])
                history.record_batch("train_batch_size", size)
                net.notify("on_batch_end", batch=batch, training=True, **step)
                continue
            history.new_batch()
            history.record_batch("train_batch_size", size)
            step = self._step(batch, full=size == batch_size)
            losses[i].copy_(step["loss"].detach())
            for callback in self.progress:
                callback.on_batch_end(net, batch=None, training=True)
        history.record("train_batch_count", n_batches)
        if self.live:
            return live_losses
        host_losses = losses.tolist()
        for entry, value in zip(history[-1]["batches"], host_losses, strict=True):
            entry["train_loss"] = value
        return host_losses

    def _valid_epoch(self):
        net = self.net
        history = net.history
        net._set_training(False)
        batch_size = net.inference_batch_size()
        results, sizes = [], []
        with torch.inference_mode():
            for X, y in self.valid.slices(batch_size):
                if self.channels_last:
                    X = X.contiguous(memory_format=torch.channels_last)
                if self.live:
                    net.notify("on_batch_begin", batch=(X, y), training=False)
                logits = net.forward_logits(X)
                loss = net.get_loss(logits, y, X=X, training=False)
                correct = (logits.argmax(1) == y).sum()
                if self.live:
                    history.record_batch("valid_loss", loss.item())
                    history.record_batch("valid_acc", correct.item() / len(y))
                    history.record_batch("valid_batch_size", len(y))
                    net.notify(
                        "on_batch_end", batch=(X, y), training=False, loss=loss, y_pred=logits
                    )
                else:
                    results.append(torch.stack([loss.float(), correct.float()]))
                    sizes.append(len(y))
        history.record("valid_batch_count", -(-self.valid.n_samples // batch_size))
        if self.live:
            return
        for (loss, correct), size in zip(torch.stack(results).tolist(), sizes, strict=True):
            history.new_batch()
            history.record_batch("valid_loss", loss)
            history.record_batch("valid_acc", correct / size)
            history.record_batch("valid_batch_size", size)
            for callback in self.progress:
                callback.on_batch_end(net, batch=None, training=False)


def _as_float(value):
    """Return a learning rate (float or one-element tensor) as a float."""
    return float(value.item()) if isinstance(value, torch.Tensor) else float(value)


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


def optimizer_capturable(optimizer):
    """Whether ``optimizer.step()`` may be captured with its learning rate as a device tensor."""
    groups = optimizer.param_groups
    if not all(isinstance(group["lr"], torch.Tensor) for group in groups):
        return False
    if isinstance(optimizer, torch.optim.SGD):
        return all(group.get("fused") for group in groups)
    return all(group.get("capturable") for group in groups)


__all__ = [
    "BatchSource",
    "GraphedStep",
    "TrainingLoop",
    "clip_gradient_norm",
    "needs_live_batches",
    "optimizer_capturable",
    "raised_by_early_stopping",
]
