"""Placeholder."""

from . import _metrics, _report  # noqa: F401  (they register the Dask handlers)
