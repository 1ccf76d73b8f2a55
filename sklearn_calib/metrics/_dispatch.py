"""Routing of Dask collections to the chunked metrics, without importing Dask.

A metric function decorated with :func:`dask_aware` runs as before on arrays; given a
Dask collection (an object with a ``__dask_graph__`` method: a Dask array, DataFrame or
Series) it calls the handler that :mod:`._dask_metrics` registered under its name, which
accumulates chunk by chunk and merges. Dask is imported only then, so a user without
Dask never imports it.
"""

import functools

from .._dask_chunks import uses_dask

#: Handlers of Dask input, by metric name (filled by ``_dask``).
HANDLERS = {}


def register(name):
    """Decorator: make a function the Dask handler of the metric ``name``."""

    def decorator(handler):
        HANDLERS[name] = handler
        return handler

    return decorator


def dask_aware(metric):
    """Decorator: route calls whose labels, scores or weights are Dask collections.

    Parameters
    ----------
    metric : callable
        ``metric(y_true, y_prob, *, ..., sample_weight=None)``.

    Returns
    -------
    callable
        The metric, with the same name, signature and docstring.
    """

    @functools.wraps(metric)
    def wrapper(y_true, y_prob, *args, **kwargs):
        if uses_dask(y_true, y_prob, kwargs.get("sample_weight")):
            return HANDLERS[metric.__name__](y_true, y_prob, *args, **kwargs)
        return metric(y_true, y_prob, *args, **kwargs)

    return wrapper
