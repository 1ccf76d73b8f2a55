"""A binary model's scores miscalibrated differently in each group, with the truth."""

import numpy as np
from scipy.special import expit
from sklearn.utils import check_random_state

#: Default groups: shares, log-odds shifts and slopes of the true probabilities.
_PROPORTIONS = (0.4, 0.3, 0.2, 0.1)
_SHIFTS = (0.0, 0.7, -0.7, 0.0)
_SLOPES = (1.0, 1.0, 1.0, 0.5)


def _check_group_parameters(proportions, shifts, slopes):
    arrays = [np.asarray(value, dtype=np.float64) for value in (proportions, shifts, slopes)]
    names = ("group_proportions", "shifts", "slopes")
    for name, array in zip(names, arrays, strict=True):
        if array.ndim != 1 or array.shape[0] < 1 or not np.isfinite(array).all():
            raise ValueError(f"Expected `{name}` to be a non-empty 1-D sequence of finite numbers.")
    if len({array.shape[0] for array in arrays}) != 1:
        raise ValueError(
            "Expected `group_proportions`, `shifts` and `slopes` of one length (one entry per "
            f"group), got lengths {[array.shape[0] for array in arrays]}."
        )
    proportions = arrays[0]
    if (proportions < 0).any() or proportions.sum() <= 0:
        raise ValueError(
            f"Expected non-negative `group_proportions` with a positive sum, got {proportions}."
        )
    return proportions / proportions.sum(), arrays[1], arrays[2]


def make_miscalibrated_groups(
    n_samples=10000,
    *,
    group_proportions=_PROPORTIONS,
    shifts=_SHIFTS,
    slopes=_SLOPES,
    score_scale=1.5,
    random_state=None,
):
    """Scores of a binary model whose miscalibration differs between groups.

    Each sample draws a group ``g`` (with probabilities ``group_proportions``) and the
    model's log-odds ``z ~ N(0, score_scale^2)``; the model predicts ``sigmoid(z)``, while
    the true probability is ``sigmoid(slopes[g] z + shifts[g])``. A group with shift 0 and
    slope 1 is calibrated; a shift makes the model too low (positive) or too high
    (negative) there; a slope below 1 makes it overconfident. One temperature for all the
    groups cannot fix opposite shifts.

    Parameters
    ----------
    n_samples : int, default=10000
        Number of samples.
    group_proportions : sequence of float, default=(0.4, 0.3, 0.2, 0.1)
        Probability of each group (normalised to sum to 1).
    shifts : sequence of float, default=(0.0, 0.7, -0.7, 0.0)
        Log-odds shift of the truth in each group.
    slopes : sequence of float, default=(1.0, 1.0, 1.0, 0.5)
        Log-odds slope of the truth in each group.
    score_scale : float, default=1.5
        Standard deviation of the model's log-odds.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    scores : ndarray of shape (n_samples,)
        The model's positive-class probabilities.
    groups : ndarray of shape (n_samples,)
        Group of each sample, int64 in ``[0, n_groups)``.
    y : ndarray of shape (n_samples,)
        Labels 0 or 1 (int64) drawn from the true probabilities.
    proba_true : ndarray of shape (n_samples,)
        The true positive-class probabilities.

    Examples
    --------
    >>> from sklearn_calib.datasets import make_miscalibrated_groups
    >>> scores, groups, y, proba_true = make_miscalibrated_groups(1000, random_state=0)
    >>> scores.shape, sorted(set(groups.tolist()))
    ((1000,), [0, 1, 2, 3])
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)):
        raise ValueError(f"Expected `n_samples` to be an integer >= 1, got {n_samples!r}.")
    if n_samples < 1:
        raise ValueError(f"Expected `n_samples` to be an integer >= 1, got {n_samples!r}.")
    if not (np.isfinite(score_scale) and score_scale > 0):
        raise ValueError(f"Expected `score_scale` to be a positive number, got {score_scale!r}.")
    proportions, shifts, slopes = _check_group_parameters(group_proportions, shifts, slopes)
    rng = check_random_state(random_state)
    groups = rng.choice(proportions.shape[0], size=n_samples, p=proportions).astype(np.int64)
    log_odds = score_scale * rng.standard_normal(n_samples)
    proba_true = expit(slopes[groups] * log_odds + shifts[groups])
    y = (rng.random_sample(n_samples) < proba_true).astype(np.int64)
    return expit(log_odds), groups, y, proba_true
