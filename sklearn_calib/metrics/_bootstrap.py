"""Bootstrap confidence intervals for calibration metrics."""

import functools
import inspect
import warnings

import numpy as np
from scipy.stats import norm
from sklearn.utils import Bunch, check_random_state

from .._validation import check_classification_inputs
from ._binning import assign_bins, uniform_bin_edges
from ._debiased import debiased_calibration_error, debiased_plan
from ._decomposition import per_sample_score
from ._dispatch import dask_aware
from ._metrics import (
    _calibration_error_from_bins,
    _check_option,
    _row_blocks,
    adaptive_calibration_error,
    binned_columns,
    brier_score,
    classwise_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    scores_and_outcomes,
    top_label_accuracy,
)
from ._resampling import (
    ResamplingPlan,
    bootstrap_sums,
    cell_sums,
    check_interval_options,
    resampled_counts,
)
from ._smooth import smooth_ece, smooth_ece_plan
from ._top_label import top_label_calibration_error, top_label_plan

CI_METHODS = ("percentile", "bca")
#: Groups of the delete-a-group jackknife that estimates BCa's acceleration: from the
#: resampling groups of a plan, or of rows for a metric without plan (one call each).
_PLAN_JACKKNIFE_GROUPS = 200
_ROW_JACKKNIFE_GROUPS = 50


def _binned_plan(
    y_true,
    y_prob,
    *,
    n_bins=15,
    strategy="uniform",
    norm="l1",
    convention="top_label",
    labels=None,
    sample_weight=None,
):
    """Plan of the binned top-label (or positive-class) errors: ECE, MCE, adaptive ECE."""
    y_index, proba, sample_weight = check_classification_inputs(
        y_true, y_prob, labels=labels, sample_weight=sample_weight
    )
    score, outcome = scores_and_outcomes(proba, y_index, convention)
    cell, columns = binned_columns(score, outcome, sample_weight, n_bins, strategy)

    def accumulate(group, n_groups):
        return cell_sums(group, n_groups, cell, n_bins, columns)

    def value(sums):
        return _calibration_error_from_bins(*np.split(sums, 3, axis=-1), norm)

    return ResamplingPlan(score.shape[0], 3 * n_bins, accumulate, value)


def _classwise_plan(y_true, y_prob, *, n_bins=15, norm="l1", labels=None, sample_weight=None):
    """Plan of the classwise ECE: per (class, bin) sums of weight, probability, indicator."""
    y_index, proba, sample_weight = check_classification_inputs(
        y_true, y_prob, labels=labels, sample_weight=sample_weight
    )
    n_rows, n_classes = proba.shape
    edges = uniform_bin_edges(n_bins)
    n_cells = n_classes * n_bins
    offsets = np.arange(n_classes) * n_bins
    classes = np.arange(n_classes)

    def accumulate(group, n_groups):
        sums = np.zeros((n_groups, 3 * n_cells))
        for rows in _row_blocks(n_rows, n_classes):
            block = proba[rows].ravel().astype(np.float64)
            cell = (assign_bins(block, edges).reshape(-1, n_classes) + offsets).ravel()
            weight = np.ones(block.shape[0])
            if sample_weight is not None:
                weight = np.repeat(sample_weight[rows], n_classes)
            is_class = (y_index[rows, None] == classes).ravel()
            columns = [weight, weight * block, weight * is_class]
            sums += cell_sums(np.repeat(group[rows], n_classes), n_groups, cell, n_cells, columns)
        return sums

    def value(sums):
        parts = [
            part.reshape(part.shape[:-1] + (n_classes, n_bins))
            for part in np.split(sums, 3, axis=-1)
        ]
        return _calibration_error_from_bins(*parts, norm).mean(axis=-1)

    return ResamplingPlan(n_rows, 3 * n_cells, accumulate, value)


def _mean_plan(per_sample):
    """Plan of a weighted mean of a per-sample quantity (Brier, NLL, accuracy)."""

    def plan(y_true, y_prob, *, labels=None, sample_weight=None):
        y_index, proba, sample_weight = check_classification_inputs(
            y_true, y_prob, labels=labels, sample_weight=sample_weight
        )
        values = per_sample(proba, y_index)
        weight = np.ones(values.shape[0]) if sample_weight is None else sample_weight
        cell = np.zeros(values.shape[0], dtype=np.intp)

        def accumulate(group, n_groups):
            return cell_sums(group, n_groups, cell, 1, [weight, weight * values])

        def value(sums):
            return sums[..., 1] / sums[..., 0]

        return ResamplingPlan(values.shape[0], 2, accumulate, value)

    return plan


def _accuracy_per_sample(proba, y_index):
    return scores_and_outcomes(proba, y_index)[1].astype(np.float64)


def _fixed(plan, **fixed):
    """A plan builder with some of the metric's options fixed (MCE, adaptive ECE)."""

    def builder(y_true, y_prob, **kwargs):
        return plan(y_true, y_prob, **kwargs, **fixed)

    return builder


#: The metrics whose replicates come from resampled sums, and their plan builders.
_PLANS = {
    expected_calibration_error: _binned_plan,
    maximum_calibration_error: _fixed(_binned_plan, norm="max"),
    adaptive_calibration_error: _fixed(_binned_plan, strategy="quantile"),
    classwise_calibration_error: _classwise_plan,
    top_label_calibration_error: top_label_plan,
    debiased_calibration_error: debiased_plan,
    smooth_ece: smooth_ece_plan,
    brier_score: _mean_plan(functools.partial(per_sample_score, score="brier")),
    negative_log_likelihood: _mean_plan(functools.partial(per_sample_score, score="log_loss")),
    top_label_accuracy: _mean_plan(_accuracy_per_sample),
}


def _check_metric_arguments(metric, metric_kwargs, labels, sample_weight):
    """Check that ``metric`` takes the given keyword arguments; name the valid ones."""
    if not callable(metric):
        raise ValueError(
            f"Expected `metric` to be a metric function such as expected_calibration_error, "
            f"got {metric!r}."
        )
    parameters = inspect.signature(metric).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    valid = [
        name
        for name, p in parameters.items()
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ][2:]
    given = list(metric_kwargs)
    if labels is not None:
        given.append("labels")
    needs_weights = metric not in _PLANS
    if sample_weight is not None or needs_weights:
        given.append("sample_weight")
    unknown = [name for name in given if name not in valid]
    if unknown:
        raise ValueError(
            f"{getattr(metric, '__name__', metric)!r} takes no argument(s) {unknown} "
            f"(resampling a metric without a plan needs `sample_weight`); its arguments "
            f"are {valid}."
        )


def _percentiles(replicates, estimate, jackknife, confidence_level, method):
    """The interval's probability levels: equal tails, or bias-corrected and accelerated."""
    alpha = (1.0 - confidence_level) / 2.0
    if method == "percentile":
        return alpha, 1.0 - alpha
    below = np.mean(replicates < estimate) + 0.5 * np.mean(replicates == estimate)
    n = replicates.shape[0]
    if below < 0.5 / n or below > 1.0 - 0.5 / n:
        warnings.warn(
            f"BCa: {100 * below:.1f} % of the bootstrap replicates lie below the estimate, so "
            "the bias correction is extreme and the interval unreliable (the estimator is "
            "strongly biased at this sample size); the share is clipped to "
            f"[{0.5 / n:g}, {1 - 0.5 / n:g}].",
            UserWarning,
            stacklevel=3,
        )
        below = min(max(below, 0.5 / n), 1.0 - 0.5 / n)
    bias = norm.ppf(below)
    deviation = jackknife.mean() - jackknife
    spread = np.sum(deviation**2)
    acceleration = np.sum(deviation**3) / (6.0 * spread**1.5) if spread > 0 else 0.0
    levels = []
    for z in (norm.ppf(alpha), norm.ppf(1.0 - alpha)):
        shifted = bias + z
        levels.append(float(norm.cdf(bias + shifted / (1.0 - acceleration * shifted))))
    return tuple(levels)


def _planned_replicates(plan, n_resamples, rng, method):
    """Replicates from resampled group sums; the delete-a-group jackknife for BCa."""
    group_sums, replicate_sums = bootstrap_sums(plan, n_resamples, rng)
    replicates = plan.value(replicate_sums)
    jackknife = None
    if method == "bca":
        # the groups are random, so merging them in turn gives random equal super-groups
        n_groups = group_sums.shape[0]
        merged = np.zeros((min(n_groups, _PLAN_JACKKNIFE_GROUPS), group_sums.shape[1]))
        np.add.at(merged, np.arange(n_groups) % merged.shape[0], group_sums)
        jackknife = plan.value(merged.sum(axis=0) - merged)
    return replicates, jackknife


def _row_replicates(metric, arguments, n_rows, sample_weight, n_resamples, rng, method):
    """Replicates by calling ``metric`` with resampled rows as integer weights."""
    weight = np.ones(n_rows) if sample_weight is None else np.asarray(sample_weight, float)
    counts = resampled_counts(rng, n_resamples, n_rows)
    replicates = np.array(
        [metric(*arguments.args, **arguments.kwargs, sample_weight=c * weight) for c in counts]
    )
    jackknife = None
    if method == "bca":
        n_groups = min(n_rows, _ROW_JACKKNIFE_GROUPS)
        group = rng.permutation(n_rows) % n_groups
        jackknife = np.array(
            [
                metric(*arguments.args, **arguments.kwargs, sample_weight=(group != g) * weight)
                for g in range(n_groups)
            ]
        )
    return replicates, jackknife


@dask_aware
def calibration_error_ci(
    metric,
    y_true,
    y_prob,
    *,
    n_resamples=1000,
    confidence_level=0.95,
    method="percentile",
    random_state=None,
    labels=None,
    sample_weight=None,
    **metric_kwargs,
):
    """Bootstrap confidence interval of a calibration metric.

    The rows (samples) are resampled with replacement ``n_resamples`` times and the
    metric recomputed on each replicate; ``method="percentile"`` takes the replicates'
    ``(1 - confidence_level) / 2`` quantiles, ``method="bca"`` Efron's bias-corrected
    and accelerated ones (bias from the share of replicates below the estimate,
    acceleration from a jackknife).

    The metrics of this library are resampled without recomputing them from scratch: the
    samples are binned once (ECE, MCE, adaptive, classwise, top-label and debiased errors;
    smECE's kernel grid; the means of Brier score, NLL and accuracy) and the bootstrap
    draws counts of groups of samples, so 1,000 replicates cost about as much as a few
    metric calls whatever the number of samples. Up to 4,096 samples this is exactly the
    bootstrap of rows; beyond, the rows are split at random into 4,096 (fewer for
    statistics of many classes) equal groups that are resampled as blocks, which gives
    the resampled bin sums the same mean and covariance as resampling rows. Bins and
    smECE's bandwidth stay those of the full sample (so the adaptive bins' edges and the
    automatic bandwidth are held fixed). Other metrics, and any function that takes
    ``sample_weight``, are called once per replicate with the resampled counts as integer
    weights, which equals resampling rows for every metric of this library except the
    debiased error (its weights are importance weights; it has a plan).

    Parameters
    ----------
    metric : callable
        ``metric(y_true, y_prob, **metric_kwargs)`` returning a float, for example
        :func:`expected_calibration_error`.
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    n_resamples : int, default=1000
        Number of bootstrap replicates (at least 10).
    confidence_level : float, default=0.95
        Coverage of the interval, in (0, 1).
    method : {"percentile", "bca"}, default="percentile"
        How the interval is read off the replicates.
    random_state : int, RandomState instance or None, default=None
        Seeds the resampling.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``, passed to ``metric``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, passed to ``metric``; rows are resampled with equal probability
        and keep their weights.
    **metric_kwargs
        Options of ``metric`` (for example ``n_bins=10``).

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        ``estimate`` (the metric on the full sample), ``low`` and ``high`` (the interval),
        ``replicates`` (ndarray of shape (n_resamples,)), ``confidence_level`` and
        ``method``.

    See Also
    --------
    calibration_report : Intervals of several errors, tests and decompositions at once.
    smooth_reliability_diagram : A bootstrap band around the smooth reliability curve.

    References
    ----------
    .. [1] B. Efron and R. J. Tibshirani, "An Introduction to the Bootstrap", Chapman &
       Hall, 1993 (percentile and BCa intervals, chapters 13-14).
    .. [2] A. Kumar, P. Liang and T. Ma, "Verified Uncertainty Calibration", Advances in
       Neural Information Processing Systems 32, 2019 (bootstrap intervals of
       calibration errors).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.scoring import calibration_error_ci, expected_calibration_error
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(5000)
    >>> y = rng.random(5000) < p ** 1.5
    >>> ci = calibration_error_ci(expected_calibration_error, y, p, n_bins=10,
    ...                           convention="positive_class", random_state=0)
    >>> bool(ci.low <= ci.estimate <= ci.high), ci.replicates.shape
    (True, (1000,))
    """
    _check_option(method, "method", CI_METHODS)
    n_resamples, confidence_level = check_interval_options(n_resamples, confidence_level)
    _check_metric_arguments(metric, metric_kwargs, labels, sample_weight)
    rng = check_random_state(random_state)
    options = dict(metric_kwargs)
    if labels is not None:
        options["labels"] = labels
    estimate = metric(y_true, y_prob, sample_weight=sample_weight, **options)
    if metric in _PLANS:
        plan = _PLANS[metric](y_true, y_prob, sample_weight=sample_weight, **options)
        replicates, jackknife = _planned_replicates(plan, n_resamples, rng, method)
    else:
        n_rows = check_classification_inputs(y_true, y_prob, labels=labels)[1].shape[0]
        arguments = inspect.signature(metric).bind_partial(y_true, y_prob, **options)
        replicates, jackknife = _row_replicates(
            metric, arguments, n_rows, sample_weight, n_resamples, rng, method
        )
    replicates = np.asarray(replicates, dtype=np.float64)
    if not np.isfinite(replicates).all():
        raise ValueError(
            f"{getattr(metric, '__name__', metric)!r} returned non-finite values on "
            "bootstrap replicates; it cannot be resampled."
        )
    levels = _percentiles(replicates, float(estimate), jackknife, confidence_level, method)
    low, high = np.quantile(replicates, levels)
    return Bunch(
        estimate=float(estimate),
        low=float(low),
        high=float(high),
        replicates=replicates,
        confidence_level=confidence_level,
        method=method,
    )
