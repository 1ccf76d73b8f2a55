"""Temperature scaling of probabilities, for the calibration/refinement split of the log
loss and the Brier score (Berta et al. 2025).

The probabilities' logarithms, less each row's largest, are the logit gaps; the inverse
temperature ``beta`` minimising the weighted NLL of ``softmax(beta * gap)`` is found by
the library's one temperature search (:mod:`sklearn_calib._temperature`, also that of
``TemperatureScaling``), here to a relative tolerance of 1e-12, from the optimum of an
evenly spaced subsample on many rows. Each pass over the rows is one read of the
exponentials (:func:`~sklearn_calib.metrics._fused._tempered.tempered_moments`).
"""

import numpy as np

from ..._temperature import BETA_MIN, FlatNLL, newton_search, warm_start
from .._core._rows import dot, row_blocks, row_sums
from .._functions._scores import log_loss_clip
from .._fused._tempered import tempered_moments

#: Probabilities are floored here before their logarithm becomes the logits (as the
#: calibrators' ``input="probabilities"`` do): a 1-D positive-class input loses about
#: 1e-16 in ``1 - p``, which must not matter.
LOGIT_FLOOR = 1e-12
#: Relative tolerance of the search of ``beta``.
TEMPERATURE_RTOL = 1e-12
#: Rows of the subsample whose optimal temperature starts the search on more rows.
_WARM_START_ROWS = 1 << 15


def _scaled_exponentials(gap, beta):
    """Yield each block of rows with ``exp(beta * gap)`` of its rows (a reused buffer)."""
    buffer = None
    for rows in row_blocks(gap.shape[0], gap.shape[1]):
        block = gap[rows]
        if buffer is None:
            buffer = np.empty_like(block)
        expo = buffer[: block.shape[0]]
        np.multiply(block, beta, out=expo)
        np.exp(expo, out=expo)
        yield rows, block, expo


class _TemperedNLL:
    """The weighted mean NLL of ``softmax(beta * gap)`` on fixed rows, as a function of
    ``beta``; it keeps the softmax's row totals at the last ``beta`` it was evaluated at.
    """

    def __init__(self, gap, true_gap, share):
        self.gap, self.true_gap, self.share = gap, true_gap, share
        self.beta, self.totals = None, None

    def __call__(self, beta):
        """The NLL at ``beta`` and its first and second derivative in ``beta``."""
        first = second = 0.0
        totals = np.empty(self.gap.shape[0])
        for rows, block, expo in _scaled_exponentials(self.gap, beta):
            share, true_gap = self.share[rows], self.true_gap[rows]
            parts = tempered_moments(expo, block, share, true_gap, totals[rows], self.gap.size)
            first += parts[0]
            second += parts[1]
        self.beta, self.totals = beta, totals
        value = dot(self.share, np.log(totals) - beta * self.true_gap)
        return value, first, second

    def row_totals(self, beta):
        """The row totals of ``exp(beta * gap)``, kept from the last evaluation if at ``beta``."""
        if self.beta == beta:
            return self.totals
        return exponential_row_totals(self.gap, beta)


def exponential_row_totals(gap, beta):
    """The row totals of ``exp(beta * gap)``."""
    totals = np.empty(gap.shape[0])
    for rows, _, expo in _scaled_exponentials(gap, beta):
        totals[rows] = row_sums(expo)
    return totals


def inverse_temperature(evaluate, start=1.0):
    """The ``beta`` minimising an NLL of logit gaps, from ``start``.

    The NLL is convex in ``beta``. Where it still decreases at a bound of the searched
    range (scores that separate the classes, or that favour the wrong ones on average)
    the bound is returned: the NLL there equals its infimum to rounding. Where it does
    not depend on ``beta`` (the scores tie within every row) the smallest ``beta`` is.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(beta)`` returns the NLL and its first two derivatives in ``beta``
        (:class:`_TemperedNLL`, or its sums over chunks).
    start : float, default=1.0
        Starting point.

    Returns
    -------
    beta : float
    """
    try:
        beta, _, _ = newton_search(evaluate, start, TEMPERATURE_RTOL)
    except FlatNLL:
        beta = BETA_MIN
    return beta


def fit_inverse_temperature(gap, true_gap, weight):
    """:func:`inverse_temperature` on all rows, started from the optimum of a subsample.

    On many rows, the optimum of an evenly spaced subsample starts Newton's steps close
    to the root, which saves most of the passes over all rows.

    Returns
    -------
    beta : float
    nll : _TemperedNLL
        The NLL on all rows, last evaluated near ``beta``.
    """
    nll = _TemperedNLL(gap, true_gap, weight / weight.sum())
    n_rows = gap.shape[0]
    rows = np.linspace(0, n_rows - 1, _WARM_START_ROWS).astype(np.intp)
    start = 1.0
    if n_rows > 2 * _WARM_START_ROWS and weight[rows].sum() > 0:
        sample = _TemperedNLL(gap[rows], true_gap[rows], weight[rows] / weight[rows].sum())
        start = warm_start(sample, TEMPERATURE_RTOL)
    return inverse_temperature(nll, start), nll


def _logit_gaps(proba, top):
    """``log max(p, floor)`` minus its row maximum, in float64, from the row maxima ``top``."""
    gap = np.empty(proba.shape)
    log_top = np.log(np.maximum(top.astype(np.float64), LOGIT_FLOOR))
    for rows in row_blocks(proba.shape[0], proba.shape[1]):
        block = gap[rows]
        np.maximum(proba[rows], LOGIT_FLOOR, out=block)
        np.log(block, out=block)
        block -= log_top[rows, None]
    return gap


def logit_gaps(proba, y_index, top):
    """The logit gaps of :func:`_logit_gaps` and those of each row's true class."""
    gap = _logit_gaps(proba, top)
    return gap, gap[np.arange(proba.shape[0]), y_index]


def tempered_scores(gap, true_gap, beta, totals, mixing, score):
    """Each row's score of ``softmax(beta * gap)`` mixed with ``mixing`` uniform mass.

    Parameters
    ----------
    gap, true_gap : ndarray of shape (n_rows, n_classes) and (n_rows,)
        The logit gaps (:func:`logit_gaps`).
    beta : float
        The inverse temperature.
    totals : ndarray of shape (n_rows,)
        The row totals of ``exp(beta * gap)`` (:meth:`_TemperedNLL.row_totals`).
    mixing : float
        The uniform distribution's weight in the mixture.
    score : {"brier", "log_loss"}
        The score.

    Returns
    -------
    values : ndarray of shape (n_rows,)
    """
    n_classes = gap.shape[1]
    true_proba = (1.0 - mixing) * np.exp(beta * true_gap) / totals + mixing / n_classes
    if score == "log_loss":
        return -np.log(np.clip(true_proba, *log_loss_clip(np.float64)))
    # sum_k r_k^2 of r = (1 - m) q + m / K, with sum_k q_k = 1
    squares = np.empty(gap.shape[0])
    for rows, _, expo in _scaled_exponentials(gap, beta):
        expo *= expo
        squares[rows] = row_sums(expo)
    squares *= (1.0 - mixing) ** 2 / totals**2
    squares += (2.0 - mixing) * mixing / n_classes
    return squares - 2.0 * true_proba + 1.0
