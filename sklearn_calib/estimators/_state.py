"""The torch state of a net: copies to roll back to, numpy encodings and their restoration.

A net's torch components are the attributes skorch lists in ``cuda_dependent_attributes_``
(``module_``, ``criterion_``, ``optimizer_`` and any a subclass registers). Their state is
their ``state_dict()``; it is copied on the device to roll an epoch back
(:func:`capture_components`, :func:`restore_components`), to the host to roll a continued
fit back (:func:`transaction`), and encoded as numpy arrays, without pickled torch
objects, for persistence (:func:`to_numpy_tree`, :func:`to_torch_tree`).
"""

import contextlib
import copy

import numpy as np
import torch
from skorch.history import History

from .._rollback import restored_on_failure

#: Marker key of an encoded tensor whose dtype numpy lacks (bfloat16): its bits as int16.
_BITS_KEY = "__torch_bits__"

_NUMPY_LESS_DTYPES = {"bfloat16": (torch.bfloat16, torch.int16)}

#: Optimiser options that depend on the device, not on the training state.
_OPTIMIZER_FLAGS = ("fused", "capturable", "foreach")


def component_names(net):
    """Return the names of the net's torch components that have a ``state_dict``.

    Parameters
    ----------
    net : NetClassifier

    Returns
    -------
    names : list of str
    """
    names = getattr(net, "cuda_dependent_attributes_", ())
    return [name for name in names if hasattr(getattr(net, name, None), "state_dict")]


def capture_components(net):
    """Return device copies of the state dicts of the net's torch components.

    Parameters
    ----------
    net : NetClassifier

    Returns
    -------
    snapshot : dict of str to dict
    """
    return {name: copy.deepcopy(getattr(net, name).state_dict()) for name in component_names(net)}


def restore_components(net, snapshot):
    """Load state dicts into the net's torch components (module weights in place).

    Optimisers are loaded with :func:`load_optimizer_state`, so they stay set up for the
    net's current device.

    Parameters
    ----------
    net : NetClassifier
    snapshot : dict of str to dict
        From :func:`capture_components`, or CPU tensors (:func:`to_torch_tree`).
    """
    for name, state in snapshot.items():
        component = getattr(net, name)
        if isinstance(component, torch.optim.Optimizer):
            load_optimizer_state(component, state)
        else:
            component.load_state_dict(state)


def load_optimizer_state(optimizer, state):
    """Load an optimiser state saved on any device into an optimiser built for this one.

    The saved hyperparameters and buffers are loaded; the implementation flags
    (``fused``, ``capturable``, ``foreach``) and the kind of learning rate (a device
    tensor that a CUDA graph reads, or a float) stay those of ``optimizer``, so a state
    saved by a CUDA-graph optimiser loads into a plain CPU one and back.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        Built for the net's current device.
    state : dict
        ``optimizer.state_dict()`` of an optimiser over the same parameters.
    """
    groups = []
    for saved, current in zip(state["param_groups"], optimizer.param_groups, strict=False):
        group = dict(saved)
        for flag in _OPTIMIZER_FLAGS:
            if flag in current:
                group[flag] = current[flag]
        groups.append(group)
    current_lrs = [group["lr"] for group in optimizer.param_groups]
    optimizer.load_state_dict({"state": state["state"], "param_groups": groups})
    for group, current in zip(optimizer.param_groups, current_lrs, strict=True):
        lr = group["lr"]
        value = float(lr.item()) if isinstance(lr, torch.Tensor) else float(lr)
        if isinstance(current, torch.Tensor):
            current.fill_(value)
            group["lr"] = current
        else:
            group["lr"] = value


class ComponentsCopy:
    """A host copy of a net's torch components, taken on demand, to roll them back.

    Parameters
    ----------
    net : NetClassifier
    """

    def __init__(self, net):
        self.net = net
        self.snapshot = {}

    def take(self):
        """Copy the state dicts of the net's torch components to the host (once)."""
        if not self.snapshot:
            self.snapshot = {
                name: to_cpu_tree(getattr(self.net, name).state_dict())
                for name in component_names(self.net)
            }

    def restore(self):
        """Load the copy, if one was taken, into the net's components."""
        restore_components(self.net, self.snapshot)


@contextlib.contextmanager
def transaction(net):
    """Put the net back as it was, attributes and weights, if the block raises.

    The attributes are restored from a shallow copy, and the rows of the history object,
    which skorch clears in place when it initialises a net, from a list. The block
    yields a :class:`ComponentsCopy`: a block that changes the current torch components
    in place (a continued fit) calls its ``take()`` right before it does, so that they
    are copied to the host, and only then (a fresh fit builds new components, and
    checks that fail before ``take()`` changed nothing in place).

    Parameters
    ----------
    net : NetClassifier

    Yields
    ------
    components : ComponentsCopy
    """
    components = ComponentsCopy(net)
    history = net.__dict__.get("history_")
    rows = list(history) if history is not None else None
    try:
        with restored_on_failure(net):
            yield components
    except BaseException:
        components.restore()
        if history is not None:
            history[:] = rows
        raise


def to_numpy_tree(value):
    """Return ``value`` with every tensor replaced by a numpy array (on the host).

    Dicts (including ``OrderedDict``), lists and tuples are rebuilt as plain ones; other
    values are returned unchanged. A bfloat16 tensor becomes ``{"__torch_bits__":
    "bfloat16", "bits": int16 array}``.

    Parameters
    ----------
    value : object

    Returns
    -------
    encoded : object
    """
    return _map_tree(value, _tensor_to_numpy)


def _tensor_to_numpy(value):
    if not isinstance(value, torch.Tensor):
        return value
    tensor = value.detach().cpu()
    for name, (dtype, bits_dtype) in _NUMPY_LESS_DTYPES.items():
        if tensor.dtype == dtype:
            return {_BITS_KEY: name, "bits": tensor.view(bits_dtype).numpy().copy()}
    return tensor.numpy().copy()


def to_torch_tree(value):
    """Invert :func:`to_numpy_tree`: every numpy array becomes a CPU tensor.

    Parameters
    ----------
    value : object

    Returns
    -------
    decoded : object
    """
    return _map_tree(value, _numpy_to_tensor)


def _numpy_to_tensor(value):
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value, copy=True))
    if isinstance(value, dict):
        dtype = _NUMPY_LESS_DTYPES[value[_BITS_KEY]][0]
        return torch.from_numpy(np.array(value["bits"], copy=True)).view(dtype)
    return value


def to_cpu_tree(value):
    """Return ``value`` with every tensor copied to the host (containers rebuilt).

    Parameters
    ----------
    value : object

    Returns
    -------
    copied : object
    """
    return _map_tree(value, _tensor_to_cpu)


def _tensor_to_cpu(value):
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    return value


def _map_tree(value, convert):
    """Rebuild the dicts, lists and tuples in ``value``, applying ``convert`` to the rest.

    A bfloat16 record of :func:`to_numpy_tree` (a dict with ``"__torch_bits__"``) is one
    leaf, not a container.
    """
    if isinstance(value, dict) and _BITS_KEY not in value:
        return {key: _map_tree(item, convert) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tree(item, convert) for item in value)
    return convert(value)


def history_as_list(history):
    """Return a skorch History as a plain list of dicts (numpy scalars as Python numbers).

    Parameters
    ----------
    history : skorch.History

    Returns
    -------
    rows : list of dict
    """
    return _plain(list(history))


def history_from_list(rows):
    """Return a skorch History holding ``rows``.

    Parameters
    ----------
    rows : list of dict

    Returns
    -------
    history : skorch.History
    """
    return History(copy.deepcopy(list(rows)))


def _plain(value):
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


__all__ = [
    "ComponentsCopy",
    "capture_components",
    "component_names",
    "history_as_list",
    "history_from_list",
    "load_optimizer_state",
    "restore_components",
    "to_cpu_tree",
    "to_numpy_tree",
    "to_torch_tree",
    "transaction",
]
