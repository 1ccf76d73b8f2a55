"""Fused passes over predictions: numba kernels when numba is installed, numpy otherwise.

numba is an optional accelerator (the ``fast`` extra). Both implementations add the same
float64 terms in the same order, so they return the same sums bit for bit:

- :func:`top_label_sums`: the per-bin weight, confidence and correctness sums of the
  top label over equal-width bins (``max``/``argmax`` of each row, its bin, three
  weighted sums), in blocks of ``_TOP_LABEL_ROWS`` rows as ``binned_sums``; the numba
  kernel reads the probabilities once, with a summary of them (row sums, extreme
  entries) for the checks of the input.
- :func:`replicate_sums`: the Poisson bootstrap's replicate sums, each row's values
  times its Poisson(1) count of every replicate (:mod:`._poisson`).
"""

import functools
import importlib.util
import os

import numpy as np

from ._binning import uniform_bin_edges
from ._metrics import _TOP_LABEL_ROWS, binned_sums, scores_and_outcomes
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


def top_label_sums(proba, y_index, sample_weight, n_bins):
    """Per-bin sums of the top label over ``n_bins`` equal-width bins, in one pass.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Probabilities, float32 or float64.
    y_index : ndarray of shape (n_samples,)
        Column of each sample's true class.
    sample_weight : ndarray of shape (n_samples,) or None
        Sample weights.
    n_bins : int
        Number of bins.

    Returns
    -------
    counts, confidence_sums, correct_sums : ndarray of shape (n_bins,)
        Weighted, in float64; equal to those of ``binned_sums`` bit for bit.
    summary : ndarray of shape (4,) or None
        With numba: the smallest and largest row sum and entry of ``proba`` (NaN when
        it holds NaN); None from numpy, whose callers check the input themselves.
    """
    kernels = numba_kernels()
    if kernels is None:
        score, outcome = scores_and_outcomes(proba, y_index)
        _, counts, confidence, correct = binned_sums(
            score, outcome, sample_weight, n_bins, "uniform"
        )
        return counts, confidence, correct, None
    inner = uniform_bin_edges(n_bins)[1:-1].astype(proba.dtype)
    weighted = sample_weight is not None
    weight = sample_weight if weighted else np.empty(0)
    sums, summary = kernels.top_label_bins(
        np.ascontiguousarray(proba),
        np.ascontiguousarray(y_index, dtype=np.int64),
        weight,
        weighted,
        inner,
        n_bins,
        _TOP_LABEL_ROWS,
    )
    return sums[0], sums[1], sums[2], summary


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
