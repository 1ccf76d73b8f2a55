"""Exact (Clopper-Pearson) intervals of a binomial proportion, with effective counts."""

import numpy as np
from scipy.stats import beta


def clopper_pearson(successes, trials, confidence_level):
    """Clopper-Pearson interval of ``successes / trials`` (elementwise).

    ``successes`` and ``trials`` may be non-integer effective counts (Kish's effective
    sample size of weighted data); the Beta quantiles are then interpolated. Entries with
    ``trials == 0`` get NaN.

    Parameters
    ----------
    successes : ndarray
        Number of successes, in ``[0, trials]``.
    trials : ndarray
        Number of trials, same shape.
    confidence_level : float
        Coverage, in (0, 1).

    Returns
    -------
    low, high : ndarray
        Same shape as ``trials``.
    """
    successes = np.asarray(successes, dtype=np.float64)
    trials = np.asarray(trials, dtype=np.float64)
    tail = (1.0 - confidence_level) / 2.0
    failures = trials - successes
    filled = trials > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(successes > 0, beta.ppf(tail, successes, failures + 1), 0.0)
        high = np.where(failures > 0, beta.ppf(1.0 - tail, successes + 1, failures), 1.0)
    return np.where(filled, low, np.nan), np.where(filled, high, np.nan)
