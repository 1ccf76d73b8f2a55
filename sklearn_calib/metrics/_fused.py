"""Fused passes over predictions: numba kernels when numba is installed, numpy otherwise.

numba is an optional accelerator (the ``fast`` extra). Both implementations add the same
float64 terms in the same order, so they return the same sums bit for bit:

- :func:`top_label_sums`: the per-bin weight, confidence and correctness sums of the
  top label over equal-width bins (``max``/``argmax`` of each row, its bin, three
  weighted sums) of checked predictions, in the blocks of rows of ``binned_sums``, in
  one read of them (numba only: without it the metric bins the predictions' top-label
  scores, which gives the same sums).
- :func:`replicate_sums`: the Poisson bootstrap's replicate sums, each row's values
  times its Poisson(1) count of every replicate (:mod:`._poisson`).
"""

import functools
import importlib.util
import os

import numpy as np

from ._binning import uniform_bin_edges
from ._poisson import THRESHOLDS, counts_from_keys

#: Setting this environment variable to ``0`` makes the fused passes use numpy even with
#: numba installed (to compare the two, or to avoid numba's first-call compilation).
NUMBA_SWITCH = "SKLEARN_CALIB_NUMBA"
#: Rows per call of the numpy replicate sums (bounds its temporaries).
_REPLICATE_ROWS = 256


@functools.cache
def _load_numba_kernels():
    if importlib.util.find_spec("numba") is None:
        return None
    return importlib.import_module("sklearn_calib.metrics._numba_kernels")


def numba_kernels():
    """The numba kernels module, or None when numba is missing or switched off."""
    if os.environ.get(NUMBA_SWITCH, "1") == "0":
        return None
    return _load_numba_kernels()


def top_label_sums(data, n_bins, block):
    """The top-label bin sums of ``expected_calibration_error`` in one read of the rows.

    With numba, each row's maximum and its column, the maximum's bin among ``n_bins``
    equal-width bins and three weighted sums come from one pass over the probabilities.

    Parameters
    ----------
    data : Predictions
        Checked predictions.
    n_bins : int
        Number of bins.
    block : int
        Rows per block of the sums (those of ``binned_sums``, for the same additions).

    Returns
    -------
    sums : tuple of 3 ndarray of shape (n_bins,) or None
        Per-bin weight, confidence and correctness sums, equal bit for bit to those of
        ``binned_sums`` on the predictions' top-label scores; None when numba is not
        there, when the probabilities are not C-ordered, or when the predictions already
        hold their top-label scores (binning those is cheaper): the caller then bins
        the scores.
    """
    kernels = numba_kernels()
    proba = data.proba
    if kernels is None or not proba.flags.c_contiguous or data.has_scores("top_label"):
        return None
    weighted = data.sample_weight is not None
    sums = kernels.top_label_bins(
        proba,
        np.ascontiguousarray(data.y_index, dtype=np.int64),
        data.sample_weight if weighted else np.empty(0),
        weighted,
        uniform_bin_edges(n_bins)[1:-1].astype(proba.dtype),
        n_bins,
        block,
    )
    return sums[0], sums[1], sums[2]


def replicate_sums(base, cells, values, out):
    """Add ``count(i, r) * values[i, e]`` into ``out[cells[i, e], :, r]`` for every replicate.

    Parameters
    ----------
    base : ndarray of shape (n_rows,), uint64
        Row keys (:func:`sklearn_calib.metrics._poisson.row_keys`).
    cells : ndarray of shape (n_rows, n_entries), int64
        The cells each row adds to.
    values : ndarray of shape (n_rows, n_entries, n_values), float64
        What each row adds to each of its cells.
    out : ndarray of shape (n_cells, n_values, n_resamples), float64
        The replicates' sums, added to in place (rows in order, as one pass would).
    """
    kernels = numba_kernels()
    if kernels is not None:
        kernels.replicate_sums(
            base, cells, values, THRESHOLDS.astype(np.float64), out, kernels.thread_count()
        )
        return
    n_cells, n_values, n_resamples = out.shape
    flat = out.reshape(-1)
    cell_offsets = cells[:, :, None] * (n_values * n_resamples)
    offsets = cell_offsets + (np.arange(n_values) * n_resamples)[None, None, :]
    for start in range(0, base.shape[0], _REPLICATE_ROWS):
        rows = slice(start, start + _REPLICATE_ROWS)
        counts = counts_from_keys(base[rows], n_resamples).astype(np.float64)
        # (row, entry, value, replicate): each target's terms come row after row
        index = offsets[rows, :, :, None] + np.arange(n_resamples)
        added = values[rows, :, :, None] * counts.T[:, None, None, :]
        np.add.at(flat, index.ravel(), added.ravel())
