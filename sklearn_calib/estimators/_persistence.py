"""Pickling a NetClassifier: its state without torch objects, and its rebuilding at load.

The pickled state (:func:`net_state`, ``__getstate__``) holds the torch components'
state dicts as numpy arrays, not pickled torch objects, so the same state works with
pickle, joblib and skops. At loading, :func:`loaded_state` turns it back into the net's
attributes and the components' states, and the net's ``__setstate__`` rebuilds the
fitted parts with its own hooks (``initialize_module``, ``initialize_criterion``,
``initialize_optimizer``) under the parameters they were fitted with (``built_params_``),
on the device :func:`loading_device` picks (the fitted one when it exists here, else the
CPU), and loads the saved states into them. These functions read and return values; the
net changes its own attributes.
"""

import inspect
import warnings

import torch
from skorch.exceptions import DeviceWarning
from skorch.history import History

from ._state import history_as_list, history_from_list, to_numpy_tree, to_torch_tree

#: Key of the components' state dicts in a pickled state.
COMPONENTS_KEY = "_torch_state_dicts"

#: Attributes rebuilt when an initialised net is loaded, so not stored.
REBUILT_AT_LOAD = ("callbacks_", "virtual_params_", "init_context_")


def net_state(attributes, components):
    """Return a net's pickled state: its attributes, the torch objects as numpy arrays.

    The torch components (``module_``, ``criterion_``, ``optimizer_`` and any a subclass
    registers) are stored as their state dicts, tensors as numpy arrays; callbacks and
    skorch's bookkeeping are left out, to be rebuilt at load; ``history_`` becomes a list
    of dicts and ``device_`` a string.

    Parameters
    ----------
    attributes : dict
        The net's attributes (not changed).
    components : dict of str to object
        The net's torch components, each with a ``state_dict()``, by attribute name.

    Returns
    -------
    state : dict
    """
    state = {name: value for name, value in attributes.items() if name not in components}
    state[COMPONENTS_KEY] = {
        name: to_numpy_tree(component.state_dict()) for name, component in components.items()
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


def loaded_state(state, cls, base):
    """Return the attributes a net gets from a state of :func:`net_state`, and the states of
    its torch components.

    A state saved before ``built_params_`` existed takes its parameters, and parameters
    added since then take their defaults. A component saved as None (a subclass may
    leave one out) stays None among the attributes.

    Parameters
    ----------
    state : dict
    cls : type
        The net's class.
    base : type
        The last class of ``cls``'s MRO whose ``__init__`` defaults fill in missing
        parameters (NetClassifier).

    Returns
    -------
    attributes : dict
    components : dict of str to dict
        The components' state dicts, with CPU tensors.
    """
    state = dict(state)
    components = to_torch_tree(state.pop(COMPONENTS_KEY, {}))
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
    mro = cls.__mro__
    for klass in mro[: mro.index(base) + 1]:
        for name, parameter in inspect.signature(klass.__init__).parameters.items():
            if parameter.default is not parameter.empty:
                state.setdefault(name, parameter.default)
    return state, components


def saved_params(files, f_history=None):
    """Read the files of skorch's ``save_params``.

    Parameters
    ----------
    files : dict of str to file-like object, str or None
        The file of each component (``module_``, ``optimizer_``, ...), read with
        ``torch.load(weights_only=True)`` onto the CPU; None leaves a component out.
    f_history : file-like object, str or None, default=None
        File of the history (JSON).

    Returns
    -------
    states : dict of str to dict
        The components' state dicts.
    history : skorch.History or None
    """
    states = {
        name: torch.load(file, map_location="cpu", weights_only=True)
        for name, file in files.items()
        if file is not None
    }
    history = History.from_file(f_history) if f_history is not None else None
    return states, history


def loading_device(name, requested, fitted):
    """Return the fitted device if it exists here, else the CPU (warning if CUDA was named).

    Parameters
    ----------
    name : str
        The net's class name, for the warning.
    requested : str or torch.device
        The net's ``device`` parameter.
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
    if not (isinstance(requested, str) and requested == "auto"):
        warnings.warn(
            f"{name} was fitted on {fitted} (device={requested!r}) but CUDA is not "
            "available here; it is loaded on the CPU and its device set to 'cpu'.",
            DeviceWarning,
            stacklevel=3,
        )
    return torch.device("cpu")


__all__ = ["loaded_state", "loading_device", "net_state", "saved_params"]
