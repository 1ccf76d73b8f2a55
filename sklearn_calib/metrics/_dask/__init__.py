"""Metrics of Dask collections: the handlers of every function that takes them, and the
per-chunk passes they merge (``_chunks``); the metric functions route Dask input here
(``_core._dispatch``)."""

from . import _metrics, _report  # noqa: F401  (they register the statistics' handlers)
