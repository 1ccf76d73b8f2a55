"""The Poisson bootstrap's replicate sums: each row's values times its Poisson(1) count of
every replicate, added into the replicates' cells; one implementation per backend.

numpy arrays take numba's kernel (the counts drawn and added as each row is read, each
thread a range of replicates) or its numpy twin (the counts of blocks of rows, added
with ``np.add.at``); both add row after row, so they give the same sums bit for bit.
Tensors are summed on their device by :func:`torch_replicate_sums`. The counts are those
of :mod:`sklearn_calib.metrics._core._poisson`, the same on every backend.
"""

import numpy as np

from .._core._poisson import THRESHOLDS, counts_from_keys, torch_poisson_counts
from . import _switch

#: Rows per call of the numpy replicate sums (bounds its temporaries).
_REPLICATE_ROWS = 256


def replicate_sums(base, cells, values, out, n_rows=None):
    """Add ``count(i, r) * values[i, e]`` into ``out[cells[i, e], :, r]`` for every replicate.

    Parameters
    ----------
    base : ndarray of shape (n_rows,), uint64
        Row keys (:func:`~sklearn_calib.metrics._core._poisson.row_keys`).
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
    kernels = _switch.numba_kernels("replicates", n_terms)
    if kernels is not None:
        thresholds = THRESHOLDS.astype(np.float64)
        with _switch.parallel_section(kernels):
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


def torch_replicate_sums(row_ids, key, cells, values, out):
    """:func:`replicate_sums` of tensors, on their device.

    Parameters
    ----------
    row_ids : torch.Tensor of shape (n_rows,), int64
        The rows' ids.
    key : int
        The generator's key (:func:`~sklearn_calib.metrics._core._poisson.seed_key`).
    cells : torch.Tensor of shape (n_rows, n_entries), int64
    values : torch.Tensor of shape (n_rows, n_entries, n_values), float64
    out : torch.Tensor of shape (n_cells, n_values, n_resamples), float64
        Added to in place.
    """
    import torch  # imported already: the ids are a tensor

    n_cells, n_values, n_resamples = out.shape
    counts = torch_poisson_counts(row_ids, key, n_resamples).to(torch.float64)
    flat = out.view(n_cells * n_values, n_resamples)
    offsets = torch.arange(n_values, device=cells.device)
    index = (cells[:, :, None] * n_values + offsets).reshape(-1)
    source = values.reshape(-1, 1) * counts.T.repeat_interleave(cells.shape[1] * n_values, dim=0)
    flat.index_add_(0, index, source)
