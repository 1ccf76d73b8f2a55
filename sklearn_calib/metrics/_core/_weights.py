"""How the metrics read sample weights.

Rows of weight 0 stand for no sample. A regulariser that scales with the weights scales
with the mean positive weight. Where a metric needs a number of samples, integer weights
are counts of repeated rows, and other weights stand for as many samples as there are
positive weights. Sums of squared weights are taken on weights rescaled by a power of two,
which is exact and keeps the squares from overflowing or underflowing whatever the
weights' scale: by one power for all the weights in memory (:func:`unit_scale`); per
range of scale where sums of squares add up over batches (:func:`square_range`).
"""

import numpy as np

#: Integer weights below this are counts of repeated rows (every float beyond is an integer).
_LARGEST_COUNT = 2.0**53
#: Ranges of scale whose squared weights are summed apart: below 2^-300, below 2^300, above.
SQUARE_RANGES = 3
#: The power of two that scales the weights of the middle range's neighbours to it.
_RANGE_SHIFT = 700


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
    if not non_counts(sample_weight):
        return float(sample_weight.sum())
    return float(np.count_nonzero(sample_weight))


def non_counts(sample_weight):
    """Return how many weights are not counts of repeated rows (for :func:`sample_count`).

    Parameters
    ----------
    sample_weight : ndarray or torch.Tensor of shape (n_samples,)
        Non-negative weights.

    Returns
    -------
    count : integer scalar (of the input's kind)
        The weights that are not integers or lie at 2**53 or beyond.
    """
    return ((sample_weight % 1 != 0) | (sample_weight >= _LARGEST_COUNT)).sum()


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


def square_range(weight):
    """Return each weight's range of scale (0, 1 or 2) for summing its square.

    The weights of range ``r``, multiplied by ``2 ** range_exponent(r)``, lie in
    ``[2^-400, 2^400)`` (or are 0), so their squares, and sums of up to 2^200 of them,
    neither overflow nor underflow; sums of squares kept per range add across batches
    whatever their weights' scale, and :func:`combined_squares` joins them.

    Parameters
    ----------
    weight : ndarray or torch.Tensor of shape (n_samples,)
        Non-negative finite weights.

    Returns
    -------
    ranges : integer array of the input's kind
    """
    return (weight >= 2.0**-300) * 1 + (weight >= 2.0**300) * 1


def range_exponent(ranges):
    """Return the power of two that scales the weights of each range of :func:`square_range`."""
    return _RANGE_SHIFT * (1 - ranges)


def combined_squares(squares):
    """Join sums of squared weights kept per range of scale.

    Parameters
    ----------
    squares : ndarray of shape (SQUARE_RANGES, ...)
        Sums of ``(w * 2 ** range_exponent(r))^2`` over the weights of each range ``r``.

    Returns
    -------
    total : ndarray of shape (...)
        The sums of ``(w * factor)^2`` over all weights; the smaller ranges' share
        underflows only where it is below float64's precision.
    factor : float
        ``2 ** range_exponent(r)`` of the largest range present: weighted sums multiplied
        by it are in the scale of ``total``.
    """
    present = [r for r in range(SQUARE_RANGES) if np.any(squares[r])]
    top = present[-1] if present else 1
    total = sum(
        np.ldexp(squares[r], 2 * (range_exponent(top) - range_exponent(r)))
        for r in range(SQUARE_RANGES)
    )
    return total, float(np.ldexp(1.0, range_exponent(top)))
