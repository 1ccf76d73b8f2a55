"""Calibration by group: the worst group and the group audit.

Groups are read by ``_group_rows`` (a label per sample, or the intersections of several
columns). The audit estimates each group's errors with bootstrap intervals, tests each
group and corrects the p-values for the number of groups (Holm 1979, or Benjamini and
Hochberg 1995), and states the smallest miscalibration each group's size can detect.
"""

import inspect
import numbers
import warnings

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm
from sklearn.utils import Bunch, check_random_state

from ..._validation import check_n_bins, check_option
from .._core._binning import assign_bins, uniform_bin_edges
from .._core._group_rows import GroupedPredictions, metric_by_group
from .._core._registry import KERNELS
from .._core._resampling import check_interval_options
from .._core._scores import AUTO, resolve_convention
from .._functions._binned import expected_calibration_error
from .._functions._debiased import debiased_calibration_error
from .._functions._predictions import check_predictions
from .._functions._smece import _smooth_ece, smooth_ece
from ._bootstrap import CI_METHODS, bootstrap_interval
from ._group_change import change_columns, group_changes
from ._hypothesis_tests import _METHODS as TESTS
from ._hypothesis_tests import _brownian_max_sf, _brownian_range_sf, _calibration_test
from ._multiple_testing import CORRECTIONS, adjust_pvalues

#: The errors of the audit: key, label, metric, whether it takes ``n_bins``.
AUDIT_ERRORS = (
    ("ece", "ECE", expected_calibration_error, True),
    ("smooth_ece", "smECE", smooth_ece, False),
    ("debiased_ce", "debiased L2 CE", debiased_calibration_error, True),
)
#: ``|sum a w|`` below this share of ``sum |a w|`` is rounding of a zero drift.
_ROUNDING = 1e-12
#: Most random draws held at once by the consistency resampling.
_DRAWS_PER_BLOCK = 1 << 22
_TEST_NAMES = {"spiegelhalter": "Spiegelhalter", "ks": "Kolmogorov-Smirnov", "kuiper": "Kuiper"}
_CORRECTION_NAMES = {"holm": "Holm", "fdr_bh": "Benjamini-Hochberg"}


def worst_group_calibration_error(
    y_true,
    y_prob,
    *,
    groups=None,
    metric=expected_calibration_error,
    labels=None,
    sample_weight=None,
    **metric_kwargs,
):
    """The largest calibration error over groups: the worst-calibrated group's error.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    groups : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group labels, or columns whose distinct rows are the groups. Required; it is a
        keyword with a default only so that scikit-learn's scorers can route it as
        metadata (``set_score_request(groups=True)``).
    metric : callable, default=expected_calibration_error
        The error computed on each group's rows, such as :func:`smooth_ece`.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    **metric_kwargs
        Options of ``metric`` (for example ``n_bins=10``). A metric of this library that
        takes ``convention`` judges a binary problem's positive class unless
        ``convention="top_label"`` is given, as its values by group do (see
        :func:`calibration_audit`).

    Returns
    -------
    error : float
        ``max`` over the groups (with a positive weight) of ``metric`` on their rows.

    See Also
    --------
    calibration_audit : Every group's errors with intervals, tests and detectable sizes.

    Examples
    --------
    >>> from sklearn_calib.scoring import (
    ...     expected_calibration_error, worst_group_calibration_error)
    >>> y = [0, 1, 1, 0, 1, 1]
    >>> p = [0.2, 0.8, 0.6, 0.3, 0.9, 0.4]
    >>> groups = ["a", "a", "a", "b", "b", "b"]
    >>> worst = worst_group_calibration_error(y, p, groups=groups, n_bins=5)
    >>> options = {"n_bins": 5, "convention": "positive_class"}
    >>> worst == max(expected_calibration_error(y[:3], p[:3], **options),
    ...              expected_calibration_error(y[3:], p[3:], **options))
    True
    """
    if groups is None:
        raise ValueError(
            "worst_group_calibration_error needs `groups`; through a scorer, route them as "
            "metadata (sklearn.set_config(enable_metadata_routing=True) and "
            "scorer.set_score_request(groups=True)) or build the scorer with "
            "make_worst_group_scorer(group_features=...)."
        )
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    if metric in KERNELS and "convention" in inspect.signature(metric).parameters:
        metric_kwargs["convention"] = resolve_convention(
            metric_kwargs.get("convention", AUTO), data.n_classes, by_group=True
        )
    values = metric_by_group(_kernel(metric), data, groups, **metric_kwargs)
    return max(values.values())


def _kernel(metric):
    """The kernel of a metric of this library; another metric is called on each group's
    checked rows, its labels the column indices."""
    if metric in KERNELS:
        return KERNELS[metric].compute

    def compute(data, **options):
        return metric(
            data.y_index,
            data.proba,
            labels=np.arange(data.n_classes),
            sample_weight=data.sample_weight,
            **options,
        )

    return compute


def _critical_value(test, level):
    """The statistic above which ``test`` rejects at ``level`` (two-sided)."""
    if test == "spiegelhalter":
        return float(norm.isf(level / 2.0))
    survival = _brownian_max_sf if test == "ks" else _brownian_range_sf
    return float(brentq(lambda x: survival(x) - level, 1e-3, 50.0, xtol=1e-10))


def detectable_shift(score, weight, test, level, power):
    """Smallest uniform shift of the true probabilities ``test`` detects with ``power``.

    ``delta = (c + z_power) sigma_a / |sum_i a_i w_i|``; see the Notes of
    :func:`calibration_audit` for the derivation.

    Returns
    -------
    delta : float
        Infinite when ``sum a w = 0`` (Spiegelhalter's test cannot see a uniform shift of
        scores symmetric about 1/2).
    """
    weight = np.ones_like(score) if weight is None else weight
    factor = np.ones_like(score) if test != "spiegelhalter" else 1.0 - 2.0 * score
    drift = abs(float(np.sum(factor * weight)))
    spread = float(np.sqrt(np.sum((factor * weight) ** 2 * score * (1.0 - score))))
    if drift <= _ROUNDING * float(np.sum(np.abs(factor * weight))):
        return float("inf")
    return (_critical_value(test, level) + float(norm.ppf(power))) * spread / drift


def calibrated_ece_quantiles(scores, weights, n_bins, n_resamples, level, rng):
    """Quantiles of each group's ECE, and of the largest, were every group calibrated.

    Consistency resampling (Bröcker and Smith 2007): each replicate draws every sample's
    outcome from its own score (``o ~ Bernoulli(s)``), which makes the scores calibrated,
    and computes each group's ECE on equal-width bins; the scores, weights and bins stay
    those of the data. The ``level`` quantile of a group's replicates is the largest ECE
    its size and scores show by chance alone (with probability ``level``); that of the
    replicates' maximum over groups is the same for the worst group, the multiplicity of
    the groups included.

    Parameters
    ----------
    scores, weights : list of ndarray
        Each group's scores and sample weights (None for unit weights).
    n_bins : int
    n_resamples : int
    level : float
    rng : numpy.random.RandomState

    Returns
    -------
    per_group : ndarray of shape (n_groups,)
    worst : float
    """
    n_groups = len(scores)
    group = np.repeat(np.arange(n_groups), [score.shape[0] for score in scores])
    score = np.concatenate(scores)
    weight = np.concatenate(
        [np.ones_like(s) if w is None else w for s, w in zip(scores, weights, strict=True)]
    )
    n_rows, n_cells = score.shape[0], n_groups * n_bins
    cell = group * n_bins + assign_bins(score, uniform_bin_edges(n_bins))
    totals = np.bincount(group, weights=weight, minlength=n_groups)
    errors = np.empty((n_resamples, n_groups))
    step = max(1, _DRAWS_PER_BLOCK // n_rows)
    for start in range(0, n_resamples, step):
        count = min(step, n_resamples - start)
        residual = weight * ((rng.random_sample((count, n_rows)) < score) - score)
        key = (np.arange(count)[:, None] * n_cells + cell).ravel()
        sums = np.bincount(key, weights=residual.ravel(), minlength=count * n_cells)
        errors[start : start + count] = (
            np.abs(sums.reshape(count, n_groups, n_bins)).sum(axis=-1) / totals
        )
    return np.quantile(errors, level, axis=0), float(np.quantile(errors.max(axis=1), level))


def _check_fraction(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"Expected `{name}` to be a number in (0, 1), got {value!r}.")
    if not 0.0 < value < 1.0:
        raise ValueError(f"Expected `{name}` to be a number in (0, 1), got {value!r}.")
    return float(value)


def _check_min_group_size(value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"Expected `min_group_size` to be an integer >= 1, got {value!r}.")
    return int(value)


def calibration_audit(
    y_true,
    y_prob,
    groups,
    *,
    n_bins=15,
    convention="auto",
    test="ks",
    correction="holm",
    alpha=0.05,
    power=0.8,
    min_group_size=10,
    confidence_level=0.95,
    n_resamples=1000,
    ci_method="percentile",
    random_state=None,
    labels=None,
    sample_weight=None,
    y_prob_reference=None,
):
    """Audit calibration group by group: errors, corrected tests, the worst group.

    For each group (each distinct label of ``groups``, or each distinct row of its
    columns, their intersection):

    - the ECE, smECE and debiased L2 error with bootstrap intervals
      (:func:`calibration_error_ci`; smECE at the group's own automatic bandwidth). ECE
      and smECE are biased upward on small groups; the debiased error's interval reaches
      0 when the group's miscalibration is within its noise;
    - a test of calibration (:func:`calibration_test`) whose p-values are adjusted for
      the number of groups tested (:func:`adjust_pvalues`: Holm's family-wise, or
      Benjamini and Hochberg's false-discovery rate); a group is ``miscalibrated`` when
      its adjusted p-value is at most ``alpha``;
    - ``ece_null_high``: the ``confidence_level`` quantile of the group's ECE were it
      calibrated, by consistency resampling (Bröcker and Smith 2007: outcomes drawn from
      the scores themselves), the noise floor of the ECE at the group's size and scores;
    - ``detectable``: the smallest uniform shift ``delta`` of the true probabilities
      (``E[y | s] = s + delta`` for every score ``s`` of the group) that the group's test
      detects with probability ``power`` at level ``alpha / m``, ``m`` being the number
      of groups tested (Bonferroni's level, at which both corrections reject a group
      whatever the other p-values), ``delta = (c + z_power) sigma / |sum_i a_i w_i|``
      with ``c`` the test's critical value and ``sigma^2 = sum_i a_i^2 w_i^2 s_i (1 -
      s_i)`` (``a_i = 1`` for KS and Kuiper, ``1 - 2 s_i`` for Spiegelhalter; see the
      Notes). A shift smaller than ``detectable`` may go unnoticed at this size.

    The worst group has the largest ECE; ``worst_ece_null_high`` is the
    ``confidence_level`` quantile of the largest ECE over the groups were they all
    calibrated (the same resampling, the maximum taken in each replicate), so a worst ECE
    below it is within the noise of a multicalibrated model. Groups with fewer than
    ``min_group_size`` rows of positive weight are not audited (nor counted in ``m``);
    they are listed in ``skipped`` with their sizes, and a warning names them.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    groups : array-like of shape (n_samples,) or (n_samples, n_columns)
        A group label per sample, or several columns (a 2-D array or a DataFrame) whose
        distinct rows are the groups, named by the tuple of their values.
    n_bins : int, default=15
        Bins of ECE and the debiased error.
    convention : {"auto", "top_label", "positive_class"}, default="auto"
        What the errors and tests judge; see :func:`expected_calibration_error`.
        ``"auto"`` is ``"positive_class"`` for a binary problem (two classes, 1-D scores
        included), as scikit-learn's ``calibration_curve`` bins it, and ``"top_label"``
        beyond. The top label folds both tails of a binary model onto [0.5, 1]: a group
        whose log-odds are all too high is overconfident where it predicts the positive
        class and underconfident where it predicts the negative one, errors that nearly
        cancel in the same confidence bins, where the positive class shows the shift.
    test : {"ks", "kuiper", "spiegelhalter"}, default="ks"
        The test of each group (two-sided).
    correction : {"holm", "fdr_bh"}, default="holm"
        The multiple-testing correction.
    alpha : float, default=0.05
        Level of the corrected tests, in (0, 1).
    power : float, default=0.8
        Power of ``detectable``, in (0, 1).
    min_group_size : int, default=10
        Fewest rows (of positive weight) of an audited group.
    confidence_level : float, default=0.95
        Coverage of the intervals.
    n_resamples : int, default=1000
        Bootstrap replicates per interval.
    ci_method : {"percentile", "bca"}, default="percentile"
        How the intervals are read off the replicates.
    random_state : int, RandomState instance or None, default=None
        Seeds the resampling.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    y_prob_reference : array-like of the shape of ``y_prob``, default=None
        Probabilities of the same rows before calibration (the scores a calibrator was
        given): the audit then names the groups the calibration made worse. Each
        group's log-loss change is tested by a paired t test over its rows, its ECE
        change by a paired bootstrap of its rows (``n_resamples`` replicates, two-sided
        p-value); the p-values of each metric are corrected over the groups
        (``correction``), and a group is made worse when a corrected p-value is at most
        ``alpha`` with a positive change (:func:`paired_change_test`).

    Returns
    -------
    audit : :class:`~sklearn.utils.Bunch`
        ``table``: a dict of equal-length columns, one row per audited group
        (``pandas.DataFrame(audit.table)`` shows it): ``group``, ``n_samples``, for
        each error ``ece``, ``smooth_ece``, ``debiased_ce`` its estimate, its
        ``<name>_low`` and ``<name>_high`` bounds and ``<name>_flags`` (a dict per group
        of what makes the interval suspect, as in :func:`calibration_error_ci`: on a small
        group the interval often lies above a plug-in error's estimate, or below a
        debiased error clipped at 0; empty when nothing does), ``statistic``, ``pvalue``,
        ``pvalue_adjusted``, ``miscalibrated``, ``ece_null_high`` and ``detectable``;
        ``worst_group`` (the label with the largest ECE), ``worst_ece``,
        ``worst_ece_null_high``, ``n_miscalibrated``,
        ``skipped`` (dict of label to size) and the settings ``test``, ``correction``,
        ``alpha``, ``power``, ``confidence_level``, ``convention``, ``n_bins``; and
        ``made_worse``, the labels of the groups made worse (None without
        ``y_prob_reference``), whose table then has, for ``ece`` and ``log_loss``,
        ``<name>_reference`` (the reference's value), ``<name>_change`` (calibrated
        minus reference), ``<name>_change_pvalue_adjusted`` and ``<name>_worse``.

    See Also
    --------
    calibration_report : With ``groups=``, prints this audit after the overall report.
    worst_group_calibration_error : The worst group's error alone, for model selection.
    sklearn_calib.calibrators.MulticalibrationBoosting : Corrects what the audit finds.

    Notes
    -----
    The smallest detectable shift. Under a shift ``E[y | s] = s + delta`` of every score
    ``s`` of a group of samples ``i`` (weights ``w_i``), the tests' statistics are at
    least ``T = |sum_i a_i w_i (y_i - s_i)| / sigma``, with ``sigma^2 = sum_i a_i^2 w_i^2
    s_i (1 - s_i)`` the null variance of the sum: Spiegelhalter's ``|Z|`` is ``T`` with
    ``a_i = 1 - 2 s_i``; KS's ``max |C|`` and Kuiper's ``max C - min C`` are at least
    the last partial sum ``|C(1)|`` (``C(0) = 0``), ``T`` with ``a_i = 1``. The sum is
    approximately normal with mean ``delta sum_i a_i w_i`` and, for a small ``delta``,
    variance ``sigma^2``, so ``T`` exceeds the test's critical value ``c`` (at level
    ``alpha / m``) with probability at least ``Phi(mu - c)``, ``mu = delta |sum_i a_i
    w_i| / sigma``. That reaches ``power`` once ``mu >= c + z_power``:

    ``delta = (c + z_power) sigma / |sum_i a_i w_i|``,

    exact to first order for Spiegelhalter's test and an upper bound of the smallest
    detectable shift for KS and Kuiper (infinite for Spiegelhalter's test when ``sum_i
    a_i w_i = 0``: it cannot see a uniform shift of scores symmetric about 1/2). For
    ``n`` unweighted samples with scores near ``s`` it is ``(c + z_power) sqrt(s (1 - s)
    / n)``, about ``3.1 sqrt(s (1 - s) / n)`` for one group tested by KS at level 0.05
    with 80 % power: it shrinks as one over the square root of the group's size.

    References
    ----------
    .. [1] U. Hébert-Johnson, M. P. Kim, O. Reingold and G. N. Rothblum,
       "Multicalibration: Calibration for the (Computationally-Identifiable) Masses",
       International Conference on Machine Learning, 2018.
    .. [2] S. Holm, "A Simple Sequentially Rejective Multiple Test Procedure",
       Scandinavian Journal of Statistics 6(2), 1979.
    .. [3] Y. Benjamini and Y. Hochberg, "Controlling the False Discovery Rate: A
       Practical and Powerful Approach to Multiple Testing", Journal of the Royal
       Statistical Society B 57(1), 1995.
    .. [4] J. Bröcker and L. A. Smith, "Increasing the Reliability of Reliability
       Diagrams", Weather and Forecasting 22(3), 2007.

    Examples
    --------
    Scores calibrated overall, too high in group "a" and too low in group "b":

    >>> import numpy as np
    >>> from sklearn_calib.scoring import calibration_audit
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(0.2, 0.8, size=4000)
    >>> groups = np.where(rng.random(4000) < 0.5, "a", "b")
    >>> truth = np.clip(p + np.where(groups == "a", -0.1, 0.1), 0, 1)
    >>> y = rng.random(4000) < truth
    >>> audit = calibration_audit(y, p, groups, convention="positive_class",
    ...                           n_resamples=200, random_state=0)
    >>> audit.table["group"], audit.table["miscalibrated"]
    (['a', 'b'], array([ True,  True]))
    >>> audit.table["detectable"].round(3)
    array([0.035, 0.035])

    Against the scores before a calibration that lowered group "b"'s scores further:
    the audit names the group it made worse.

    >>> worse = np.where(groups == "b", p - 0.1, p)
    >>> audit = calibration_audit(y, worse, groups, convention="positive_class",
    ...                           n_resamples=200, random_state=0, y_prob_reference=p)
    >>> audit.made_worse
    ['b']
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    reference = None
    if y_prob_reference is not None:
        try:
            reference = check_predictions(
                y_true, y_prob_reference, labels=labels, sample_weight=sample_weight
            )
        except ValueError as exc:
            raise ValueError(f"Bad `y_prob_reference` (checked as `y_prob`): {exc}") from exc
        if reference.n_classes != data.n_classes:
            raise ValueError(
                f"Expected `y_prob_reference` with the {data.n_classes} classes of `y_prob`, "
                f"got {reference.n_classes}."
            )
    return _calibration_audit(
        data,
        groups,
        reference=reference,
        n_bins=n_bins,
        convention=convention,
        test=test,
        correction=correction,
        alpha=alpha,
        power=power,
        min_group_size=min_group_size,
        confidence_level=confidence_level,
        n_resamples=n_resamples,
        ci_method=ci_method,
        random_state=random_state,
    )


def _calibration_audit(
    data,
    groups,
    *,
    n_bins=15,
    convention="auto",
    test="ks",
    correction="holm",
    alpha=0.05,
    power=0.8,
    min_group_size=10,
    confidence_level=0.95,
    n_resamples=1000,
    ci_method="percentile",
    random_state=None,
    reference=None,
):
    """:func:`calibration_audit` of checked predictions (:class:`Predictions`), with the
    changes from the ``reference`` predictions of the same rows when given."""
    n_bins = check_n_bins(n_bins)
    convention = resolve_convention(convention, data.n_classes, by_group=True)
    check_option(test, "test", TESTS)
    check_option(correction, "correction", CORRECTIONS)
    check_option(ci_method, "ci_method", CI_METHODS)
    alpha = _check_fraction(alpha, "alpha")
    power = _check_fraction(power, "power")
    n_resamples, confidence_level = check_interval_options(n_resamples, confidence_level)
    min_group_size = _check_min_group_size(min_group_size)
    grouped = GroupedPredictions(data, groups)
    rng = check_random_state(random_state)
    sizes = [grouped.size(rows) for rows in grouped.rows]
    audited = [
        (name, rows, size)
        for name, rows, size in zip(grouped.names, grouped.rows, sizes, strict=True)
        if size >= min_group_size
    ]
    skipped = {
        name: size for name, size in zip(grouped.names, sizes, strict=True) if size < min_group_size
    }
    if skipped:
        warnings.warn(
            f"{len(skipped)} group(s) with fewer than {min_group_size} samples are not "
            f"audited: {skipped}.",
            UserWarning,
            stacklevel=3,
        )
    if not audited:
        raise ValueError(
            f"Expected at least one group with {min_group_size} samples or more to audit, "
            f"got sizes {skipped}."
        )
    interval_options = {
        "n_resamples": n_resamples,
        "confidence_level": confidence_level,
        "ci_method": ci_method,
        "rng": rng,
    }
    columns = {"group": [name for name, *_ in audited], "n_samples": []}
    columns.update(
        {f"{key}{part}": [] for key, *_ in AUDIT_ERRORS for part in ("", "_low", "_high", "_flags")}
    )
    columns.update({"statistic": [], "pvalue": [], "detectable": []})
    level = alpha / len(audited)
    scores, weights = [], []
    for name, rows, size in audited:
        part = grouped.predictions(rows)
        columns["n_samples"].append(size)
        for key, _, metric, binned in AUDIT_ERRORS:
            options = {"convention": convention}
            if binned:
                options["n_bins"] = n_bins
            if metric is smooth_ece:
                options["bandwidth"] = _smooth_ece(
                    part, return_bandwidth=True, convention=convention
                )[1]
            interval = bootstrap_interval(
                KERNELS[metric], part, options, name=metric.__name__, **interval_options
            )
            columns[key].append(interval.estimate)
            columns[f"{key}_low"].append(interval.low)
            columns[f"{key}_high"].append(interval.high)
            columns[f"{key}_flags"].append(interval.flags)
        try:
            statistic, pvalue = _calibration_test(part, method=test, convention=convention)
        except ValueError as exc:
            raise ValueError(f"Group {name!r} cannot be tested: {exc}") from exc
        columns["statistic"].append(statistic)
        columns["pvalue"].append(pvalue)
        scores.append(part.scores(convention)[0].astype(np.float64))
        weights.append(part.sample_weight)
        columns["detectable"].append(detectable_shift(scores[-1], weights[-1], test, level, power))
    table = {
        key: (value if key == "group" or key.endswith("_flags") else np.asarray(value))
        for key, value in columns.items()
    }
    table["pvalue_adjusted"] = adjust_pvalues(table["pvalue"], correction)
    table["miscalibrated"] = table["pvalue_adjusted"] <= alpha
    table["ece_null_high"], worst_null = calibrated_ece_quantiles(
        scores, weights, n_bins, n_resamples, confidence_level, rng
    )
    made_worse = None
    if reference is not None:
        changes = group_changes(
            grouped,
            audited,
            reference,
            n_bins=n_bins,
            convention=convention,
            n_resamples=n_resamples,
            rng=rng,
        )
        columns, made_worse = change_columns(*changes, alpha=alpha, correction=correction)
        table.update(columns)
    worst = int(np.argmax(table["ece"]))
    return Bunch(
        table=table,
        worst_group=table["group"][worst],
        worst_ece=float(table["ece"][worst]),
        worst_ece_null_high=worst_null,
        n_miscalibrated=int(table["miscalibrated"].sum()),
        skipped=skipped,
        test=test,
        correction=correction,
        alpha=alpha,
        power=power,
        confidence_level=confidence_level,
        convention=convention,
        n_bins=n_bins,
        made_worse=made_worse,
    )


def format_audit(audit, digits=4):
    """Plain-text table of a :func:`calibration_audit` result."""
    table = audit.table
    header = (
        f"Calibration by group: {len(table['group'])} groups, "
        f"{audit.convention.replace('_', '-')} convention, "
        f"{_TEST_NAMES[audit.test]} tests with {_CORRECTION_NAMES[audit.correction]}-adjusted "
        f"p-values at alpha = {audit.alpha:g}; detectable shift at {100 * audit.power:g} % "
        "power"
    )
    names = [str(name) for name in table["group"]]
    width = max(12, *(len(name) for name in names))
    cell = digits + 4
    titles = ["n", "ECE", "low", "high", "null", "smECE", "low", "high", "p adj.", "detect."]
    lines = [header, "", f"{'group':<{width}}" + "".join(f"  {t:>{cell}}" for t in titles)]
    notes = {}  # explanation: the flagged cells
    for i, name in enumerate(names):
        values = [f"{table['n_samples'][i]:d}"]
        for parts in (("ece", "ece_low", "ece_high", "ece_null_high"), ("smooth_ece",)):
            values += [f"{table[part][i]:.{digits}f}" for part in parts]
        values += [f"{table['smooth_ece' + part][i]:.{digits}f}" for part in ("_low", "_high")]
        values += [f"{table['pvalue_adjusted'][i]:.3g}", f"{table['detectable'][i]:.{digits}f}"]
        marks = " *" if table["miscalibrated"][i] else ""
        for key, label in (("ece", "ECE"), ("smooth_ece", "smECE")):
            for explanation in table[f"{key}_flags"][i].values():
                cells = notes.setdefault(explanation, [])
                cells.append(f"{name} {label}")
                mark = f" ({list(notes).index(explanation) + 1})"
                marks += "" if mark in marks else mark
        lines.append(f"{name:<{width}}" + "".join(f"  {v:>{cell}}" for v in values) + marks)
    level = f"{100 * audit.confidence_level:g} %"
    lines += [
        f"(* miscalibrated after the correction: {audit.n_miscalibrated} of {len(names)}; "
        f"null: the ECE a calibrated group of its size stays below with {level})",
        f"worst group by ECE: {audit.worst_group!s} ({audit.worst_ece:.{digits}f}); a "
        f"multicalibrated model's worst stays below {audit.worst_ece_null_high:.{digits}f} "
        f"with {level}",
    ]
    if audit.skipped:
        lines.append(f"not audited (too few samples): {audit.skipped}")
    if audit.get("made_worse") is not None:
        named = ", ".join(str(group) for group in audit.made_worse) or "none"
        lines.append(f"made worse than the reference (ECE or log loss): {named}")
    lines += [
        f"({k}) {', '.join(cells)}: {explanation}."
        for k, (explanation, cells) in enumerate(notes.items(), start=1)
    ]
    return "\n".join(lines)
