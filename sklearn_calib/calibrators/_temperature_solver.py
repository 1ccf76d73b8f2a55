"""Exact NLL temperature fit of logits: the passes over the logits, and the warnings.

The search is the library's one Newton search on the inverse temperature beta = 1/T
(:mod:`sklearn_calib._temperature`). One evaluation of the NLL and both derivatives is
one pass over the (n, K) logits, in row chunks that stay in cache, in the logits' own
precision (float32 logits are not copied to float64, unless a gap to the row maximum
could leave float32's range) with float64 accumulation over rows; the gaps of the true
classes and the row maxima are computed once. The exponentials are taken by torch on
the CPU (its vectorised ``exp`` on its threads is several times numpy's). Large inputs
start from the optimum of an evenly spaced subsample.
"""

import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from .._temperature import BETA_MAX, BETA_MIN, FlatNLL, newton_search, warm_start
from ._base import normalised_weights, weighted_subsample

#: Newton stops when a step changes beta by at most this fraction, per logits dtype.
RTOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-6}
#: Number of (rows x classes) entries per chunk of a pass.
_CHUNK_ENTRIES = 1 << 18
#: Rows of the subsample that gives the starting point of a large fit.
_SUBSAMPLE_ROWS = 1 << 14


def _float32_gaps_overflow(logits):
    """Whether a gap ``z_ik - max_k z_ik`` of float32 logits can leave float32's range."""
    limit = np.finfo(np.float32).max / 2
    return bool(max(-float(logits.min()), float(logits.max())) > limit)


class NLLPasses:
    """Evaluate the weighted mean NLL of ``softmax(beta * logits)`` and its derivatives.

    Parameters
    ----------
    logits : ndarray of shape (n_samples, n_classes), float32 or float64
        Finite logits.
    y_index : ndarray of shape (n_samples,)
        Column of the true class of each row.
    sample_weight : ndarray of shape (n_samples,) or None
        Non-negative weights with a positive sum.
    """

    def __init__(self, logits, y_index, sample_weight=None):
        self.logits = np.ascontiguousarray(logits)
        if self.logits.dtype == np.float32 and _float32_gaps_overflow(self.logits):
            self.logits = self.logits.astype(np.float64)
        n_samples, n_classes = self.logits.shape
        self.row_max = self.logits.max(axis=1)
        rows = np.arange(n_samples)
        self.true_gap = self.logits[rows, y_index].astype(np.float64) - self.row_max
        self.weight = normalised_weights(n_samples, sample_weight)
        self.chunk = max(1, _CHUNK_ENTRIES // n_classes)
        self.ones = np.ones(n_classes, dtype=self.logits.dtype)

    def __call__(self, beta):
        """Return ``(nll, first derivative, second derivative)`` at ``beta``, in float64."""
        dtype = self.logits.dtype.type
        scale = dtype(beta)
        nll = grad = hess = 0.0
        for start in range(0, self.logits.shape[0], self.chunk):
            stop = start + self.chunk
            gap = self.logits[start:stop] - self.row_max[start:stop, None]
            expo = gap * scale
            # torch's vectorised exp, on its threads: several times numpy's
            torch.from_numpy(expo).exp_()
            sum0 = (expo @ self.ones).astype(np.float64)
            expo *= gap
            mean = (expo @ self.ones).astype(np.float64) / sum0
            second = np.einsum("ij,ij->i", expo, gap).astype(np.float64) / sum0
            weight = self.weight[start:stop]
            true_gap = self.true_gap[start:stop]
            nll += weight @ (np.log(sum0) - beta * true_gap)
            grad += weight @ (mean - true_gap)
            hess += weight @ (second - mean * mean)
        return nll, grad, hess


def _every_weighted_row_ties(logits, sample_weight):
    """Whether all scores are equal within every row of positive weight."""
    ties = logits.max(axis=1) == logits.min(axis=1)
    return bool(ties.all() if sample_weight is None else ties[sample_weight > 0].all())


def fit_inverse_temperature(logits, y_index, sample_weight=None):
    """Return the inverse temperature that minimises the weighted NLL, and the pass count.

    Parameters
    ----------
    logits : ndarray of shape (n_samples, n_classes), float32 or float64
        Finite logits.
    y_index : ndarray of shape (n_samples,)
        Column of the true class of each row.
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative weights with a positive sum.

    Returns
    -------
    beta : float
        The minimiser of the NLL in [BETA_MIN, BETA_MAX]. When the NLL still decreases at
        a bound (for instance when the scores separate the classes), the bound is returned
        with a ``ConvergenceWarning``. When the NLL does not depend on beta (the scores tie
        within every row), 1 is returned with a ``UserWarning``.
    n_passes : int
        Number of passes over the full logits.
    """
    rtol = RTOL.get(np.dtype(logits.dtype), RTOL[np.dtype(np.float64)])
    beta = 1.0
    n_samples = logits.shape[0]
    if n_samples > 4 * _SUBSAMPLE_ROWS:
        rows, weight = weighted_subsample(n_samples, _SUBSAMPLE_ROWS, sample_weight)
        if rows is not None:
            beta = subsample_start(logits[rows], y_index[rows], weight, rtol)
    return solve_inverse_temperature(
        NLLPasses(logits, y_index, sample_weight),
        beta,
        rtol,
        lambda: _every_weighted_row_ties(logits, sample_weight),
    )


def subsample_start(logits, y_index, sample_weight, rtol):
    """The optimum of a subsample, to a looser tolerance: the start of a large fit."""
    return warm_start(NLLPasses(logits, y_index, sample_weight), rtol)


def solve_inverse_temperature(evaluate, beta, rtol, every_row_ties):
    """Minimise the NLL from ``beta`` (:func:`fit_inverse_temperature`'s search and warnings).

    Parameters
    ----------
    evaluate : callable
        ``evaluate(beta)`` returns the weighted mean NLL and its two derivatives (one pass
        over the data, as :class:`NLLPasses`).
    beta : float
        Starting point.
    rtol : float
        Relative tolerance on beta.
    every_row_ties : callable
        ``every_row_ties()`` says whether the scores tie within every weighted row (asked
        only when the NLL is flat).

    Returns
    -------
    beta : float
    n_passes : int
    """
    try:
        beta, n_passes, at_bound = newton_search(evaluate, beta, rtol)
    except FlatNLL:
        if every_row_ties():
            warnings.warn(
                "The NLL does not depend on the temperature (the scores tie within every "
                "row), so every temperature is optimal; the temperature is set to 1.",
                UserWarning,
                stacklevel=4,
            )
            return 1.0, 1
        # The rows that do not tie are so well separated that their derivatives round to
        # 0: the NLL still decreases as beta grows.
        beta, n_passes, at_bound = BETA_MAX, 1, True
    if at_bound:
        if beta == BETA_MAX:
            side, reason = "below", "the scores separate the classes"
        else:
            side, reason = "above", "the scores do not favour the true class on average"
        warnings.warn(
            f"The NLL-optimal temperature lies {side} the searched range "
            f"[{1 / BETA_MAX:g}, {1 / BETA_MIN:g}] (for example when {reason}); "
            f"the temperature is set to {1 / beta:g}.",
            ConvergenceWarning,
            stacklevel=4,
        )
    return beta, n_passes
