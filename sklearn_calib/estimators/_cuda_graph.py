"""The training step of NetClassifier replayed as one CUDA graph.

On CUDA the whole step (``NetClassifier.train_step``: forward under autocast, loss,
backward, clipping and the optimiser step with its learning rate as a device tensor) is
captured once in a ``torch.cuda.CUDAGraph`` after a few real warm-up steps on a side
stream, and replayed for every full batch; the last, partial batch of an epoch runs
eagerly. :class:`GraphStepper` makes that choice for each step of a training run; on the
CPU, or when the step cannot be captured, every step runs eagerly.
"""

import warnings

import torch

#: Real training steps run eagerly on a side stream before the CUDA graph is captured.
GRAPH_WARMUP_STEPS = 3


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
    train_step : callable
        ``train_step(batch) -> dict``: the net's ``train_step`` in its training run.
    """

    def __init__(self, net, batch, train_step):
        self.static_batch = _static_copy(batch)
        net.optimizer_.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_step = train_step(self.static_batch)

    def __call__(self, batch):
        """Run the captured step on ``batch`` and return the step's static outputs."""
        _copy_into(self.static_batch, batch)
        self.graph.replay()
        return self.static_step


def optimizer_capturable(optimizer):
    """Whether ``optimizer.step()`` may be captured with its learning rate as a device tensor."""
    groups = optimizer.param_groups
    if not all(isinstance(group["lr"], torch.Tensor) for group in groups):
        return False
    if isinstance(optimizer, torch.optim.SGD):
        return all(group.get("fused") for group in groups)
    return all(group.get("capturable") for group in groups)


class GraphStepper:
    """Runs the training steps of one training run: graph replay, warm-up, capture or eager.

    Parameters
    ----------
    net : NetClassifier
        Initialised net.
    live : bool
        Whether a callback does per-batch work (then every step runs eagerly).
    train_step : callable
        ``train_step(batch) -> dict``: the net's ``train_step`` in its training run.
    capturable : bool
        Whether ``train_step`` may be captured in a CUDA graph.
    """

    def __init__(self, net, live, train_step, capturable):
        self.net = net
        self.train_step = train_step
        self.device = net.device_
        self.use_graph = self._graph_possible(live, capturable)
        self.graph = None
        self.graph_lrs = None
        self.side_stream = None
        self.warm_steps = 0

    def _graph_possible(self, live, capturable):
        """Decide whether full batches replay a CUDA graph; warn when asked but impossible."""
        net = self.net
        if net.cuda_graphs is False:
            return False
        reasons = []
        if self.device.type != "cuda":
            reasons.append("the device is not CUDA")
        if live:
            reasons.append("a callback does per-batch work")
        if not capturable:
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
                stacklevel=6,
            )
        return not reasons

    def restore_lrs(self):
        """Put the captured learning-rate tensors back where a callback assigned a float."""
        if self.graph_lrs is None:
            return
        for group, captured in zip(self.net.optimizer_.param_groups, self.graph_lrs, strict=True):
            if group["lr"] is not captured:
                captured.fill_(float(group["lr"]))
                group["lr"] = captured

    def step(self, batch, full):
        """Run one training step on ``batch`` (``full``: a batch of ``batch_size`` samples)."""
        net = self.net
        if not (self.use_graph and full):
            return self.train_step(batch)
        if self.graph is not None:
            return self.graph(batch)
        current = torch.cuda.current_stream(self.device)
        if self.warm_steps < GRAPH_WARMUP_STEPS:
            self.warm_steps += 1
            if self.side_stream is None:
                self.side_stream = torch.cuda.Stream(self.device)
            self.side_stream.wait_stream(current)
            with torch.cuda.stream(self.side_stream):
                step = self.train_step(batch)
            current.wait_stream(self.side_stream)
            return step
        try:
            self.graph = GraphedStep(net, batch, self.train_step)
        except RuntimeError as error:
            warnings.warn(
                f"CUDA graph capture of {type(net).__name__}.train_step failed ({error}); "
                "training continues eagerly.",
                UserWarning,
                stacklevel=5,
            )
            self.use_graph = False
            net.history.record("cuda_graph", False)
            return self.train_step(batch)
        self.graph_lrs = [group["lr"] for group in net.optimizer_.param_groups]
        return self.graph(batch)


__all__ = ["GRAPH_WARMUP_STEPS", "GraphStepper", "GraphedStep", "optimizer_capturable"]
