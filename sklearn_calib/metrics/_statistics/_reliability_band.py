"""Simultaneous confidence bands of a reliability curve, and the test they invert
(Dimitriadis, Dümbgen, Henzi, Puke and Ziegel 2023).

The reliability curve ``r(s) = P(outcome | score = s)`` is assumed non-decreasing. The
scores are cut into blocks of consecutive values; for every run of blocks, the outcomes
are independent Bernoulli variables whose mean lies between ``r`` at the run's smallest
and largest score, so a one-sided Clopper-Pearson bound of the run's mean at level
``alpha / (N (N + 1))`` (``N`` blocks, ``N (N + 1) / 2`` runs, two sides) bounds ``r``
there, and all bounds hold together with probability ``1 - alpha`` (Bonferroni). The
lower band at a score is the largest lower bound of a run ending at or below it, the
upper band the smallest upper bound of a run starting at or above it.

The blocks are the distinct scores (``decimals=None``, ``O(N^2)`` runs) or the scores
rounded to ``decimals`` (at most ``10^decimals + 1`` blocks whatever the number of
samples; the lower band rounds up and the upper band down, so both stay honest). A run's
bound is computed only when it beats the band found so far: its mean must exceed the
band, and the binomial tail at the band (a regularised incomplete beta, cheaper than its
inverse) must fall below the level.
"""

import numpy as np
from scipy.special import betainc, betaincinv
from sklearn.utils import Bunch

from ..._validation import check_confidence_level, resolve_classes
from .._functions._predictions import check_predictions


def lower_band(successes, trials, n_blocks, alpha):
    """The lower band of several problems on a common grid of blocks.

    Parameters
    ----------
    successes, trials : ndarray of shape (n_problems, n_grid)
        Outcomes and samples of each block, in increasing order of score; a block of no
        sample stands for none.
    n_blocks : ndarray of shape (n_problems,)
        Number of blocks with samples (the Bonferroni count).
    alpha : float
        One minus the confidence level of the two-sided band.

    Returns
    -------
    lower : ndarray of shape (n_problems, n_grid)
        The band at each block: the largest one-sided Clopper-Pearson lower bound of a
        run of blocks ending at or before it.
    """
    n_problems, n_grid = trials.shape
    level = (alpha / (n_blocks * (n_blocks + 1.0)))[:, None]
    cumulative = np.zeros((2, n_problems, n_grid + 1))
    np.cumsum(successes, axis=1, out=cumulative[0, :, 1:])
    np.cumsum(trials, axis=1, out=cumulative[1, :, 1:])
    lower = np.zeros((n_problems, n_grid))
    current = np.zeros((n_problems, 1))
    for end in range(n_grid):
        runs = cumulative[:, :, end + 1, None] - cumulative[:, :, : end + 1]
        hits, size = runs
        misses = size - hits
        with np.errstate(divide="ignore", invalid="ignore"):
            candidate = (hits > 0) & (hits > current * size)
        rows, starts = np.nonzero(candidate)
        if rows.size:
            shape = (hits[rows, starts], misses[rows, starts] + 1.0)
            tail = betainc(*shape, current[rows, 0])  # P(Binomial(size, band) >= hits)
            beating = tail < level[rows, 0]
            if beating.any():
                rows = rows[beating]
                bound = betaincinv(shape[0][beating], shape[1][beating], level[rows, 0])
                np.maximum.at(current[:, 0], rows, bound)
        lower[:, end] = current[:, 0]
    return lower


def _blocks(score, outcome, decimals, up):
    """Blocks of consecutive scores: their outcomes, sizes and anchor scores.

    The anchor is the largest score of a block for the lower band (``up``, scores rounded
    up) and the smallest for the upper band.
    """
    if decimals is None:
        keys = score
    else:
        scaled = score * 10.0**decimals
        keys = np.ceil(scaled) if up else np.floor(scaled)
    distinct, block = np.unique(keys, return_inverse=True)
    trials = np.bincount(block, minlength=distinct.size).astype(np.float64)
    successes = np.bincount(block, weights=outcome, minlength=distinct.size)
    anchor = np.full(distinct.size, -np.inf if up else np.inf)
    (np.maximum if up else np.minimum).at(anchor, block, score)
    return successes, trials, anchor


def _band(score, outcome, alpha, decimals):
    """The lower band at its anchors and the upper band at its anchors."""
    successes, trials, lower_anchor = _blocks(score, outcome, decimals, up=True)
    lower = lower_band(successes[None], trials[None], np.array([trials.size]), alpha)[0]
    failures, trials, upper_anchor = _blocks(score, 1.0 - outcome, decimals, up=False)
    reversed_lower = lower_band(
        failures[None, ::-1], trials[None, ::-1], np.array([trials.size]), alpha
    )
    return lower_anchor, lower, upper_anchor, 1.0 - reversed_lower[0, ::-1]


def _scores_and_outcomes(y_true, y_prob, pos_label, labels):
    """The score and outcome of each sample: top label, or the class ``pos_label``."""
    data = check_predictions(y_true, y_prob, labels=labels)
    if pos_label is None:
        score, outcome = data.scores("top_label")
        return score.astype(np.float64), outcome.astype(np.float64)
    if data.n_classes != 2:
        raise ValueError(
            f"Expected a binary problem for `pos_label`, got {data.n_classes} classes; "
            "leave `pos_label=None` for the top-label curve."
        )
    y = np.asarray(y_true)
    classes = resolve_classes(y.ravel() if y.ndim == 2 else y, labels, 2)
    column = np.flatnonzero(classes == pos_label)
    if column.size != 1:
        raise ValueError(
            f"Expected `pos_label` to be one of the classes {classes.tolist()}, got {pos_label!r}."
        )
    score = data.proba[:, column[0]].astype(np.float64)
    return score, (data.y_index == column[0]).astype(np.float64)


def _check_decimals(decimals):
    if decimals is None:
        return None
    if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)) or decimals < 0:
        raise ValueError(f"Expected `decimals` to be None or an integer >= 0, got {decimals!r}.")
    return int(decimals)


def reliability_band(
    y_true, y_prob, *, confidence_level=0.95, pos_label=None, labels=None, decimals=2
):
    """Simultaneous confidence band of the reliability curve (Dimitriadis et al. 2023).

    The band covers the whole reliability curve ``r(s) = P(outcome | score = s)`` (the
    fraction of correct predictions at top-label confidence ``s``, or of the class
    ``pos_label`` at its predicted probability ``s``) with probability at least
    ``confidence_level``, for every sample size, if ``r`` is non-decreasing and the
    outcomes are independent given the scores: the pointwise intervals of
    :func:`reliability_diagram` each cover one bin's accuracy, not all at once. The band
    holds the non-decreasing curves that no one-sided Clopper-Pearson bound of a run of
    consecutive blocks of scores contradicts, each bound at level ``alpha / (N (N + 1))``
    for ``N`` blocks.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    confidence_level : float, default=0.95
        Probability that the band covers the whole curve, in (0, 1).
    pos_label : int, float, bool or str, default=None
        For a binary problem, the band of this class's curve; None for the top-label
        curve (confidence against accuracy).
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    decimals : int or None, default=2
        Blocks of the scores rounded to this many decimals (at most ``10^decimals + 1``
        blocks: the cost does not grow with the samples, and the band steps at least
        ``10^-decimals`` apart); None for a block per distinct score, the finest band,
        whose cost grows with the square of the distinct scores.

    Returns
    -------
    band : :class:`~sklearn.utils.Bunch`
        ``scores`` (increasing, from 0 to 1), ``lower`` and ``upper`` at each: between
        two consecutive scores the lower band keeps the value of the left one and the
        upper band that of the right one (``lower[i]`` on ``[scores[i],
        scores[i + 1])``, ``upper[i + 1]`` on ``(scores[i], scores[i + 1]]``);
        ``score_range``, the smallest and largest score of the samples; and
        ``confidence_level``.

    See Also
    --------
    calibration_equivalence_test : The test that certifies calibration within a
        tolerance, from this band.
    reliability_diagram : Per-bin accuracies with pointwise intervals.

    References
    ----------
    .. [1] T. Dimitriadis, L. Dümbgen, A. Henzi, M. Puke and J. Ziegel, "Honest
       calibration assessment for binary outcome predictions", Biometrika 110(3), 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.metrics import reliability_band
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(2000)
    >>> y = rng.random(2000) < p
    >>> band = reliability_band(y, p, pos_label=True)
    >>> bool(np.all(band.lower <= band.upper))
    True
    >>> bool(np.all((band.lower <= band.scores) & (band.scores <= band.upper)))
    True
    """
    level = check_confidence_level(confidence_level)
    decimals = _check_decimals(decimals)
    score, outcome = _scores_and_outcomes(y_true, y_prob, pos_label, labels)
    lower_anchor, lower, upper_anchor, upper = _band(score, outcome, 1.0 - level, decimals)
    grid = np.unique(np.concatenate([[0.0, 1.0], lower_anchor, upper_anchor]))
    below = np.searchsorted(lower_anchor, grid, side="right") - 1
    above = np.searchsorted(upper_anchor, grid, side="left")
    return Bunch(
        scores=grid,
        lower=np.where(below >= 0, lower[np.maximum(below, 0)], 0.0),
        upper=np.r_[upper, 1.0][above],
        score_range=(float(score.min()), float(score.max())),
        confidence_level=level,
    )


def band_deviation(band):
    """The largest distance from the diagonal that the band allows within the scores'
    range: ``sup max(s - lower(s), upper(s) - s)``."""
    scores, lower, upper = band.scores, band.lower, band.upper
    low, high = band.score_range
    left, right = scores[:-1], scores[1:]
    inside = (right > low) & (left < high)
    # on (left, right): s - lower(s) < right - lower(left), upper(s) - s < upper(right) - left
    gaps = np.maximum(np.minimum(right, high) - lower[:-1], upper[1:] - np.maximum(left, low))
    at_points = np.maximum(scores - lower, upper - scores)[(scores >= low) & (scores <= high)]
    return float(max(gaps[inside].max(initial=0.0), at_points.max(initial=0.0)))


def calibration_equivalence_test(
    y_true,
    y_prob,
    *,
    tolerance=0.05,
    confidence_level=0.95,
    pos_label=None,
    labels=None,
    decimals=2,
):
    """Certify calibration within a tolerance: the test that the band inverts.

    The null hypothesis is that the reliability curve strays ``tolerance`` or more from
    the diagonal somewhere in the scores' range; it is rejected, and calibration within
    ``tolerance`` certified at level ``1 - confidence_level``, when the simultaneous
    band (:func:`reliability_band`) lies within ``tolerance`` of the diagonal over that
    whole range. Failing to reject a test of perfect calibration
    (:func:`calibration_test`) says only that the data cannot tell; this says how close
    to calibrated the scores are shown to be.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    tolerance : float, default=0.05
        The largest distance from the diagonal to certify, in (0, 1].
    confidence_level : float, default=0.95
        Confidence of the band (one minus the test's level).
    pos_label : int, float, bool or str, default=None
        See :func:`reliability_band`.
    labels : array-like of shape (n_classes,), default=None
        See :func:`reliability_band`.
    decimals : int or None, default=2
        See :func:`reliability_band`.

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        ``certified`` (whether the null hypothesis is rejected), ``deviation`` (the
        smallest tolerance the band certifies: its largest distance from the diagonal
        within the scores' range), ``tolerance`` and ``band``.

    References
    ----------
    .. [1] T. Dimitriadis, L. Dümbgen, A. Henzi, M. Puke and J. Ziegel, "Honest
       calibration assessment for binary outcome predictions", Biometrika 110(3), 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.metrics import calibration_equivalence_test
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(20000)
    >>> y = rng.random(20000) < p
    >>> result = calibration_equivalence_test(y, p, pos_label=True, tolerance=0.15)
    >>> bool(result.certified), round(result.deviation, 3)
    (True, 0.119)
    """
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float, np.floating)):
        raise ValueError(f"Expected `tolerance` to be a number in (0, 1], got {tolerance!r}.")
    if not 0 < tolerance <= 1:
        raise ValueError(f"Expected `tolerance` to be a number in (0, 1], got {tolerance!r}.")
    band = reliability_band(
        y_true,
        y_prob,
        confidence_level=confidence_level,
        pos_label=pos_label,
        labels=labels,
        decimals=decimals,
    )
    deviation = band_deviation(band)
    return Bunch(
        certified=deviation < tolerance,
        deviation=deviation,
        tolerance=float(tolerance),
        band=band,
    )
