"""The one bin rule of sklearn_calib, shared by metrics, calibrators and plots, and the
linear binning of scores on a grid.

Bins are half-open on the left, ``(lower, upper]``, like the reference code of the papers,
except that a value of exactly 0 belongs to the first bin (the reference code drops it).
Values are compared with the edges in the values' own precision, so a float32 confidence
equal to ``float32(edge)`` lies in the bin below that edge.
"""

import functools

import numpy as np

from ..._validation import check_n_bins
from ._weights import sample_count


def uniform_bin_edges(n_bins):
    """Return the ``n_bins + 1`` edges of equal-width bins on [0, 1].

    Parameters
    ----------
    n_bins : int
        Number of bins.

    Returns
    -------
    edges : ndarray of shape (n_bins + 1,)
    """
    return np.linspace(0.0, 1.0, check_n_bins(n_bins) + 1)


def quantile_bin_edges(values, n_bins, sample_weight=None):
    """Return edges of equal-mass bins of ``values`` on [0, 1].

    The sorted values are split into ``n_bins`` groups whose sizes differ by at most one
    (the first ``n % n_bins`` groups are larger); each inner edge is the largest value of
    its group. Under the ``(lower, upper]`` rule, values tied at an edge all fall in the
    lower bin, so ties make bins unequal rather than splitting equal values apart; with
    fewer distinct values than bins some bins are empty.

    With ``sample_weight``, the same rule runs on the weighted count: integer weights are
    counts, so the edges are those of the data with each value repeated ``weight`` times
    (unit weights give the unweighted edges, zero-weight values never become edges).
    Other weights (and weights from 2**53 up) are first rescaled to sum to the number of
    positive weights, so that their scale does not matter (the rule of
    :func:`~sklearn_calib.metrics._core._weights.sample_count`).

    Parameters
    ----------
    values : ndarray of shape (n_samples,)
        Values in [0, 1], such as confidences.
    n_bins : int
        Number of bins.
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights with a positive sum.

    Returns
    -------
    edges : ndarray of shape (n_bins + 1,)
        Non-decreasing, first edge 0, last edge 1.
    """
    n_bins = check_n_bins(n_bins)
    if values.shape[0] == 0:
        raise ValueError("Expected at least one value to place quantile bins, got none.")
    # the value at a sorted position does not depend on how ties are ordered
    if sample_weight is None:
        inner = np.sort(values)[_group_ends(values.shape[0], n_bins)]
    else:
        order = np.argsort(values)
        cumulative = np.cumsum(sample_weight[order], dtype=np.float64)
        count = sample_count(sample_weight, values.shape[0])
        if count != cumulative[-1]:
            cumulative *= count / cumulative[-1]
        position = _group_ends(cumulative[-1], n_bins)
        # The item at (0-based) position j of the expanded data covers the cumulative
        # weight (j, j + 1]; the sorted value covering its middle ends the group.
        group_ends = np.searchsorted(cumulative, position + 0.5, side="left")
        inner = values[order[np.minimum(group_ends, values.shape[0] - 1)]]
    return np.concatenate([[0.0], inner.astype(np.float64), [1.0]])


def _group_ends(total, n_bins):
    """Return the 0-based position of the last of each of the first ``n_bins - 1`` groups.

    ``total`` items are split into ``n_bins`` groups whose sizes differ by at most one, the
    first ``total % n_bins`` groups being larger; ``total`` may be a non-integer count.
    """
    size = total // n_bins
    larger = total - size * n_bins
    bins = np.arange(1, n_bins)
    return np.maximum(bins * size + np.minimum(bins, larger) - 1, 0)


#: Right shift of a float's bit pattern that keys the lookup table of :func:`assign_bins`:
#: 2**7 keys per power of two, so one key spans at most 1/256 of [0.5, 1]; the tables have
#: 2**15 + 1 (float32) and 2**18 + 1 (float64) entries.
_KEY_SHIFT = {np.dtype(np.float32): 16, np.dtype(np.float64): 45}
_KEY_UINT = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}
#: Below this many values a binary search is as fast as building the table.
_LOOKUP_MIN_SIZE = 1 << 15


@functools.lru_cache(maxsize=16)
def _cached_lookup_table(inner_bytes, dtype_str):
    dtype = np.dtype(dtype_str)
    table = _lookup_table(np.frombuffer(inner_bytes, dtype=dtype), dtype)
    if table is not None:
        for array in table:
            array.setflags(write=False)
    return table


def _lookup_table(inner, dtype):
    """Return (first bin, edge) per bit-pattern key of ``dtype`` values >= 0, or None.

    Non-negative floats order like their bit patterns, so all values sharing a key lie in
    one interval. When no interval holds more than one inner edge, the bin of a value is
    the bin of its interval's start plus one if it exceeds that interval's edge. The keys
    cover every pattern without the sign bit, plus one last key: the sign bit alone, that
    is ``-0.0``, which belongs to the first bin like ``0.0``.
    """
    shift, uint = _KEY_SHIFT[dtype], _KEY_UINT[dtype]
    sign_key = 1 << (8 * dtype.itemsize - 1 - shift)
    keys = np.arange(sign_key, dtype=uint) << uint(shift)
    starts = keys.view(dtype)
    ends = (keys | uint((1 << shift) - 1)).view(dtype)
    first = np.searchsorted(inner, starts, side="left")
    n_edges = np.searchsorted(inner, ends, side="left") - first
    if n_edges.max() > 1:
        return None
    edge = np.where(n_edges == 1, inner[np.minimum(first, len(inner) - 1)], np.inf)
    return np.append(first, 0), np.append(edge, np.inf).astype(dtype)


def assign_bins(values, edges):
    """Return the bin index of each value under the ``(lower, upper]`` rule.

    Large float32/float64 inputs in [0, 1] are placed through a lookup table keyed by the
    top bits of each value (exact, and about three times faster than a binary search whose
    branches the values' order cannot predict); other inputs by ``np.searchsorted``.

    Parameters
    ----------
    values : ndarray of shape (n_samples,)
        Values to place, normally in [0, 1]. Values below the first edge go to the first
        bin and values above the last edge to the last bin.
    edges : ndarray of shape (n_bins + 1,)
        Non-decreasing bin edges.

    Returns
    -------
    bin_index : ndarray of shape (n_samples,), dtype intp
        Integers in ``[0, n_bins - 1]``.
    """
    inner = np.asarray(edges[1:-1], dtype=values.dtype)
    if (
        values.dtype in _KEY_SHIFT
        and values.ndim == 1
        and values.shape[0] >= _LOOKUP_MIN_SIZE
        and inner.shape[0] > 0
        and inner[-1] <= 1
        and values.min() >= 0
    ):
        table = _cached_lookup_table(inner.tobytes(), values.dtype.str)
        if table is not None:
            first, edge = table
            uint = _KEY_UINT[values.dtype]
            # intp keys and np.take: fancy indexing with unsigned keys is several times slower.
            # As values.min() >= 0, the largest key is that of -0.0, the table's last.
            keys = np.right_shift(values.view(uint), uint(_KEY_SHIFT[values.dtype]))
            keys = keys.astype(np.intp)
            bins = np.take(first, keys)
            bins += values > np.take(edge, keys)
            return bins
    return np.searchsorted(inner, values, side="left")


def bin_sums(bin_index, n_bins, columns, sample_weight=None):
    """Sum per-sample quantities within each bin, in float64.

    Parameters
    ----------
    bin_index : ndarray of shape (n_samples,)
        Bin of each sample, from :func:`assign_bins`.
    n_bins : int
        Number of bins; empty bins get zeros.
    columns : sequence of ndarray of shape (n_samples,)
        Quantities to sum (for example confidence and correctness).
    sample_weight : ndarray of shape (n_samples,), default=None
        Weight of each sample.

    Returns
    -------
    counts : ndarray of shape (n_bins,)
        Number (or total weight) of samples in each bin.
    sums : list of ndarray of shape (n_bins,)
        Weighted sum of each column within each bin.
    """
    counts = np.bincount(bin_index, weights=sample_weight, minlength=n_bins).astype(np.float64)
    sums = []
    for column in columns:
        weights = column if sample_weight is None else column * sample_weight
        sums.append(np.bincount(bin_index, weights=weights, minlength=n_bins))
    return counts, sums


def blocked_bin_sums(score, outcome, sample_weight, edges, block):
    """Per-bin count, score sum and outcome sum of scores, filled block by block.

    Parameters
    ----------
    score, outcome : ndarray of shape (n_samples,)
        Scores in [0, 1] and whether each sample's event happened.
    sample_weight : ndarray of shape (n_samples,) or None
        Sample weights.
    edges : ndarray of shape (n_bins + 1,)
        Bin edges.
    block : int
        Values per block (their temporaries stay small and in cache).

    Returns
    -------
    counts, score_sums, outcome_sums : ndarray of shape (n_bins,)
        Weighted, in float64; the blocks' sums added in block order.
    """
    n_bins = edges.shape[0] - 1
    counts, score_sums, outcome_sums = np.zeros(n_bins), np.zeros(n_bins), np.zeros(n_bins)
    for start in range(0, score.shape[0], block):
        rows = slice(start, start + block)
        weight = None if sample_weight is None else sample_weight[rows]
        block_counts, (block_score, block_outcome) = bin_sums(
            assign_bins(score[rows], edges), n_bins, [score[rows], outcome[rows]], weight
        )
        counts += block_counts
        score_sums += block_score
        outcome_sums += block_outcome
    return counts, score_sums, outcome_sums


def linear_binning(score, n_points):
    """Return the grid cell of each score in [0, 1] and its position within the cell.

    The grid has ``n_points`` equally spaced points from 0 to 1; a score at 1 lies at the
    end of the last cell.
    """
    position = score * (n_points - 1)
    index = np.clip(position.astype(np.intp), 0, n_points - 2)
    return index, position - index
