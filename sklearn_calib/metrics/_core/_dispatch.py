"""Routing of Dask collections to the chunked metrics, without importing Dask.

A metric function decorated with :func:`dask_aware` runs as before on arrays; given a
Dask collection (an object with a ``__dask_graph__`` method: a Dask array, DataFrame or
Series) it calls the handler that :mod:`._dask_metrics` registered under its name, which
accumulates chunk by chunk and merges. Dask is imported only then, so a user without
Dask never imports it.
"""

import functools
import inspect

from sklearn.utils import Bunch

from ..._dask_chunks import uses_dask
from .._functions._predictions import resolve_convention

#: Handlers of Dask input, by metric name (filled by ``_dask``).
HANDLERS = {}


def register(name):
    """Decorator: make a function the Dask handler of the metric ``name``.

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
