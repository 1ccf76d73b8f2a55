"""Bootstrap confidence intervals for calibration metrics."""

import inspect
import numbers
import warnings

import numpy as np
from scipy.stats import norm
from sklearn.utils import Bunch, check_random_state

from ..._validation import check_option
from .._core._dispatch import dask_aware
from .._core._registry import KERNELS
from .._core._resampling import (
    bootstrap_sums,
    check_interval_options,
    draw_resampling,
    group_count,
    resample,
    resampled_counts,
)
from .._core._scores import resolve_convention
from .._functions._predictions import check_predictions

CI_METHODS = ("percentile", "bca")
#: Groups of the delete-a-group jackknife that estimates BCa's acceleration: from the
#: resampling groups of a plan, or of rows for a metric without plan (one call each).
_PLAN_JACKKNIFE_GROUPS = 200
_ROW_JACKKNIFE_GROUPS = 50


class BootstrapInterval(Bunch):
    """Result of :func:`calibration_error_ci`: a bootstrap interval and its replicates.

    A :class:`~sklearn.utils.Bunch` (its entries are keys and attributes) whose ``repr``
    is one line, without the replicates.

    Attributes
    ----------
    estimate : float
        The metric on the full sample.
    low, high : float
        The interval.
    replicates : ndarray of shape (n_resamples,)
        The metric on each bootstrap replicate.
    confidence_level : float
        The interval's coverage.
    ci_method : {"percentile", "bca"}
        How the interval was read off the replicates.
    flags : dict of str to str
        What makes the interval suspect, by kind, with an explanation; empty when
        nothing does. ``"excludes_estimate"``: the interval lies above (or below) the
        estimate; ``"zero_width"``: it has (or collapses to) zero width.
    """

    def __repr__(self):
        parts = [
            f"estimate={self.estimate:.6g}",
            f"low={self.low:.6g}",
            f"high={self.high:.6g}",
            f"confidence_level={self.confidence_level:g}",
            f"ci_method={self.ci_method!r}",
            f"n_resamples={self.replicates.shape[0]}",
        ]
        if self.flags:
            parts.append(f"flags={sorted(self.flags)}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def __getitem__(self, key):
        if key == "method":
            warnings.warn(
                "The `method` entry of a bootstrap interval was renamed `ci_method` and will "
                "be removed; read `ci_method` instead.",
                FutureWarning,
                stacklevel=3,
            )
            key = "ci_method"
        return super().__getitem__(key)


def _check_metric_arguments(metric, metric_kwargs, labels, sample_weight):
    """Check that ``metric`` takes the given keyword arguments; name the valid ones."""
    if not callable(metric):
        raise ValueError(
            f"Expected `metric` to be a metric function such as expected_calibration_error, "
            f"got {metric!r}."
        )
    if "groups" in metric_kwargs:
        raise ValueError(
            "calibration_error_ci gives the interval of one error over all the samples and "
            "takes no `groups`; calibration_audit gives each group's intervals."
        )
    parameters = inspect.signature(metric).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    valid = [
        name
        for name, p in parameters.items()
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ][2:]
    name = getattr(metric, "__name__", metric)
    given = list(metric_kwargs) + (["labels"] if labels is not None else [])
    if sample_weight is not None:
        given.append("sample_weight")
    unknown = [option for option in given if option not in valid]
    if unknown:
        raise ValueError(f"{name!r} takes no argument(s) {unknown}; its arguments are {valid}.")
    if metric not in KERNELS and "sample_weight" not in valid:
        raise ValueError(
            f"{name!r} takes no `sample_weight`: calibration_error_ci resamples a metric of "
            "its own by calling it with the resampled rows' counts as `sample_weight`; its "
            f"arguments are {valid}."
        )


def _check_ci_method(ci_method, metric_kwargs):
    """Return the interval method, taking the deprecated ``method`` spelling out of the options.

    ``method`` names the interval method when its value is one (with a FutureWarning);
    any other value is an option of the metric (``smooth_calibration_error``'s method).
    """
    method = metric_kwargs.get("method")
    if isinstance(method, str) and method in CI_METHODS:
        if ci_method != "percentile":
            raise ValueError(
                f"Got both `ci_method={ci_method!r}` and `method={method!r}`; pass the "
                "interval method as `ci_method` only."
            )
        warnings.warn(
            "The `method` argument of calibration_error_ci was renamed `ci_method` (as in "
            "calibration_report); `method` will be passed to the metric.",
            FutureWarning,
            stacklevel=4,  # through calibration_error_ci (or its Dask handler) and dask_aware
        )
        ci_method = metric_kwargs.pop("method")
    return check_option(ci_method, "ci_method", CI_METHODS)


def _percentiles(replicates, estimate, jackknife, confidence_level, ci_method):
    """The interval's probability levels: equal tails, or bias-corrected and accelerated."""
    alpha = (1.0 - confidence_level) / 2.0
    if ci_method == "percentile":
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
            stacklevel=4,
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


def _planned_replicates(plan, group_sums, replicate_sums, ci_method):
    """Replicates from resampled group sums; the delete-a-group jackknife for BCa."""
    replicates = plan.value(replicate_sums)
    jackknife = None
    if ci_method == "bca":
        # the groups are random, so merging them in turn gives random equal super-groups
        n_groups = group_sums.shape[0]
        merged = np.zeros((min(n_groups, _PLAN_JACKKNIFE_GROUPS), group_sums.shape[1]))
        np.add.at(merged, np.arange(n_groups) % merged.shape[0], group_sums)
        jackknife = plan.value(merged.sum(axis=0) - merged)
    return replicates, jackknife


def _row_replicates(evaluate, weight, n_resamples, rng, ci_method):
    """Replicates by evaluating the metric with resampled rows as integer weights.

    ``evaluate(w)`` computes the metric with weights ``w`` on the resampled rows, whose
    own weights are ``weight``.
    """
    n_rows = weight.shape[0]
    counts = resampled_counts(rng, n_resamples, n_rows)
    replicates = np.array([evaluate(c * weight) for c in counts])
    jackknife = None
    if ci_method == "bca":
        n_groups = min(n_rows, _ROW_JACKKNIFE_GROUPS)
        group = rng.permutation(n_rows) % n_groups
        jackknife = np.array([evaluate((group != g) * weight) for g in range(n_groups)])
    return replicates, jackknife


def _as_estimate(value, name, options):
    """Return a metric's value as a float; a clear error when it is not one number."""
    if isinstance(value, (numbers.Real, np.ndarray)) and np.ndim(value) == 0:
        return float(value)
    hint = ""
    if options.get("return_bandwidth"):
        hint = (
            " (drop return_bandwidth=True: the interval is of the error alone; "
            "smooth_ece(..., return_bandwidth=True) gives the bandwidth, and passing it as "
            "`bandwidth=` holds it fixed)"
        )
    raise ValueError(
        f"{name!r} returned {value!r}, not a number: calibration_error_ci needs a metric "
        f"that returns one float{hint}."
    )


def _flags(estimate, low, high, replicates, levels, ci_method):
    """What makes an interval suspect, by kind, with an explanation."""
    flags = {}
    n = replicates.shape[0]
    if max(levels) < 1.0 / n or min(levels) > 1.0 - 1.0 / n:
        side = ("smallest", "below") if max(levels) < 1.0 / n else ("largest", "above")
        flags["zero_width"] = (
            f"BCa's levels ({levels[0]:.2g}, {levels[1]:.2g}) lie beyond the resolution of "
            f"{n} replicates, so the interval collapses onto the {side[0]} replicate (almost "
            f"no replicate lies {side[1]} the estimate: the bias correction is extreme)"
        )
    elif high <= low:
        distinct = np.unique(replicates).shape[0]
        flags["zero_width"] = (
            f"zero width: the {n} replicates take {distinct} distinct value(s), too few "
            "distinct resamples to read an interval off"
        )
    if estimate < low:
        flags["excludes_estimate"] = (
            "the interval lies above the estimate: resampling inflates a plug-in calibration "
            "error (each replicate adds sampling noise to the gaps it averages)"
            + ("; ci_method='bca' corrects for the shift" if ci_method == "percentile" else "")
        )
    elif estimate > high:
        flags["excludes_estimate"] = (
            "the interval lies below the estimate: the replicates are shifted from it (the "
            "estimator is biased at this sample size)"
            + ("; ci_method='bca' corrects for the shift" if ci_method == "percentile" else "")
        )
    return flags


def bootstrap_interval(
    kernel, data, options, *, n_resamples, confidence_level, ci_method, rng, name
):
    """The bootstrap interval of a metric's kernel on checked predictions.

    Parameters
    ----------
    kernel : MetricKernel
        The metric's kernel and plan.
    data : Predictions
        Checked predictions.
    options : dict
        The metric's options.
    n_resamples, confidence_level, ci_method, rng
        As in :func:`calibration_error_ci` (checked, ``rng`` a ``RandomState``).
    name : str
        The metric's name, for error messages.

    Returns
    -------
    result : BootstrapInterval
    """
    estimate = _as_estimate(kernel.compute(data, **options), name, options)
    resampled = _resampled_rows(data)
    if kernel.plan is not None:
        plan = kernel.plan(resampled, **options)
        sums = bootstrap_sums(plan, resample(plan, n_resamples, rng))
        replicates, jackknife = _planned_replicates(plan, *sums, ci_method)
    else:

        def evaluate(weight):
            return kernel.compute(resampled.reweighted(weight), **options)

        replicates, jackknife = _row_replicates(
            evaluate, resampled.weight, n_resamples, rng, ci_method
        )
    return _interval(estimate, replicates, jackknife, confidence_level, ci_method, name)


def shared_bootstrap_intervals(metrics, data, *, n_resamples, confidence_level, ci_method, rng):
    """The bootstrap intervals of several planned metrics, read off the same replicates.

    The rows are split into groups and resampled once for all the metrics (into as many
    groups as the metric with the most statistics affords), so each replicate is one
    resampled data set on which every metric is computed; the replicates' sums of all
    the metrics come from one matrix product.

    Parameters
    ----------
    metrics : list of (MetricKernel, dict, str)
        Each metric's kernel (with a plan), options and name.
    data : Predictions
        Checked predictions.
    n_resamples, confidence_level, ci_method, rng
        As in :func:`calibration_error_ci` (checked, ``rng`` a ``RandomState``).

    Returns
    -------
    intervals : list of BootstrapInterval
    """
    resampled = _resampled_rows(data)
    plans = [kernel.plan(resampled, **options) for kernel, options, _ in metrics]
    n_groups = min(group_count(plan.n_rows, plan.n_stats, n_resamples) for plan in plans)
    resampling = draw_resampling(resampled.n_samples, n_groups, n_resamples, rng)
    group_sums = [plan.accumulate(resampling.group, n_groups) for plan in plans]
    replicate_sums = np.split(
        resampling.counts @ np.hstack(group_sums),
        np.cumsum([plan.n_stats for plan in plans])[:-1],
        axis=1,
    )
    intervals = []
    for (kernel, options, name), plan, *sums in zip(
        metrics, plans, group_sums, replicate_sums, strict=True
    ):
        estimate = _as_estimate(kernel.compute(data, **options), name, options)
        replicates, jackknife = _planned_replicates(plan, *sums, ci_method)
        intervals.append(
            _interval(estimate, replicates, jackknife, confidence_level, ci_method, name)
        )
    return intervals


def _resampled_rows(data):
    """The rows a bootstrap draws from: those of positive weight, at least two."""
    resampled = data.weighted_rows()
    if resampled.n_samples < 2:
        raise ValueError(
            f"Expected `sample_weight` to be positive on at least 2 samples to resample them, "
            f"got {resampled.n_samples} positive weight(s) among {data.n_samples} samples: "
            "every bootstrap replicate would repeat the same sample."
        )
    return resampled


def _interval(estimate, replicates, jackknife, confidence_level, ci_method, name):
    """Read the interval off the replicates and flag what makes it suspect."""
    replicates = np.asarray(replicates, dtype=np.float64)
    if not np.isfinite(replicates).all():
        raise ValueError(
            f"{name!r} returned non-finite values on bootstrap replicates; it cannot be resampled."
        )
    levels = _percentiles(replicates, estimate, jackknife, confidence_level, ci_method)
    low, high = (float(end) for end in np.quantile(replicates, levels))
    return BootstrapInterval(
        estimate=estimate,
        low=low,
        high=high,
        replicates=replicates,
        confidence_level=confidence_level,
        ci_method=ci_method,
        flags=_flags(estimate, low, high, replicates, levels, ci_method),
    )


@dask_aware
def calibration_error_ci(
    metric,
    y_true,
    y_prob,
    *,
    n_resamples=1000,
    confidence_level=0.95,
    ci_method="percentile",
    random_state=None,
    labels=None,
    sample_weight=None,
    **metric_kwargs,
):
    """Bootstrap confidence interval of a calibration metric.

    The rows (samples) are resampled with replacement ``n_resamples`` times and the
    metric recomputed on each replicate; ``ci_method="percentile"`` takes the replicates'
    ``(1 - confidence_level) / 2`` quantiles, ``ci_method="bca"`` Efron's bias-corrected
    and accelerated ones (bias from the share of replicates below the estimate,
    acceleration from a jackknife). An interval that lies above or below its estimate (a
    plug-in calibration error's bias), or that has zero width, is flagged in the
    result's ``flags`` with an explanation.

    The metrics of this library are resampled without recomputing them from scratch: the
    samples are binned once (ECE, MCE, adaptive, classwise, top-label and debiased errors;
    smECE's kernel grid; the means of Brier score, NLL and accuracy) and the bootstrap
    draws counts of groups of samples, so 1,000 replicates cost about as much as a few
    metric calls whatever the number of samples. Up to 4,096 samples (fewer when the
    statistics are many: many classes, or smECE below a bandwidth of about 0.04 with
    1,000 replicates) this is exactly the bootstrap of rows: each replicate equals the
    metric on the resampled rows, repeated rows and all (for smECE this is not quite the
    metric with the resampled counts as ``sample_weight``, whose density epsilon follows
    the counts' mean: a relative difference below 1e-6); beyond, the rows are split at
    random into 4,096 (fewer for many statistics) equal groups resampled as blocks,
    which gives the resampled bin sums the same mean and covariance as resampling rows.
    Bins and smECE's bandwidth stay those of the full sample (so the adaptive bins' edges
    and the automatic bandwidth are held fixed). Other metrics, and any function that takes
    ``sample_weight``, are called once per replicate with the resampled counts as integer
    weights, which equals resampling rows for every metric of this library except the
    debiased error (its weights are importance weights; it has a plan). Rows of weight 0
    stand for no sample and are not resampled; at least two rows must have a positive
    weight.

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
    ci_method : {"percentile", "bca"}, default="percentile"
        How the interval is read off the replicates (the ``ci_method`` of
        :func:`calibration_report`). It was called ``method``, which still works with a
        FutureWarning when its value is ``"percentile"`` or ``"bca"``; any other
        ``method`` is an option of the metric (such as
        :func:`smooth_calibration_error`'s).
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
    result : BootstrapInterval
        A :class:`~sklearn.utils.Bunch` of ``estimate`` (the metric on the full sample),
        ``low`` and ``high`` (the interval), ``replicates`` (ndarray of shape
        (n_resamples,)), ``confidence_level``, ``ci_method`` and ``flags`` (a dict of
        what makes the interval suspect, empty when nothing does); its repr is one line.

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
    >>> ci  # doctest: +ELLIPSIS
    BootstrapInterval(estimate=0.102835, low=0.0926488, high=0.112877, ...)
    >>> bool(ci.low <= ci.estimate <= ci.high), ci.replicates.shape
    (True, (1000,))
    """
    ci_method = _check_ci_method(ci_method, metric_kwargs)
    n_resamples, confidence_level = check_interval_options(n_resamples, confidence_level)
    _check_metric_arguments(metric, metric_kwargs, labels, sample_weight)
    rng = check_random_state(random_state)
    name = getattr(metric, "__name__", repr(metric))
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    settings = {
        "n_resamples": n_resamples,
        "confidence_level": confidence_level,
        "ci_method": ci_method,
        "rng": rng,
        "name": name,
    }
    if metric in KERNELS:
        if "convention" in metric_kwargs:
            metric_kwargs["convention"] = resolve_convention(
                metric_kwargs["convention"], data.n_classes, by_group=False
            )
        return bootstrap_interval(KERNELS[metric], data, metric_kwargs, **settings)
    # a metric of the user's: called on the raw input, with the rows' weights
    options = dict(metric_kwargs, **({} if labels is None else {"labels": labels}))
    estimate = metric(y_true, y_prob, sample_weight=sample_weight, **options)
    estimate = _as_estimate(estimate, name, options)
    resampled = _resampled_rows(data)
    rows = np.flatnonzero(data.weight)

    def evaluate(weight):
        if resampled is not data:  # the rows of weight 0 keep weight 0
            full = np.zeros(data.n_samples)
            full[rows] = weight
            weight = full
        return metric(y_true, y_prob, sample_weight=weight, **options)

    replicates, jackknife = _row_replicates(evaluate, resampled.weight, n_resamples, rng, ci_method)
    return _interval(estimate, replicates, jackknife, confidence_level, ci_method, name)
