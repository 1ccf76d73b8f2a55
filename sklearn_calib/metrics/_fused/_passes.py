"""Fused passes over predictions: numba kernels when numba is installed, numpy otherwise.

numba is an optional accelerator (the ``fast`` extra). Both implementations add the same
float64 terms in the same order, so they return the same sums bit for bit (but for the
isotonic fits and the tempered moments, which agree to rounding):

- :func:`checked_top_label`: each row's maximum and its column, and the probability
  checks (entries in [0, 1], row sums near 1), in one read of the probabilities (numba
  only: without it the checks and the top-label scores take four reads).
- :func:`top_label_sums`: the per-bin weight, confidence and correctness sums of the
  top label over equal-width bins, in the blocks of rows of ``binned_sums`` (numba only:
  without it the metric calls ``binned_sums``, which gives the same sums).
- :func:`tempered_moments`: the row totals of the tempered exponentials and the
  derivatives of the tempered NLL over a block of rows, in one read of the exponentials
  (numba only: without it the decomposition takes three row sums; the sums agree to
  rounding, about 1e-15 relative).
- :func:`replicate_sums`: the Poisson bootstrap's replicate sums, each row's values
  times its Poisson(1) count of every replicate (:mod:`._poisson`).
- :func:`isotonic_scores`: each column's score against its isotonic fit, for the CORP
  decomposition (numba only: without it the decomposition pools ties and calls
  scikit-learn's ``isotonic_regression``). It adds one term per block of the fit, not
  per value: its sums agree with numpy's to rounding (about 1e-14 relative, numpy's
  the further from exact for the Brier score's cancelling terms).
- :func:`classwise_sums`: the classwise ECE's per (group, class, bin) sums, each
  probability binned as it is read (numba only: without it ``_classwise_sums`` bins
  all the probabilities first and sums them with ``np.bincount``).
- :func:`grid_sums`: smECE's linear-binning grid sums per group, every column in one
  pass (numba only: without it ``_grid_statistics`` sums each column with
  ``np.bincount``).

The grouped sums (a bootstrap's, :mod:`._resampling`) read each group's rows together
(a counting sort of the groups), so one group's sums stay in cache, and add them in
row order: the numpy path's additions.

Which path a pass takes is set by :data:`NUMBA_SWITCH`; by default numba takes the
passes on which its kernels save more than their first call in a process costs (they
are loaded from numba's cache then, or compiled): :data:`NUMBA_LOAD_NS`. numba is
imported at that first call, not with the package. numba's ``workqueue`` threading
layer (numba's fallback where neither TBB nor OpenMP is installed) aborts the process
when two threads run parallel kernels at once: under it the parallel kernels run one
at a time (:func:`_parallel_section`).
"""

import contextlib
import functools
import importlib.util
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._core._binning import uniform_bin_edges
from .._core._poisson import THRESHOLDS, counts_from_keys

#: The environment variable choosing the path of the fused passes: ``0`` numpy, ``1``
#: numba wherever it is installed, ``auto`` (the default) numba on the passes where it
#: saves more than :data:`NUMBA_LOAD_NS`.
NUMBA_SWITCH = "SKLEARN_CALIB_NUMBA"
_SWITCH_VALUES = ("0", "1", "auto")
#: Nanoseconds of a process's first numba call: numba's import, its threads, and the
#: kernels loaded from its cache (about 0.7 s on two cores; an empty cache compiles them,
#: which takes seconds).
NUMBA_LOAD_NS = 700_000_000
#: Nanoseconds the numba kernels save over numpy per value of each pass, measured on two
#: cores (10^6 x 10 predictions): per probability entry of the check and the ECE's bins
#: (numpy's column-wise maxima are nearly as fast), of the classwise bins and of the
#: isotonic fits; per row and column of smECE's grid sums; per entry of the tempered
#: NLL's gaps (a fit evaluates them tens of times); per term of the replicate sums.
_SAVED_NS = {
    "top_label": 2,
    "classwise": 25,
    "isotonic": 90,
    "grid": 50,
    "tempered": 100,
    "replicates": 90,
}
#: Rows per call of the numpy replicate sums (bounds its temporaries).
_REPLICATE_ROWS = 256
#: Probabilities with fewer entries are checked by numpy (numba's threads cost more).
_CHECKED_ELEMENTS = 1 << 16
#: Rows per parallel block of the numba probability checks.
_CHECKED_ROWS = 1 << 15
#: Threads of the isotonic fits (numpy's sort and the kernels release the GIL), and the
#: fewest entries worth starting them for.
_ISOTONIC_THREADS = 2
_THREADED_ENTRIES = 1 << 18
#: Held by a parallel kernel where numba's threading layer is not known to be thread-safe.
_PARALLEL_LOCK = threading.Lock()


@functools.cache
def _load_numba_kernels():
    if importlib.util.find_spec("numba") is None:
        return None
    return importlib.import_module("sklearn_calib.metrics._fused._numba_kernels")


def numba_kernels(kind, n_values):
    """The numba kernels module for a pass of ``kind`` over ``n_values`` values, or None
    for numpy's path.

    None when numba is missing, switched off (:data:`NUMBA_SWITCH` ``0``), or, by default,
    when the kernels would save less than :data:`NUMBA_LOAD_NS` on the pass; the first
    call that returns the module imports numba.
    """
    mode = os.environ.get(NUMBA_SWITCH) or "auto"
    if mode not in _SWITCH_VALUES:
        raise ValueError(
            f"Expected the environment variable {NUMBA_SWITCH} to be '0', '1' or 'auto', "
            f"got {mode!r}."
        )
    if mode == "0" or (mode == "auto" and n_values * _SAVED_NS[kind] < NUMBA_LOAD_NS):
        return None
    return _load_numba_kernels()


@contextlib.contextmanager
def _parallel_section(kernels):
    """Run the parallel kernels called inside one thread at a time, unless numba's threading
    layer is known to be thread-safe (TBB or OpenMP, once started): the workqueue layer
    aborts the process when two threads enter parallel code at once."""
    if kernels.threadsafe():
        yield
        return
    with _PARALLEL_LOCK:
        yield


def takes_probabilities(y_prob):
    """Whether :func:`checked_top_label` reads ``y_prob``: a C-ordered 2-D float32 or
    float64 array of at least 2 columns and ``_CHECKED_ELEMENTS`` entries, on which the
    fused passes take numba."""
    return (
        isinstance(y_prob, np.ndarray)
        and y_prob.ndim == 2
        and y_prob.dtype in (np.float32, np.float64)
        and y_prob.flags.c_contiguous
        and y_prob.dtype.isnative
        and y_prob.shape[1] >= 2
        and y_prob.size >= _CHECKED_ELEMENTS
        and numba_kernels("top_label", y_prob.size) is not None
    )


def checked_top_label(proba, y_index, tol):
    """The top-label scores of probabilities that pass the probability checks, from one
    read of the rows; None when they do not pass.

    The rows pass when every entry is finite and in [0, 1] and every row sums to 1 within
    ``tol``: exactly the probabilities that
    :func:`~sklearn_calib._validation.check_probabilities` returns unchanged (up to the
    rounding of its row sums). Other input goes to those checks, for their errors or
    their clipping.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Probabilities that :func:`takes_probabilities` takes.
    y_index : ndarray of shape (n_samples,), dtype int64
        Column of each sample's true class.
    tol : float
        Largest accepted deviation of a row sum from 1.

    Returns
    -------
    top_label : tuple of 2 ndarray of shape (n_samples,) or None
        Each row's maximum (in the input's precision) and whether its first maximal
        column (``argmax``) is the true class: :meth:`Predictions.scores` of
        ``"top_label"``.
    """
    kernels = numba_kernels("top_label", proba.size)
    with _parallel_section(kernels):
        confidence, correct, ranges = kernels.probability_rows(proba, y_index, _CHECKED_ROWS)
    lowest_sum, highest_sum, smallest, largest, finite = ranges
    if not (finite and smallest >= 0 and largest <= 1):
        return None
    if max(highest_sum - 1.0, 1.0 - lowest_sum) > tol:
        return None
    return confidence, correct


def top_label_sums(data, n_bins, block):
    """The top-label bin sums of ``expected_calibration_error`` in one read of the scores.

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
        Per-bin weight, confidence and correctness sums over ``n_bins`` equal-width
        bins, equal bit for bit to those of ``binned_sums`` on the predictions'
        top-label scores; None on numpy's path (chosen by the predictions' entries, as
        for their check): the caller then calls ``binned_sums``.
    """
    kernels = numba_kernels("top_label", data.proba.size)
    if kernels is None:
        return None
    score, outcome = data.scores("top_label")
    weighted = data.sample_weight is not None
    with _parallel_section(kernels):
        sums = kernels.score_bins(
            score,
            outcome,
            data.sample_weight if weighted else np.empty(0),
            weighted,
            _padded_edges(n_bins, score.dtype),
            n_bins,
            block,
        )
    return sums[0], sums[1], sums[2]


def tempered_moments(expo, gap, share, true_gap, totals, n_entries):
    """The tempered NLL's first and second derivatives in ``beta`` over a block of rows,
    in one read of its exponentials.

    Parameters
    ----------
    expo, gap : ndarray of shape (n_rows, n_classes)
        ``exp(beta * gap)`` and the logit gaps, float64.
    share : ndarray of shape (n_rows,)
        Each row's share of the total weight.
    true_gap : ndarray of shape (n_rows,)
        The gap of each row's true class.
    totals : ndarray of shape (n_rows,)
        Receives the row totals of ``expo``.
    n_entries : int
        The entries of the whole fit's gaps, of which these rows are a block (the path
        is chosen for the fit).

    Returns
    -------
    derivatives : tuple of 2 float or None
        ``sum share * (mean - true_gap)`` and ``sum share * variance``, the mean and
        variance of each row's gap under ``softmax(beta * gap)``; None on numpy's path:
        the caller then takes three row sums.
    """
    kernels = numba_kernels("tempered", n_entries)
    if kernels is None:
        return None
    return kernels.tempered_moments(expo, gap, share, true_gap, totals)


def replicate_sums(base, cells, values, out, n_rows=None):
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
    n_rows : int, default=None
        The rows of the whole batch these rows are a block of (the path is chosen for
        the batch); None: these rows.
    """
    n_rows = base.shape[0] if n_rows is None else n_rows
    n_terms = n_rows * cells.shape[1] * values.shape[2] * out.shape[2]
    kernels = numba_kernels("replicates", n_terms)
    if kernels is not None:
        thresholds = THRESHOLDS.astype(np.float64)
        with _parallel_section(kernels):
            kernels.replicate_sums(base, cells, values, thresholds, out, kernels.thread_count())
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


def isotonic_scores(proba, y_index, classes, sample_weight, clip):
    """Each column's summed score against the isotonic fit of its class's indicator.

    The numba counterpart of the CORP decomposition's numpy path: per column, the keys of
    ``_indicator_keys`` read straight from the rows, numpy's sort (an argsort with
    weights), and one pass pooling ties and running the pool-adjacent-violators
    algorithm; on many entries the columns are shared by ``_ISOTONIC_THREADS`` threads.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes), float32 or float64
        Checked probabilities.
    y_index : ndarray of shape (n_samples,), dtype int64
        Column of each sample's true class.
    classes : list of int
        The columns to fit.
    sample_weight : ndarray of shape (n_samples,) or None
        Sample weights; values of zero total weight are left out.
    clip : tuple of 2 float or None
        The log loss's clip of the fit; None for the Brier score.

    Returns
    -------
    scores : list of float or None
        Per column of ``classes``, in order: the weighted sum of the score of the fit
        against the indicator. None on numpy's path: the caller then takes it.
    """
    kernels = numba_kernels("isotonic", proba.shape[0] * len(classes))
    if kernels is None:
        return None
    bits = proba.view(np.uint32 if proba.dtype == np.float32 else np.uint64)
    weighted = sample_weight is not None
    low, high = (0.0, 1.0) if clip is None else clip

    def column_score(column):
        key = kernels.column_keys(bits, y_index, column)
        if weighted:
            order = np.argsort(key)
            key, weight = key[order], sample_weight[order]
        else:
            key.sort()
            weight = np.empty(0)
        return kernels.isotonic_score_sum(key, weight, weighted, clip is not None, low, high)

    if len(classes) == 1 or proba.shape[0] * len(classes) < _THREADED_ENTRIES:
        return [column_score(column) for column in classes]
    with ThreadPoolExecutor(_ISOTONIC_THREADS) as pool:
        return list(pool.map(column_score, classes))


def classwise_sums(data, n_bins, block, group, n_groups):
    """The classwise ECE's per (group, class, bin) sums in one read of the probabilities.

    Parameters
    ----------
    data : Predictions
        Checked predictions.
    n_bins : int
        Number of equal-width bins per class.
    block : int
        Rows per block of the sums (those of ``_classwise_sums``, for the same additions).
    group : ndarray of shape (n_samples,) of int or None
        Each row's group in ``[0, n_groups)``; None: one group.
    n_groups : int
        Number of groups.

    Returns
    -------
    sums : ndarray of shape (n_groups, 3 * n_classes * n_bins) or None
        The weights', probabilities' and true-class indicators' sums of each group,
        equal bit for bit to those of ``_classwise_sums``; None on numpy's path.
    """
    proba = data.proba
    kernels = numba_kernels("classwise", proba.size)
    if kernels is None:
        return None
    weighted = data.sample_weight is not None
    arguments = (
        proba,
        data.y_index,
        data.sample_weight if weighted else np.empty(0),
        weighted,
        _padded_edges(n_bins, proba.dtype),
        n_bins,
        block,
    )
    if group is None:
        with _parallel_section(kernels):
            return kernels.classwise_bins(*arguments).reshape(1, -1)
    sums = np.zeros((n_groups, 3 * proba.shape[1] * n_bins))
    order = kernels.group_order(group, n_groups)
    with _parallel_section(kernels):
        kernels.grouped_classwise_bins(*arguments, *order, sums)
    return sums


def _padded_edges(n_bins, dtype):
    """The inner edges of ``n_bins`` equal-width bins in ``dtype``, between -inf and +inf
    (the edges the kernels' bin lookup takes)."""
    edges = uniform_bin_edges(n_bins).astype(dtype)
    edges[0], edges[-1] = -np.inf, np.inf
    return edges


def grid_sums(index, frac, columns, n_points, group, n_groups):
    """smECE's linear-binning grid sums of each column per group, in one pass.

    Parameters
    ----------
    index, frac : ndarray of shape (n_rows,)
        Each row's grid cell and position within it (``linear_binning``).
    columns : sequence of ndarray of shape (n_rows,), float64
        The summed columns.
    n_points : int
        Number of grid points.
    group : ndarray of shape (n_rows,) of int
        Each row's group in ``[0, n_groups)``.
    n_groups : int
        Number of groups.

    Returns
    -------
    sums : ndarray of shape (len(columns), n_groups, n_points) or None
        Equal bit for bit to ``_grid_statistics`` of each column; None on numpy's path.
    """
    kernels = numba_kernels("grid", index.shape[0] * len(columns))
    if kernels is None:
        return None
    sums = np.zeros((len(columns), n_groups, n_points))
    starts, order = kernels.group_order(group, n_groups)
    with _parallel_section(kernels):
        kernels.grouped_grid_sums(index, frac, np.stack(columns, axis=1), starts, order, sums)
    return sums
