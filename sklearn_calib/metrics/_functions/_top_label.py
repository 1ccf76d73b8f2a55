"""Gupta & Ramdas' top-label calibration error: the confidence binned per predicted class."""

import numpy as np

from ..._validation import check_n_bins, check_option
from .._core._binning import assign_bins, quantile_bin_edges, uniform_bin_edges
from .._core._dispatch import dask_aware
from .._core._group_rows import overall_or_by_group
from .._core._resampling import ResamplingPlan, cell_sums
from ._binned import _NORMS, _STRATEGIES, _calibration_error_from_bins
from ._predictions import check_predictions

_AVERAGES = ("weighted", "macro")


def _combine(counts, score_sums, outcome_sums, norm, average):
    """Top-label error from per-(class, bin) sums of shape (..., n_classes, n_bins)."""
    class_weight = counts.sum(axis=-1)
    present = class_weight > 0
    # an absent class gets unit counts and zero sums: no gap, and no 0 / 0
    safe = np.where(present[..., None], counts, 1.0)
    per_class = np.where(
        present, _calibration_error_from_bins(safe, score_sums, outcome_sums, norm), 0.0
    )
    if average == "macro":
        return per_class.sum(axis=-1) / present.sum(axis=-1)
    if norm == "max":
        return per_class.max(axis=-1)
    share = class_weight / class_weight.sum(axis=-1, keepdims=True)
    if norm == "l2":
        return np.sqrt(np.sum(share * per_class**2, axis=-1))
    return np.sum(share * per_class, axis=-1)


def _top_label_cells(data, n_bins, strategy, norm, average):
    """Checked predictions: each sample's (predicted class, bin) cell and summed columns."""
    n_bins = check_n_bins(n_bins)
    check_option(strategy, "strategy", _STRATEGIES)
    check_option(norm, "norm", _NORMS)
    check_option(average, "average", _AVERAGES)
    proba, sample_weight = data.proba, data.sample_weight
    confidence, correct = data.scores("top_label")
    predicted = proba.argmax(axis=1)
    n_classes = proba.shape[1]
    bins = np.empty(proba.shape[0], dtype=np.intp)
    if strategy == "uniform":
        bins[:] = assign_bins(confidence, uniform_bin_edges(n_bins))
    else:
        for label in np.unique(predicted):
            rows = np.flatnonzero(predicted == label)
            weight = None if sample_weight is None else sample_weight[rows]
            if weight is not None and weight.sum() <= 0:
                bins[rows] = 0
                continue
            edges = quantile_bin_edges(confidence[rows], n_bins, weight)
            bins[rows] = assign_bins(confidence[rows], edges)
    weight = np.ones(proba.shape[0]) if sample_weight is None else sample_weight
    columns = [weight, weight * confidence, weight * correct]
    return predicted * n_bins + bins, n_classes * n_bins, (n_classes, n_bins), columns


@dask_aware
def top_label_calibration_error(
    y_true,
    y_prob,
    *,
    n_bins=15,
    strategy="uniform",
    norm="l1",
    average="weighted",
    labels=None,
    sample_weight=None,
    groups=None,
):
    """Top-label calibration error (Gupta & Ramdas 2022): bins within each predicted class.

    The confidence ECE asks whether ``P(correct | confidence) = confidence``; top-label
    calibration asks more, ``P(Y = c | predicted class c, confidence) = confidence``, so
    the confidences are binned separately for each predicted class ``c``. With
    ``average="weighted"`` (the paper's expectation over samples) the error is
    ``sum_c sum_b (n_cb / n) |acc_cb - conf_cb|`` (``"l1"``), its root-mean-square form
    (``"l2"``) or the largest gap over classes and bins (``"max"``); ``"macro"``
    averages the per-class errors over the predicted classes with equal weight (MAPIE's
    ``top_label_ece``). For a binary problem the classes are the two predictions, so
    1-D input needs no convention.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    n_bins : int, default=15
        Number of bins per predicted class.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins, or equal-mass bins within each predicted class.
    norm : {"l1", "l2", "max"}, default="l1"
        How the per-bin gaps are combined.
    average : {"weighted", "macro"}, default="weighted"
        How the predicted classes are combined (see above).
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
        The top-label calibration error.

    See Also
    --------
    expected_calibration_error : The confidence ECE, all predicted classes in one set of bins.

    References
    ----------
    .. [1] C. Gupta and A. Ramdas, "Top-label calibration and multiclass-to-binary
       reductions", International Conference on Learning Representations, 2022.

    Examples
    --------
    >>> from sklearn_calib.scoring import top_label_calibration_error
    >>> y_true = [0, 1, 1, 0, 2]
    >>> y_prob = [[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1],
    ...           [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]]
    >>> round(top_label_calibration_error(y_true, y_prob, n_bins=5), 4)
    0.14
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return overall_or_by_group(
        _top_label_calibration_error,
        data,
        groups,
        n_bins=n_bins,
        strategy=strategy,
        norm=norm,
        average=average,
    )


def _top_label_calibration_error(
    data, *, n_bins=15, strategy="uniform", norm="l1", average="weighted"
):
    """:func:`top_label_calibration_error` of checked predictions."""
    cell, n_cells, shape, columns = _top_label_cells(data, n_bins, strategy, norm, average)
    sums = [
        np.bincount(cell, weights=column, minlength=n_cells).reshape(shape) for column in columns
    ]
    return float(_combine(*sums, norm, average))


def top_label_plan(data, *, n_bins=15, strategy="uniform", norm="l1", average="weighted"):
    """Resampling plan of :func:`top_label_calibration_error` (its bins held fixed)."""
    cell, n_cells, shape, columns = _top_label_cells(data, n_bins, strategy, norm, average)

    def accumulate(group, n_groups):
        return cell_sums(group, n_groups, cell, n_cells, columns)

    def value(sums):
        parts = [part.reshape(part.shape[:-1] + shape) for part in np.split(sums, 3, axis=-1)]
        return _combine(*parts, norm, average)

    return ResamplingPlan(cell.shape[0], 3 * n_cells, accumulate, value)
