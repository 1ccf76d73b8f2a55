"""Calibration metrics computed with numpy from predicted probabilities.

Every public function checks its input once (:func:`check_predictions`) and calls its
kernel, the function of the same name with a leading underscore, which takes the checked
:class:`Predictions`; the resampling plans of :func:`calibration_error_ci` take them too.
Binning follows the one rule of :mod:`sklearn_calib.metrics._binning`. The
kernel-smoothed errors (SECE, smECE) live in :mod:`sklearn_calib.metrics._smooth`. Sums are
accumulated in float64 whatever the input precision, and no function makes a temporary of
the input's full ``(n_samples, n_classes)`` size: per-class work runs over blocks of rows.
"""

import numpy as np
from scipy.special import expit, softmax
from sklearn.utils import Bunch

from ..._validation import check_confidence_level, check_n_bins, check_number, check_option
from .._core._binning import assign_bins, bin_sums, quantile_bin_edges, uniform_bin_edges
from .._core._dispatch import dask_aware
from .._core._group_rows import overall_or_by_group
from .._core._intervals import clopper_pearson
from .._core._resampling import ResamplingPlan, cell_sums
from .._core._weights import unit_scale
from .._fused._passes import classwise_sums, top_label_sums
from ._predictions import _row_blocks, block_rows, check_predictions

#: Added to the kernel sums of SECE (times the mean sample weight), so that a sample
#: without any neighbour (possible with ``include_self=False``) gets a smoothed accuracy
#: of 0.
SECE_EPS = 1e-12

#: Values per block of the top-label binning.
_TOP_LABEL_ROWS = 1 << 18

_STRATEGIES = ("uniform", "quantile")
_NORMS = ("l1", "l2", "max")
#: The per-sample scores of :func:`per_sample_score`.
SCORES = ("brier", "log_loss")


def _weighted_mean(values, sample_weight):
    if sample_weight is None:
        return float(np.mean(values, dtype=np.float64))
    return float(np.dot(values, sample_weight) / sample_weight.sum())


def _true_class_proba(proba, y_index):
    return proba[np.arange(proba.shape[0]), y_index].astype(np.float64)


def log_loss_clip(dtype):
    """The probabilities' clip of the log loss: ``[eps, 1 - eps]``, ``eps`` that of ``dtype``.

    scikit-learn's ``log_loss`` clips at the machine epsilon of the input's dtype too.
    """
    eps = float(np.finfo(dtype).eps)
    return eps, 1.0 - eps


def per_sample_score(proba, y_index, score):
    """Each sample's Brier score (summed over classes) or log loss (clipped, as in the NLL).

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Probabilities.
    y_index : ndarray of shape (n_samples,)
        Column of each sample's true class.
    score : {"brier", "log_loss"}
        The score.

    Returns
    -------
    values : ndarray of shape (n_samples,), float64
    """
    true_proba = _true_class_proba(proba, y_index)
    if score == "log_loss":
        return -np.log(np.clip(true_proba, *log_loss_clip(proba.dtype)))
    squares = np.empty(proba.shape[0])
    for rows in _row_blocks(proba.shape[0], proba.shape[1]):
        block = proba[rows].astype(np.float64)
        squares[rows] = np.einsum("ij,ij->i", block, block)
    return squares - 2.0 * true_proba + 1.0


def mean_plan(data, values):
    """Resampling plan of the weighted mean of per-sample ``values`` (Brier, NLL, accuracy)."""
    weight = data.weight
    cell = np.zeros(values.shape[0], dtype=np.intp)

    def accumulate(group, n_groups):
        return cell_sums(group, n_groups, cell, 1, [weight, weight * values])

    def value(sums):
        return sums[..., 1] / sums[..., 0]

    return ResamplingPlan(values.shape[0], 2, accumulate, value)


def _calibration_error_from_bins(counts, confidence_sums, accuracy_sums, norm):
    """Calibration error from per-bin sums; leading axes (for example classes) are kept.

    Empty bins (count or total weight 0) take no part, also in the ``"max"`` norm.
    """
    nonempty = counts > 0
    safe = np.where(nonempty, counts, 1.0)
    gap = np.where(nonempty, np.abs(accuracy_sums - confidence_sums) / safe, 0.0)
    share = counts / counts.sum(axis=-1, keepdims=True)
    if norm == "l1":
        return (share * gap).sum(axis=-1)
    if norm == "l2":
        return np.sqrt((share * gap**2).sum(axis=-1))
    return gap.max(axis=-1)


def bin_edges(score, n_bins, strategy, sample_weight=None):
    """Edges of ``n_bins`` equal-width (``"uniform"``) or equal-mass (``"quantile"``) bins."""
    if strategy == "quantile":
        return quantile_bin_edges(score, n_bins, sample_weight)
    return uniform_bin_edges(n_bins)


def binned_columns(score, outcome, sample_weight, n_bins, strategy):
    """Each sample's bin and the columns whose sums over a bin give its weighted count,
    score sum and outcome sum (the inputs of a resampling plan's cell sums).

    Returns
    -------
    cell : ndarray of shape (n_samples,)
        Bin of each sample.
    columns : list of 3 ndarrays of shape (n_samples,)
        The weight (1 without ``sample_weight``), weight x score and weight x outcome.
    """
    edges = bin_edges(score, n_bins, strategy, sample_weight)
    weight = np.ones(score.shape[0]) if sample_weight is None else sample_weight
    return assign_bins(score, edges), [weight, weight * score, weight * outcome]


def binned_sums(score, outcome, sample_weight, n_bins, strategy):
    """Bin edges and per-bin count, score sum and outcome sum.

    The bins are filled block by block (``_TOP_LABEL_ROWS`` values at a time), so their
    temporaries stay small and in cache.

    Parameters
    ----------
    score : ndarray of shape (n_samples,)
        Scores in [0, 1], from :func:`scores_and_outcomes`.
    outcome : ndarray of shape (n_samples,)
        Whether each sample's event happened.
    sample_weight : ndarray of shape (n_samples,) or None
        Sample weights.
    n_bins : int
        Number of bins.
    strategy : {"uniform", "quantile"}
        Equal-width or equal-mass bins.

    Returns
    -------
    edges : ndarray of shape (n_bins + 1,)
    counts, score_sums, outcome_sums : ndarray of shape (n_bins,)
        Weighted, in float64.
    """
    edges = bin_edges(score, n_bins, strategy, sample_weight)
    counts, score_sums, outcome_sums = np.zeros(n_bins), np.zeros(n_bins), np.zeros(n_bins)
    for start in range(0, score.shape[0], _TOP_LABEL_ROWS):
        rows = slice(start, start + _TOP_LABEL_ROWS)
        weight = None if sample_weight is None else sample_weight[rows]
        block_counts, (block_score, block_outcome) = bin_sums(
            assign_bins(score[rows], edges), n_bins, [score[rows], outcome[rows]], weight
        )
        counts += block_counts
        score_sums += block_score
        outcome_sums += block_outcome
    return edges, counts, score_sums, outcome_sums


def binned_plan(data, *, n_bins=15, strategy="uniform", norm="l1", convention="top_label"):
    """Resampling plan of :func:`expected_calibration_error` (its bins held fixed)."""
    score, outcome = data.scores(convention)
    cell, columns = binned_columns(score, outcome, data.sample_weight, n_bins, strategy)

    def accumulate(group, n_groups):
        return cell_sums(group, n_groups, cell, n_bins, columns)

    def value(sums):
        return _calibration_error_from_bins(*np.split(sums, 3, axis=-1), norm)

    return ResamplingPlan(score.shape[0], 3 * n_bins, accumulate, value)


@dask_aware
def expected_calibration_error(
    y_true,
    y_prob,
    *,
    n_bins=15,
    strategy="uniform",
    norm="l1",
    convention="auto",
    labels=None,
    sample_weight=None,
    groups=None,
):
    """Expected calibration error (ECE) of the top-label confidence.

    The confidence ``r = max_k p_k`` of each sample is binned under the rule
    ``(lower, upper]`` with 0 in the first bin; the error is
    ``sum_b (n_b / N) |acc_b - conf_b|`` over the non-empty bins (``"l1"``), its
    root-mean-square form (``"l2"``) or the largest gap (``"max"``, the MCE). A binary
    problem given as 1-D positive-class probabilities is scored on ``max(p, 1 - p)``
    unless ``convention="positive_class"``; its values by group (``groups=``) are of the
    positive class unless ``convention="top_label"``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins on [0, 1], or equal-mass bins (see
        :func:`adaptive_calibration_error`).
    norm : {"l1", "l2", "max"}, default="l1"
        How the per-bin gaps are combined.
    convention : {"auto", "top_label", "positive_class"}, default="auto"
        What is binned. ``"top_label"``: each sample's confidence ``max_k p_k`` against
        whether its prediction is right; for a binary problem that is
        ``max(p, 1 - p)``, so both tails fold onto [0.5, 1]. ``"positive_class"`` (binary
        problems only, as torchmetrics' and netcal's binary ECE and scikit-learn's
        ``calibration_curve``): the positive-class probability (second column,
        ``labels[1]``) against ``y == labels[1]``. The two differ whenever the model errs
        differently on the two classes. ``"auto"``: ``"top_label"``, but the values by
        group (``groups=``) of a binary problem are of the positive class, where a group
        whose scores are shifted shows (folded onto [0.5, 1], its too high and too low
        scores hide among the calibrated ones; see :func:`calibration_audit`).
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``; needed when ``y_true`` lacks a class and
        its labels are not the column indices.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights; a bin's share and means are weighted.
    groups : array-like of shape (n_samples,) or (n_samples, n_columns), default=None
        Group of each sample, or columns whose distinct rows are the groups: when given,
        the error of each group's rows, as a dict from group label to value (see
        :func:`calibration_audit`).

    Returns
    -------
    error : float
        In [0, 1].

    See Also
    --------
    calibration_error_ci : A bootstrap interval of this (or any) calibration error.
    debiased_calibration_error : Kumar et al.'s debiased L2 error.
    top_label_calibration_error : Gupta & Ramdas' error, binned per predicted class.
    smooth_ece : Błasiok & Nakkiran's binning-free smooth ECE.

    References
    ----------
    .. [1] M. P. Naeini, G. F. Cooper and M. Hauskrecht, "Obtaining Well Calibrated
       Probabilities Using Bayesian Binning", AAAI Conference on Artificial
       Intelligence, 2015.
    .. [2] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On Calibration of Modern
       Neural Networks", International Conference on Machine Learning, 2017.

    Examples
    --------
    >>> from sklearn_calib.scoring import expected_calibration_error
    >>> y_true = [0, 1, 1, 0, 2]
    >>> y_prob = [[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1],
    ...           [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]]
    >>> round(expected_calibration_error(y_true, y_prob, n_bins=5), 4)
    0.14

    A binary model too sure of the negative class and not sure enough of the positive
    one: the top-label bins put both kinds of prediction at confidence 0.8, where the
    errors cancel; the positive-class bins keep them apart.

    >>> y = [1, 1, 1, 1, 1, 1, 1, 0, 0, 0]
    >>> p = [0.8, 0.8, 0.8, 0.8, 0.8, 0.2, 0.2, 0.2, 0.2, 0.2]
    >>> round(expected_calibration_error(y, p, n_bins=5), 4)
    0.0
    >>> round(expected_calibration_error(y, p, n_bins=5, convention="positive_class"), 4)
    0.2
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return overall_or_by_group(
        _expected_calibration_error,
        data,
        groups,
        n_bins=n_bins,
        strategy=strategy,
        norm=norm,
        convention=convention,
    )


def _expected_calibration_error(
    data, *, n_bins=15, strategy="uniform", norm="l1", convention="top_label"
):
    """:func:`expected_calibration_error` of checked predictions.

    With numba, the equal-width top-label bins are summed in one read of the
    probabilities (:func:`~sklearn_calib.metrics._fused.top_label_sums`, the same sums).
    """
    n_bins = check_n_bins(n_bins)
    check_option(strategy, "strategy", _STRATEGIES)
    check_option(norm, "norm", _NORMS)
    sums = None
    if strategy == "uniform" and convention == "top_label":
        sums = top_label_sums(data, n_bins, _TOP_LABEL_ROWS)
    if sums is None:
        score, outcome = data.scores(convention)
        _, *sums = binned_sums(score, outcome, data.sample_weight, n_bins, strategy)
    return float(_calibration_error_from_bins(*sums, norm))


@dask_aware
def maximum_calibration_error(
    y_true,
    y_prob,
    *,
    n_bins=15,
    strategy="uniform",
    convention="auto",
    labels=None,
    sample_weight=None,
    groups=None,
):
    """Maximum calibration error (MCE): the largest ``|acc_b - conf_b|`` over non-empty bins.

    Same as ``expected_calibration_error(..., norm="max")``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width or equal-mass bins.
    convention : {"auto", "top_label", "positive_class"}, default="auto"
        What is binned; see :func:`expected_calibration_error`.
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

    Examples
    --------
    >>> from sklearn_calib.scoring import maximum_calibration_error
    >>> y_true = [0, 1, 1, 0, 2]
    >>> y_prob = [[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1],
    ...           [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]]
    >>> round(maximum_calibration_error(y_true, y_prob, n_bins=5), 4)
    0.25
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return overall_or_by_group(
        _maximum_calibration_error,
        data,
        groups,
        n_bins=n_bins,
        strategy=strategy,
        convention=convention,
    )


def _maximum_calibration_error(data, *, n_bins=15, strategy="uniform", convention="top_label"):
    """:func:`maximum_calibration_error` of checked predictions."""
    return _expected_calibration_error(
        data, n_bins=n_bins, strategy=strategy, norm="max", convention=convention
    )


@dask_aware
def adaptive_calibration_error(
    y_true,
    y_prob,
    *,
    n_bins=15,
    norm="l1",
    convention="auto",
    labels=None,
    sample_weight=None,
    groups=None,
):
    """Adaptive calibration error (AdaECE / ACE): ECE over equal-mass bins.

    The sorted confidences are split into ``n_bins`` groups whose sizes differ by at most
    one (the first ``N % n_bins`` groups are larger); each inner bin edge is the largest
    confidence of its group, and bins keep the ``(lower, upper]`` rule. Every sample is
    counted, the smallest confidence included. Ties are never split: confidences equal
    to an edge all fall in the lower bin, which then holds more samples than its share
    (and with fewer distinct confidences than bins some bins are empty). The groups are
    formed by weighted count with ``sample_weight`` (integer weights count as repeated
    samples, as in :class:`~sklearn_calib.HistogramBinning`), which also weights the sums
    within the bins.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    n_bins : int, default=15
        Number of bins.
    norm : {"l1", "l2", "max"}, default="l1"
        How the per-bin gaps are combined.
    convention : {"auto", "top_label", "positive_class"}, default="auto"
        What is binned; see :func:`expected_calibration_error`.
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

    Examples
    --------
    >>> from sklearn_calib.scoring import adaptive_calibration_error
    >>> y_true = [0, 1, 1, 0, 2]
    >>> y_prob = [[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1],
    ...           [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]]
    >>> round(adaptive_calibration_error(y_true, y_prob, n_bins=5), 4)
    0.34
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return overall_or_by_group(
        _adaptive_calibration_error, data, groups, n_bins=n_bins, norm=norm, convention=convention
    )


def _adaptive_calibration_error(data, *, n_bins=15, norm="l1", convention="top_label"):
    """:func:`adaptive_calibration_error` of checked predictions."""
    return _expected_calibration_error(
        data, n_bins=n_bins, strategy="quantile", norm=norm, convention=convention
    )


@dask_aware
def classwise_calibration_error(
    y_true, y_prob, *, n_bins=15, norm="l1", labels=None, sample_weight=None, groups=None
):
    """Classwise ECE: the mean over classes of the ECE of ``p_k`` against ``1[y = k]``.

    Each class uses equal-width bins under the ``(lower, upper]`` rule. The classes are the
    columns of ``y_prob`` (or ``labels``), so a class absent from ``y_true`` still counts
    in the mean.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem (two
        classes).
    n_bins : int, default=15
        Number of bins per class.
    norm : {"l1", "l2", "max"}, default="l1"
        How the per-bin gaps of one class are combined.
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

    Examples
    --------
    >>> from sklearn_calib.scoring import classwise_calibration_error
    >>> y_true = [0, 1, 1, 0, 2]
    >>> y_prob = [[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1],
    ...           [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]]
    >>> round(classwise_calibration_error(y_true, y_prob, n_bins=5), 4)
    0.1733
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return overall_or_by_group(_classwise_calibration_error, data, groups, n_bins=n_bins, norm=norm)


def _classwise_calibration_error(data, *, n_bins=15, norm="l1"):
    """:func:`classwise_calibration_error` of checked predictions."""
    n_bins = check_n_bins(n_bins)
    check_option(norm, "norm", _NORMS)
    sums = _classwise_sums(data, n_bins, None, 1)
    return float(_classwise_from_sums(sums.reshape(-1), data.n_classes, n_bins, norm))


def _classwise_sums(data, n_bins, group, n_groups):
    """Per (group, class, bin) sums of weight, probability and indicator (``group`` None:
    one group).

    The probabilities are binned in their own precision, block by block; the indicator
    is 1 on each row's true class only, so its sums run over one entry per row. With
    numba the bins are found as the probabilities are read (:func:`classwise_sums`,
    the same sums).

    Returns
    -------
    sums : ndarray of shape (n_groups, 3 * n_classes * n_bins)
        The weights' sums, then the probabilities', then the indicators'.
    """
    y_index, proba, sample_weight = data.y_index, data.proba, data.sample_weight
    n_rows, n_classes = proba.shape
    fused = classwise_sums(data, n_bins, block_rows(n_classes), group, n_groups)
    if fused is not None:
        return fused
    bins = data.derived(("classwise_bins", n_bins), lambda: _probability_bins(proba, n_bins))
    n_cells = n_classes * n_bins
    size = n_groups * n_cells
    offsets = np.arange(n_classes) * n_bins
    sums = np.zeros((3, size))
    for rows in _row_blocks(n_rows, n_classes):
        block = proba[rows]
        cell = bins[rows] + offsets
        if group is not None:
            cell += (group[rows] * n_cells)[:, None]
        true_cell = np.take_along_axis(cell, y_index[rows, None], axis=1)[:, 0]
        weight = None if sample_weight is None else sample_weight[rows]
        repeated = None if weight is None else np.repeat(weight, n_classes)
        mass = block.ravel() if weight is None else block.ravel() * repeated
        sums[0] += np.bincount(cell.ravel(), repeated, minlength=size)
        sums[1] += np.bincount(cell.ravel(), mass, minlength=size)
        sums[2] += np.bincount(true_cell, weight, minlength=size)
    return sums.reshape(3, n_groups, n_cells).transpose(1, 0, 2).reshape(n_groups, -1)


def _probability_bins(proba, n_bins):
    """The equal-width bin of every probability, in the probabilities' precision (uint16)."""
    edges = uniform_bin_edges(n_bins)
    bins = np.empty(proba.shape, dtype=np.uint16 if n_bins <= 1 << 16 else np.intp)
    for rows in _row_blocks(proba.shape[0], proba.shape[1]):
        bins[rows] = assign_bins(proba[rows].ravel(), edges).reshape(-1, proba.shape[1])
    return bins


def _classwise_from_sums(sums, n_classes, n_bins, norm):
    """Classwise ECE from :func:`_classwise_sums` (leading axes, e.g. replicates, kept)."""
    parts = [
        part.reshape(part.shape[:-1] + (n_classes, n_bins)) for part in np.split(sums, 3, axis=-1)
    ]
    return _calibration_error_from_bins(*parts, norm).mean(axis=-1)


def classwise_plan(data, *, n_bins=15, norm="l1"):
    """Resampling plan of :func:`classwise_calibration_error`."""

    def accumulate(group, n_groups):
        return _classwise_sums(data, n_bins, group, n_groups)

    def value(sums):
        return _classwise_from_sums(sums, data.n_classes, n_bins, norm)

    return ResamplingPlan(data.n_samples, 3 * data.n_classes * n_bins, accumulate, value)


def differentiable_calibration_error(
    y_true, y_prob, *, n_bins=15, t_a=100.0, t_b=0.01, labels=None, sample_weight=None
):
    """Differentiable ECE (DECE, Bohdal et al. 2021) computed with numpy.

    Soft bins: with ``cut = linspace(0, 1, M + 1)[:-1]``, ``W = [1..M]`` and
    ``b = cumsum(-cut)``, sample i belongs to bin k with weight
    ``o_ik = softmax_k((r_i W_k + b_k) / t_b)``, smoothed to
    ``(o + 1e-6) / (1 + (M + 1) 1e-6)``. Soft accuracy: the soft rank of the true class,
    ``rank_i = 0.5 + sum_b sigmoid(t_a (p_ib - p_iy))``, gives ``acc_i = relu(2 - rank_i)``.
    Then ``DECE = sum_k (sum_i o_ik / N) |acc_k - conf_k|`` with ``conf_k``, ``acc_k`` the
    ``o``-weighted means of ``r_i`` and ``acc_i``. The torch version in
    :mod:`sklearn_calib.losses` computes the same value.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    n_bins : int, default=15
        Number of soft bins ``M``.
    t_a : float, default=100.0
        Temperature of the soft rank (larger is closer to the hard accuracy).
    t_b : float, default=0.01
        Temperature of the soft binning (smaller is closer to hard bins).
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, multiplying each sample's bin memberships.

    Returns
    -------
    error : float

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import softmax
    >>> from sklearn_calib.scoring import differentiable_calibration_error
    >>> logits = np.array([[2, 1, 0], [0.5, 1.5, 0], [3, 0, 0], [0, 0, 0.2]])
    >>> round(differentiable_calibration_error([0, 0, 0, 2], softmax(logits, axis=1)), 6)
    0.322067
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return _differentiable_calibration_error(data, n_bins=n_bins, t_a=t_a, t_b=t_b)


def _differentiable_calibration_error(data, *, n_bins=15, t_a=100.0, t_b=0.01):
    """:func:`differentiable_calibration_error` of checked predictions."""
    n_bins = check_n_bins(n_bins)
    t_a = check_number("t_a", t_a, low=0, low_open=True)
    t_b = check_number("t_b", t_b, low=0, low_open=True)
    y_index, proba, sample_weight = data.y_index, data.proba, data.sample_weight
    cut = np.linspace(0.0, 1.0, n_bins + 1)[:-1]
    slope = np.arange(1.0, n_bins + 1)
    intercept = np.cumsum(-cut)
    confidence = data.scores("top_label")[0]
    mass = np.zeros(n_bins)
    confidence_sums = np.zeros(n_bins)
    accuracy_sums = np.zeros(n_bins)
    n_cols = max(proba.shape[1], n_bins)
    for rows in _row_blocks(proba.shape[0], n_cols):
        block = proba[rows].astype(np.float64)
        true_proba = block[np.arange(block.shape[0]), y_index[rows]]
        rank = 0.5 + expit(t_a * (block - true_proba[:, None])).sum(axis=1)
        accuracy = np.maximum(2.0 - rank, 0.0)
        r = confidence[rows].astype(np.float64)
        membership = softmax((r[:, None] * slope + intercept) / t_b, axis=1)
        membership = (membership + 1e-6) / (1.0 + (n_bins + 1) * 1e-6)
        if sample_weight is not None:
            membership *= sample_weight[rows, None]
        mass += membership.sum(axis=0)
        confidence_sums += r @ membership
        accuracy_sums += accuracy @ membership
    total = proba.shape[0] if sample_weight is None else sample_weight.sum()
    gap = np.abs(accuracy_sums - confidence_sums) / mass
    return float(np.sum(mass / total * gap))


@dask_aware
def brier_score(y_true, y_prob, *, labels=None, sample_weight=None):
    """Multiclass Brier score: the mean over samples of ``sum_k (p_k - 1[y = k])^2``.

    It lies in [0, 2]. For a binary problem this is twice scikit-learn's default
    ``brier_score_loss`` (which scores the positive column only); it equals
    ``brier_score_loss(..., scale_by_half=False)``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    score : float

    Examples
    --------
    >>> from sklearn_calib.scoring import brier_score
    >>> y_true = [0, 1, 1, 0, 2]
    >>> y_prob = [[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1],
    ...           [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]]
    >>> round(brier_score(y_true, y_prob), 4)
    0.291
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return _brier_score(data)


def _brier_score(data):
    """:func:`brier_score` of checked predictions."""
    return _weighted_mean(per_sample_score(data.proba, data.y_index, "brier"), data.sample_weight)


def brier_plan(data):
    """Resampling plan of :func:`brier_score`."""
    return mean_plan(data, per_sample_score(data.proba, data.y_index, "brier"))


@dask_aware
def negative_log_likelihood(y_true, y_prob, *, labels=None, sample_weight=None):
    """Mean negative log-likelihood of the true class, ``-mean log p_y``.

    The true class's probability is first clipped to ``[eps, 1 - eps]``, ``eps`` being the
    machine epsilon of the probabilities' dtype (about 1.2e-7 for float32, 2.2e-16 for
    float64), so a zero probability costs ``-log(eps)`` (15.9 in float32, 36.0 in float64)
    rather than infinity. This is the clipping of scikit-learn's ``log_loss``, whose value
    this equals on the same float32 or float64 input (this one takes the logarithm in
    float64).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    loss : float

    Examples
    --------
    >>> from sklearn_calib.scoring import negative_log_likelihood
    >>> y_true = [0, 1, 1, 0, 2]
    >>> y_prob = [[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1],
    ...           [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]]
    >>> round(negative_log_likelihood(y_true, y_prob), 4)
    0.5165
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return _negative_log_likelihood(data)


def _negative_log_likelihood(data):
    """:func:`negative_log_likelihood` of checked predictions."""
    values = per_sample_score(data.proba, data.y_index, "log_loss")
    return _weighted_mean(values, data.sample_weight)


def negative_log_likelihood_plan(data):
    """Resampling plan of :func:`negative_log_likelihood`."""
    return mean_plan(data, per_sample_score(data.proba, data.y_index, "log_loss"))


@dask_aware
def top_label_accuracy(y_true, y_prob, *, labels=None, sample_weight=None):
    """Accuracy of the most probable class (first column on ties, as ``np.argmax``).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    accuracy : float

    Examples
    --------
    >>> from sklearn_calib.scoring import top_label_accuracy
    >>> y_true = [0, 1, 1, 0, 2]
    >>> y_prob = [[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1],
    ...           [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]]
    >>> top_label_accuracy(y_true, y_prob)
    0.8
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return _top_label_accuracy(data)


def _top_label_accuracy(data):
    """:func:`top_label_accuracy` of checked predictions."""
    return _weighted_mean(data.scores("top_label")[1], data.sample_weight)


def top_label_accuracy_plan(data):
    """Resampling plan of :func:`top_label_accuracy`."""
    return mean_plan(data, data.scores("top_label")[1].astype(np.float64))


@dask_aware
def reliability_diagram(
    y_true,
    y_prob,
    *,
    n_bins=15,
    strategy="uniform",
    convention="auto",
    confidence_level=None,
    labels=None,
    sample_weight=None,
    groups=None,
):
    """Per-bin data of a reliability diagram of the top-label confidence.

    Bins follow the ``(lower, upper]`` rule with 0 in the first bin, as in
    :func:`expected_calibration_error`; empty bins are kept so the rows align with the
    edges.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width or equal-mass bins.
    convention : {"auto", "top_label", "positive_class"}, default="auto"
        What is binned; see :func:`expected_calibration_error`. With
        ``"positive_class"``, ``mean_confidence`` is the mean positive-class probability
        and ``accuracy`` the fraction of positives.
    confidence_level : float, default=None
        When given (in (0, 1)), each bin's accuracy gets its Clopper-Pearson interval
        (exact for a binomial count; with ``sample_weight``, on Kish's effective size
        ``(sum w)^2 / sum w^2`` of the bin).
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights; ``count`` is then the total weight of a bin.
    groups : array-like of shape (n_samples,) or (n_samples, n_columns), default=None
        Group of each sample, or columns whose distinct rows are the groups: when given,
        the diagram of each group's rows, as a dict from group label to diagram.

    Returns
    -------
    diagram : :class:`~sklearn.utils.Bunch`
        ``edges`` (n_bins + 1,), and per bin (n_bins,): ``count``, ``mean_confidence``
        and ``accuracy``; with ``confidence_level`` also ``accuracy_low`` and
        ``accuracy_high``. For an empty bin ``count`` is 0 and the other entries are NaN
        (undefined, and skipped by matplotlib).

    See Also
    --------
    smooth_reliability_diagram : The binning-free curve, with a bootstrap band.
    sklearn_calib.plotting.ReliabilityDisplay : Draws this diagram.

    References
    ----------
    .. [1] C. J. Clopper and E. S. Pearson, "The use of confidence or fiducial limits
       illustrated in the case of the binomial", Biometrika 26(4), 1934.

    Examples
    --------
    >>> from sklearn_calib.scoring import reliability_diagram
    >>> y_true = [0, 1, 1, 0, 2]
    >>> y_prob = [[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1],
    ...           [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]]
    >>> diagram = reliability_diagram(y_true, y_prob, n_bins=5)
    >>> diagram.count
    array([0., 0., 2., 2., 1.])
    >>> diagram.accuracy
    array([nan, nan, 0.5, 1. , 1. ])
    >>> diagram = reliability_diagram(y_true, y_prob, n_bins=5, confidence_level=0.9)
    >>> diagram.accuracy_low.round(3)
    array([  nan,   nan, 0.025, 0.224, 0.05 ])
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return overall_or_by_group(
        _reliability_diagram,
        data,
        groups,
        n_bins=n_bins,
        strategy=strategy,
        convention=convention,
        confidence_level=confidence_level,
    )


def _reliability_diagram(
    data, *, n_bins=15, strategy="uniform", convention="top_label", confidence_level=None
):
    """:func:`reliability_diagram` of checked predictions."""
    n_bins = check_n_bins(n_bins)
    check_option(strategy, "strategy", _STRATEGIES)
    if confidence_level is not None:
        confidence_level = check_confidence_level(confidence_level)
    sample_weight = data.sample_weight
    score, outcome = data.scores(convention)
    edges, counts, confidence_sums, accuracy_sums = binned_sums(
        score, outcome, sample_weight, n_bins, strategy
    )
    nonempty = counts > 0
    safe = np.where(nonempty, counts, 1.0)
    diagram = Bunch(
        edges=edges,
        count=counts,
        mean_confidence=np.where(nonempty, confidence_sums / safe, np.nan),
        accuracy=np.where(nonempty, accuracy_sums / safe, np.nan),
    )
    if confidence_level is not None:
        trials = counts
        if sample_weight is not None:
            # Kish's effective size (sum w)^2 / sum w^2, on weights scaled to avoid overflow
            scaled = sample_weight * unit_scale(sample_weight)
            bins = assign_bins(score, edges)
            mass = np.bincount(bins, scaled, minlength=n_bins)
            squares = np.bincount(bins, scaled**2, minlength=n_bins)
            trials = np.where(nonempty, mass**2 / np.where(nonempty, squares, 1.0), 0.0)
        diagram.accuracy_low, diagram.accuracy_high = clopper_pearson(
            np.where(nonempty, diagram.accuracy, 0.0) * trials, trials, confidence_level
        )
    return diagram
