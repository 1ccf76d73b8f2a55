"""The tempered NLL's derivatives over a block of rows: a numba kernel and its numpy twin.

numba reads the exponentials once, summing each row's in column order; numpy takes three
row sums. The sums agree to rounding (about 1e-15 relative).
"""

from .._core._rows import dot, row_sums
from . import _switch


def tempered_moments(expo, gap, share, true_gap, totals, n_entries):
    """The tempered NLL's first and second derivatives in ``beta`` over a block of rows,
    in one read of its exponentials.

    Parameters
    ----------
    expo, gap : ndarray of shape (n_rows, n_classes)
        ``exp(beta * gap)`` and the logit gaps, float64; numpy's path overwrites ``expo``.
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
    derivatives : tuple of 2 float
        ``sum share * (mean - true_gap)`` and ``sum share * variance``, the mean and
        variance of each row's gap under ``softmax(beta * gap)``.
    """
    kernels = _switch.numba_kernels("tempered", n_entries)
    if kernels is None:
        return _moments(expo, gap, share, true_gap, totals)
    return kernels.tempered_moments(expo, gap, share, true_gap, totals)


def _moments(expo, gap, share, true_gap, totals):
    """numpy's :func:`tempered_moments`: the derivatives' terms of a block of rows from
    three row sums, its row totals written to ``totals`` (``expo`` is overwritten)."""
    totals[:] = row_sums(expo)
    expo *= gap
    mean = row_sums(expo) / totals
    expo *= gap
    square = row_sums(expo) / totals
    return dot(share, mean - true_gap), dot(share, square - mean * mean)
