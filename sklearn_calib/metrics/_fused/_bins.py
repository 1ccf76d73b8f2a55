"""Bin sums of the binned errors and smECE's grid, each a numba kernel and its numpy twin.

- :func:`top_label_sums`: the per-bin weight, confidence and correctness sums of the top
  label over equal-width bins; numba reads the scores once, numpy bins them block by
  block with ``np.bincount``.
- :func:`classwise_sums`: the classwise ECE's per (group, class, bin) sums; numba bins
  each probability as it is read, numpy bins all the probabilities first (kept with the
  predictions) and sums them with ``np.bincount``.
- :func:`grid_sums`: smECE's linear-binning grid sums per group; numba takes every
  column in one pass, numpy one ``np.bincount`` per column.

Both paths add the same float64 terms in the same order, so they return the same sums
bit for bit. The grouped sums (a bootstrap's) read each group's rows together on
numba's path (a counting sort of the groups), so one group's sums stay in cache, and add
them in row order: the numpy path's additions.
"""

import numpy as np

from .._core._binning import assign_bins, blocked_bin_sums, uniform_bin_edges
from . import _switch


def top_label_sums(data, n_bins, block):
    """The top-label bin sums of ``expected_calibration_error`` in one read of the scores.

    Parameters
    ----------
    data : Predictions
        Checked predictions.
    n_bins : int
        Number of equal-width bins.
    block : int
        Rows per block of the sums.

    Returns
    -------
    sums : tuple of 3 ndarray of shape (n_bins,)
        Per-bin weight, confidence and correctness sums of the predictions' top-label
        scores (numba's path is chosen by the predictions' entries, as for their check).
    """
    score, outcome = data.scores("top_label")
    kernels = _switch.numba_kernels("top_label", data.proba.size)
    if kernels is None:
        edges = uniform_bin_edges(n_bins)
        return blocked_bin_sums(score, outcome, data.sample_weight, edges, block)
    weighted = data.sample_weight is not None
    with _switch.parallel_section(kernels):
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


def classwise_sums(data, n_bins, block, group, n_groups):
    """The classwise ECE's per (group, class, bin) sums.

    Parameters
    ----------
    data : Predictions
        Checked predictions.
    n_bins : int
        Number of equal-width bins per class.
    block : int
        Rows per block of the sums.
    group : ndarray of shape (n_samples,) of int or None
        Each row's group in ``[0, n_groups)``; None: one group.
    n_groups : int
        Number of groups.

    Returns
    -------
    sums : ndarray of shape (n_groups, 3 * n_classes * n_bins)
        The weights', probabilities' and true-class indicators' sums of each group.
    """
    proba = data.proba
    kernels = _switch.numba_kernels("classwise", proba.size)
    if kernels is None:
        return _numpy_classwise_sums(data, n_bins, block, group, n_groups)
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
        with _switch.parallel_section(kernels):
            return kernels.classwise_bins(*arguments).reshape(1, -1)
    sums = np.zeros((n_groups, 3 * proba.shape[1] * n_bins))
    order = kernels.group_order(group, n_groups)
    with _switch.parallel_section(kernels):
        kernels.grouped_classwise_bins(*arguments, *order, sums)
    return sums


def _numpy_classwise_sums(data, n_bins, block, group, n_groups):
    """numpy's :func:`classwise_sums`: the probabilities are binned in their own precision
    (once per predictions), and each block's bins summed with ``np.bincount``; the
    indicator is 1 on each row's true class only, so its sums run over one entry per row."""
    y_index, proba, sample_weight = data.y_index, data.proba, data.sample_weight
    n_rows, n_classes = proba.shape
    bins = data.derived(("classwise_bins", n_bins), lambda: _probability_bins(proba, n_bins, block))
    n_cells = n_classes * n_bins
    size = (1 if group is None else n_groups) * n_cells
    offsets = np.arange(n_classes) * n_bins
    sums = np.zeros((3, size))
    for start in range(0, n_rows, block):
        rows = slice(start, start + block)
        cell = bins[rows] + offsets
        if group is not None:
            cell += (group[rows] * n_cells)[:, None]
        true_cell = np.take_along_axis(cell, y_index[rows, None], axis=1)[:, 0]
        weight = None if sample_weight is None else sample_weight[rows]
        repeated = None if weight is None else np.repeat(weight, n_classes)
        mass = proba[rows].ravel() if weight is None else proba[rows].ravel() * repeated
        sums[0] += np.bincount(cell.ravel(), repeated, minlength=size)
        sums[1] += np.bincount(cell.ravel(), mass, minlength=size)
        sums[2] += np.bincount(true_cell, weight, minlength=size)
    return sums.reshape(3, -1, n_cells).transpose(1, 0, 2).reshape(size // n_cells, -1)


def _probability_bins(proba, n_bins, block):
    """The equal-width bin of every probability, in the probabilities' precision (uint16)."""
    edges = uniform_bin_edges(n_bins)
    bins = np.empty(proba.shape, dtype=np.uint16 if n_bins <= 1 << 16 else np.intp)
    for start in range(0, proba.shape[0], block):
        rows = slice(start, start + block)
        bins[rows] = assign_bins(proba[rows].ravel(), edges).reshape(-1, proba.shape[1])
    return bins


def _padded_edges(n_bins, dtype):
    """The inner edges of ``n_bins`` equal-width bins in ``dtype``, between -inf and +inf
    (the edges the kernels' bin lookup takes)."""
    edges = uniform_bin_edges(n_bins).astype(dtype)
    edges[0], edges[-1] = -np.inf, np.inf
    return edges


def grid_sums(index, frac, columns, n_points, group, n_groups):
    """smECE's linear-binning grid sums of each column per group, in one pass.

    Each row adds ``1 - frac`` of its value at its cell's lower grid point and ``frac``
    at the upper one.

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
    sums : ndarray of shape (len(columns), n_groups, n_points)
    """
    kernels = _switch.numba_kernels("grid", index.shape[0] * len(columns))
    if kernels is None:
        key = group * n_points + index
        cells = np.concatenate([key, key + 1])
        size = n_groups * n_points
        return np.stack(
            [
                np.bincount(cells, np.concatenate([column * (1.0 - frac), column * frac]), size)
                for column in columns
            ]
        ).reshape(len(columns), n_groups, n_points)
    sums = np.zeros((len(columns), n_groups, n_points))
    starts, order = kernels.group_order(group, n_groups)
    with _switch.parallel_section(kernels):
        kernels.grouped_grid_sums(index, frac, np.stack(columns, axis=1), starts, order, sums)
    return sums
