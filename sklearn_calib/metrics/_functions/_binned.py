"""The binned calibration errors: ECE, MCE, adaptive and classwise ECE, and the
reliability diagram.

Every public function checks its input once (:func:`check_predictions`) and calls its
kernel, the function of the same name with a leading underscore, which takes the checked
:class:`Predictions`; the resampling plans of :func:`calibration_error_ci` take them too.
Binning follows the library's one rule (``_core._binning``). Sums are accumulated in
float64 whatever the input precision, and no function makes a temporary of the input's
full ``(n_samples, n_classes)`` size: per-class work runs over blocks of rows.
"""

import numpy as np
from sklearn.utils import Bunch

from ..._validation import check_confidence_level, check_n_bins, check_option
from .._core._binning import (
    assign_bins,
    blocked_bin_sums,
    quantile_bin_edges,
    uniform_bin_edges,
)
from .._core._dispatch import dask_aware
from .._core._group_rows import overall_or_by_group
from .._core._intervals import clopper_pearson
from .._core._resampling import ResamplingPlan, cell_sums
from .._core._rows import block_rows
from .._core._weights import unit_scale
from .._fused._bins import classwise_sums, top_label_sums
from ._predictions import check_predictions

#: Values per block of the top-label binning.
_TOP_LABEL_ROWS = 1 << 18

_STRATEGIES = ("uniform", "quantile")
_NORMS = ("l1", "l2", "max")


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
    return edges, *blocked_bin_sums(score, outcome, sample_weight, edges, _TOP_LABEL_ROWS)


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

    The equal-width top-label bins are a fused pass (with numba, one read of the
    probabilities: ``_fused._bins.top_label_sums``).
    """
    n_bins = check_n_bins(n_bins)
    check_option(strategy, "strategy", _STRATEGIES)
    check_option(norm, "norm", _NORMS)
    if strategy == "uniform" and convention == "top_label":
        sums = top_label_sums(data, n_bins, _TOP_LABEL_ROWS)
    else:
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
        The MCE, in [0, 1].

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
        The adaptive ECE, in [0, 1].

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
        The classwise ECE, in [0, 1].

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
    one group), block by block of rows (``_fused._bins.classwise_sums``).

    Returns
    -------
    sums : ndarray of shape (n_groups, 3 * n_classes * n_bins)
        The weights' sums, then the probabilities', then the indicators'.
    """
    return classwise_sums(data, n_bins, block_rows(data.n_classes), group, n_groups)


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
