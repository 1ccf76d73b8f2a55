"""How the metrics read sample weights.

Rows of weight 0 stand for no sample. A regulariser that scales with the weights scales
with the mean positive weight. Where a metric needs a number of samples, integer weights
are counts of repeated rows, and other weights stand for as many samples as there are
positive weights. Sums of squared weights are taken on weights rescaled by a power of two,
which is exact and keeps the squares from overflowing or underflowing whatever the
weights' scale.
"""

import numpy as np

#: Integer weights below this are counts of repeated rows (every float beyond is an integer).
_LARGEST_COUNT = 2.0**53


def sample_count(sample_weight, n_samples):
    """Return the number of samples that weighted rows stand for.

    Parameters
    ----------
    sample_weight : ndarray of shape (n_samples,) or None
        Non-negative weights.
    n_samples : int
        Number of rows.

    Returns
    -------
    count : float
        ``n_samples`` without weights; the sum of integer weights below 2**53 (counts of
        repeated rows; every larger float is an integer, so larger weights are not read
        as counts); otherwise the number of positive weights.
    """
    if sample_weight is None:
        return float(n_samples)
    if sample_weight.max() < _LARGEST_COUNT and np.array_equal(
        sample_weight, np.round(sample_weight)
    ):
        return float(sample_weight.sum())
    return float(np.count_nonzero(sample_weight))


def mean_weight(sample_weight):
    """Return the mean of the positive weights: the weight of a typical sample.

    Rows of weight 0 stand for no sample, so they do not lower it; it scales with the
    weights.

    Parameters
    ----------
    sample_weight : ndarray of shape (n_samples,) or None
        Non-negative weights with a positive sum.

    Returns
    -------
    mean : float
        1 without weights.
    """
    if sample_weight is None:
        return 1.0
    return float(sample_weight.sum()) / np.count_nonzero(sample_weight)


def unit_scale(sample_weight):
    """Return the power of two that brings the largest weight into [0.5, 1).

    Multiplying by it is exact, so ratios of weighted sums are unchanged, and the squares
    of the scaled weights neither overflow nor underflow.

    Parameters
    ----------
    sample_weight : ndarray of shape (n_samples,)
        Non-negative weights with a positive sum.

    Returns
    -------
    scale : float
    """
    _, exponent = np.frexp(sample_weight.max())
    return float(np.ldexp(1.0, -int(exponent)))
