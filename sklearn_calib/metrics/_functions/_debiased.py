"""Kumar, Liang & Ma's debiased L2 calibration error over (by default equal-mass) bins."""

import numpy as np

from ..._validation import check_n_bins, check_option
from .._core._dispatch import dask_aware
from .._core._group_rows import overall_or_by_group
from .._core._resampling import ResamplingPlan, cell_sums
from .._core._weights import unit_scale
from ._binned import _STRATEGIES, binned_columns
from ._predictions import check_predictions


def _debiased_from_bins(weights, score_sums, outcome_sums, squares, positives):
    """Debiased L2 error from per-bin sums (leading axes, e.g. replicates, are kept).

    ``weights``, ``squares`` and ``positives`` are each bin's sum of weights, of squared
    weights and its number of positive weights. A bin with two or more positive weights
    contributes its share times ``(s_b - y_b)^2 - y_b (1 - y_b) k_b / (1 - k_b)`` with
    ``k_b = sum w^2 / (sum w)^2`` (``1 / n_b`` without weights).
    """
    used = positives >= 2
    safe = np.where(used, weights, 1.0)
    gap = (score_sums - outcome_sums) / safe
    outcome_mean = outcome_sums / safe
    kappa = np.where(used, squares / safe**2, 0.0)
    variance = outcome_mean * (1.0 - outcome_mean) * kappa / np.where(used, 1.0 - kappa, 1.0)
    share = weights / weights.sum(axis=-1, keepdims=True)
    squared = np.sum(np.where(used, share * (gap**2 - variance), 0.0), axis=-1)
    return np.sqrt(np.maximum(squared, 0.0))


def _debiased_bins(data, n_bins, strategy, convention):
    """Checked predictions binned: the bin of each sample and its summed columns.

    The weights are scaled by a power of two first (their scale does not matter), so that
    their squares neither overflow nor underflow.
    """
    n_bins = check_n_bins(n_bins)
    check_option(strategy, "strategy", _STRATEGIES)
    score, outcome = data.scores(convention)
    cell, columns = binned_columns(score, outcome, data.sample_weight, n_bins, strategy)
    if data.sample_weight is not None:
        scale = unit_scale(data.sample_weight)
        columns = [column * scale for column in columns]
    weight = columns[0]
    columns += [weight * weight, (weight > 0).astype(np.float64)]
    return cell, n_bins, columns


@dask_aware
def debiased_calibration_error(
    y_true,
    y_prob,
    *,
    n_bins=15,
    strategy="quantile",
    convention="auto",
    labels=None,
    sample_weight=None,
    groups=None,
):
    """Debiased L2 calibration error (Kumar, Liang & Ma 2019).

    The plug-in squared error of a bin, ``(s_b - y_b)^2`` (mean score against mean
    outcome), is biased upward by the sampling variance of ``y_b``; subtracting its
    unbiased estimate ``y_b (1 - y_b) / (n_b - 1)`` gives
    ``CE^2 = sum_b (n_b / n) [(s_b - y_b)^2 - y_b (1 - y_b) / (n_b - 1)]`` over the bins
    with ``n_b >= 2``, and the error is ``sqrt(max(CE^2, 0))``. Equal-mass bins (default)
    keep every bin's variance small. Its sample complexity is about ``sqrt(B)`` times
    better than the plug-in estimator's.

    With ``sample_weight``, a bin's ``1 / n_b`` becomes ``k_b = sum w^2 / (sum w)^2``
    (Kish's effective size), so the weights' scale does not matter; integer weights are
    read as importance weights here, not as repeated rows.

    There is no debiased L1 error (the ECE): ``|.|`` has no unbiased estimator near 0.
    The L1 variant of the authors' package (``get_ece_em(..., debias=True)``) subtracts
    the mean of plug-in errors recomputed with Gaussian-perturbed bin accuracies, a
    random heuristic that is neither unbiased nor always non-negative; use
    :func:`calibration_error_ci` for the uncertainty of the ECE instead.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    n_bins : int, default=15
        Number of bins.
    strategy : {"quantile", "uniform"}, default="quantile"
        Equal-mass bins (as the authors) or equal-width bins.
    convention : {"auto", "top_label", "positive_class"}, default="auto"
        What is binned; see :func:`expected_calibration_error`. The authors' package
        scores 1-D binary input as ``"positive_class"``.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    groups : array-like of shape (n_samples,) or (n_samples, n_columns), default=None
        Group of each sample, or columns whose distinct rows are the groups: when given,
        the error of each group's rows, as a dict from group label to value (see
        :func:`calibration_audit`).

    Returns
    -------
    error : float
        The debiased L2 error, in [0, 1].

    See Also
    --------
    expected_calibration_error : The plug-in estimator (``norm="l2"`` for its L2 form).

    References
    ----------
    .. [1] A. Kumar, P. Liang and T. Ma, "Verified Uncertainty Calibration", Advances in
       Neural Information Processing Systems 32, 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.scoring import debiased_calibration_error, expected_calibration_error
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(500)
    >>> y = rng.random(500) < p  # calibrated: the plug-in error is noise
    >>> plug_in = expected_calibration_error(y, p, norm="l2", strategy="quantile",
    ...                                      convention="positive_class")
    >>> debiased = debiased_calibration_error(y, p, convention="positive_class")
    >>> bool(debiased < plug_in)
    True
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return overall_or_by_group(
        _debiased_calibration_error,
        data,
        groups,
        n_bins=n_bins,
        strategy=strategy,
        convention=convention,
    )


def _debiased_calibration_error(data, *, n_bins=15, strategy="quantile", convention="top_label"):
    """:func:`debiased_calibration_error` of checked predictions."""
    cell, n_bins, columns = _debiased_bins(data, n_bins, strategy, convention)
    sums = [np.bincount(cell, weights=column, minlength=n_bins) for column in columns]
    return float(_debiased_from_bins(*sums))


def debiased_plan(data, *, n_bins=15, strategy="quantile", convention="top_label"):
    """Resampling plan of :func:`debiased_calibration_error` (its bins held fixed)."""
    cell, n_bins, columns = _debiased_bins(data, n_bins, strategy, convention)

    def accumulate(group, n_groups):
        return cell_sums(group, n_groups, cell, n_bins, columns)

    def value(sums):
        return _debiased_from_bins(*np.split(sums, len(columns), axis=-1))

    return ResamplingPlan(cell.shape[0], len(columns) * n_bins, accumulate, value)
