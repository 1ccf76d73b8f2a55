"""Routing of Dask collections to their handlers, without importing Dask.

A function decorated with :func:`dask_aware` runs as before on arrays; given a Dask
collection (an object with a ``__dask_graph__`` method: a Dask array, DataFrame or
Series) it calls the handler of its name in :data:`HANDLERS`, which accumulates chunk
by chunk and merges. The handlers are all in ``metrics/_dask``: a metric's is named in
its declaration (``_registry``), the statistics' are registered by
:func:`register_handler`. Dask is imported only by them, so a user without Dask never
imports it.
"""

import functools
import inspect

from sklearn.utils import Bunch

from ..._dask_chunks import uses_dask
from ._scores import resolve_convention

#: Handlers of Dask input, by function name (filled by the metric declarations and by
#: ``metrics/_dask``).
HANDLERS = {}


def register_handler(name):
    """Decorator: make a function the Dask handler of the function ``name``.

    The handler gets one :class:`~sklearn.utils.Bunch` of the call's arguments, by name,
    with the metric's defaults filled in.
    """

    def decorator(handler):
        HANDLERS[name] = handler
        return handler

    return decorator


def dask_aware(metric):
    """Decorator: route calls whose labels, scores or weights are Dask collections.

    A Dask call with ``groups=`` (per-group values) raises NotImplementedError.

    Parameters
    ----------
    metric : callable
        A metric with arguments named ``y_true``, ``y_prob`` and ``sample_weight``.

    Returns
    -------
    callable
        The metric, with the same name, signature and docstring.
    """
    signature = inspect.signature(metric)

    @functools.wraps(metric)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        call = bound.arguments
        if uses_dask(call.get("y_true"), call.get("y_prob"), call.get("sample_weight")):
            if call.get("groups") is not None:
                raise NotImplementedError(
                    f"{metric.__name__} of Dask input computes the value of all rows, not "
                    "one per group: leave out `groups=`, or compute the Dask collections "
                    "first (calibration_audit audits groups of in-memory arrays)."
                )
            bound.apply_defaults()
            arguments = bound.arguments
            if "convention" in arguments:  # no groups, so "auto" is the top label
                arguments["convention"] = resolve_convention(
                    arguments["convention"], None, by_group=False
                )
            return HANDLERS[metric.__name__](Bunch(**arguments))
        return metric(*args, **kwargs)

    return wrapper
