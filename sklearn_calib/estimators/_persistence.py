"""Pickling a NetClassifier: its state without torch objects, and its rebuilding at load.

The pickled state (:func:`net_state`, ``__getstate__``) holds the torch components'
state dicts as numpy arrays, not pickled torch objects, so the same state works with
pickle, joblib and skops. Loading (:func:`restore_net`, ``__setstate__``) rebuilds the
fitted parts with the net's own hooks (``initialize_module``, ``initialize_criterion``,
``initialize_optimizer``) under the parameters they were fitted with (``built_params_``),
on the fitted device when it exists here, else on the CPU, and loads the saved states
into them.
"""

import contextlib
import inspect
import warnings

import torch
from skorch.exceptions import DeviceWarning
from skorch.history import History

from ._state import (
    component_names,
    history_as_list,
    history_from_list,
    restore_components,
    to_numpy_tree,
    to_torch_tree,
)

#: Key of the components' state dicts in a pickled state.
COMPONENTS_KEY = "_torch_state_dicts"

#: Attributes rebuilt when an initialised net is loaded, so not stored.
REBUILT_AT_LOAD = ("callbacks_", "virtual_params_", "init_context_")


def net_state(net):
    """Return the net's state with its torch objects replaced by numpy arrays.

    The torch components (``module_``, ``criterion_``, ``optimizer_`` and any a subclass
    registers) are stored as their state dicts, tensors as numpy arrays; callbacks and
    skorch's bookkeeping are rebuilt at load; ``history_`` becomes a list of dicts and
    ``device_`` a string.

    Parameters
    ----------
    net : NetClassifier

    Returns
    -------
    state : dict
    """
    state = net.__dict__.copy()
    state[COMPONENTS_KEY] = {
        name: to_numpy_tree(state.pop(name).state_dict()) for name in component_names(net)
    }
    if state.get("initialized_"):
        for name in REBUILT_AT_LOAD:
            state.pop(name, None)
    if isinstance(state.get("history_"), list):
        state["history_"] = history_as_list(state["history_"])
    if state.get("device_") is not None:
        state["device_"] = str(state["device_"])
    if state.get("rng_state_") is not None:
        state["rng_state_"] = to_numpy_tree(state["rng_state_"])
    return state


def restore_net(net, state, base):
    """Rebuild ``net`` from a state of :func:`net_state` on an available device.

    A state saved before ``built_params_`` existed takes its parameters, and parameters
    added since then take their defaults. A component saved as None (a subclass may
    leave one out) stays None.

    Parameters
    ----------
    net : NetClassifier
        An empty instance (``__setstate__``'s).
    state : dict
    base : type
        The first class of ``type(net)``'s MRO whose parameters have defaults to fill
        in (NetClassifier).
    """
    state = dict(state)
    components = state.pop(COMPONENTS_KEY, {})
    if isinstance(state.get("history_"), list):
        state["history_"] = history_from_list(state["history_"])
    if state.get("rng_state_") is not None:
        state["rng_state_"] = to_torch_tree(state["rng_state_"])
    legacy = state.pop("_built_params", None)  # saved by an earlier version
    if state.get("initialized_") and "built_params_" not in state:
        state["built_params_"] = legacy or {
            name: value
            for name, value in state.items()
            if not (name.endswith("_") or name.startswith("_"))
        }
    mro = type(net).__mro__
    for cls in mro[: mro.index(base) + 1]:
        for name, parameter in inspect.signature(cls.__init__).parameters.items():
            if parameter.default is not parameter.empty:
                state.setdefault(name, parameter.default)
    net.__dict__.update(state)
    if not state.get("initialized_"):
        return
    requested = net.__dict__["device"]
    net.device_ = loading_device(net, state.get("device_"))
    moved = net.device_.type == "cpu" and torch.device(state.get("device_") or "cpu").type != "cpu"
    if moved and not (isinstance(requested, str) and requested == "auto"):
        net.__dict__["device"] = "cpu"
    net.init_context_ = None
    left_out = [name for name in net.cuda_dependent_attributes_ if state.get(name, ...) is None]
    with torch.random.fork_rng(devices=[]):  # initial weights, replaced just below
        build_fitted_parts(net)
    for name in left_out:
        setattr(net, name, None)
    restore_components(net, to_torch_tree(components))


def build_fitted_parts(net):
    """Build the fitted parts of a net being loaded, as they were fitted.

    The network, loss and optimiser (and any component a subclass builds in these
    hooks) come from the net's ``initialize_module``, ``initialize_criterion`` and
    ``initialize_optimizer`` under the recorded ``built_params_``; the callbacks from the
    current parameters.

    Parameters
    ----------
    net : NetClassifier
        With ``device_`` and ``built_params_`` set.
    """
    net._initialize_callbacks()
    with fitted_parameters(net):
        for name in ("module", "criterion", "optimizer"):
            with net._current_init_context(name):
                getattr(net, f"initialize_{name}")()
    net.built_params_ = {
        **net.built_params_,
        **{k: v for k, v in net._param_values().items() if k.split("__")[0] == "callbacks"},
    }


@contextlib.contextmanager
def fitted_parameters(net):
    """Give the net exactly the parameters its parts were built with (``built_params_``)
    in the block; the current ones are put back after it."""
    current = net._param_values()
    for name in current:
        del net.__dict__[name]
    net.__dict__.update(net.built_params_)
    try:
        yield
    finally:
        for name in net.built_params_:
            net.__dict__.pop(name, None)
        net.__dict__.update(current)


def load_saved_params(net, files, f_history=None):
    """Load the files of skorch's ``save_params`` into the fitted net, on its device.

    Parameters
    ----------
    net : NetClassifier
        Fitted.
    files : dict of str to file-like object, str or None
        The file of each component (``module_``, ``optimizer_``, ...), read with
        ``torch.load(weights_only=True)``; None leaves a component as it is.
    f_history : file-like object, str or None, default=None
        File of the history (JSON).
    """
    if f_history is not None:
        net.history_ = History.from_file(f_history)
    states = {
        name: torch.load(file, map_location="cpu", weights_only=True)
        for name, file in files.items()
        if file is not None
    }
    restore_components(net, states)


def loading_device(net, fitted):
    """Return the fitted device if it exists here, else the CPU (warning if CUDA was named).

    Parameters
    ----------
    net : NetClassifier
        Being loaded; its ``device`` parameter is set.
    fitted : str or None
        The device the net was fitted on.

    Returns
    -------
    device : torch.device
    """
    fitted = torch.device(fitted) if fitted is not None else torch.device("cpu")
    if fitted.type != "cuda":
        return fitted
    if torch.cuda.is_available():
        if fitted.index is not None and fitted.index >= torch.cuda.device_count():
            return torch.device("cuda")  # fitted on a GPU this machine lacks
        return fitted
    requested = net.__dict__["device"]
    if not (isinstance(requested, str) and requested == "auto"):
        warnings.warn(
            f"{type(net).__name__} was fitted on {fitted} (device={requested!r}) but CUDA "
            "is not available here; it is loaded on the CPU and its device set to 'cpu'.",
            DeviceWarning,
            stacklevel=4,
        )
    return torch.device("cpu")


__all__ = [
    "build_fitted_parts",
    "fitted_parameters",
    "load_saved_params",
    "loading_device",
    "net_state",
    "restore_net",
]
