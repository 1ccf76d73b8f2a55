"""Groups made worse: paired changes of each group's errors, tested and corrected.

A calibrator's output and the scores it was given, on the same rows, are compared group
by group: the change of the log loss is a paired t test over the group's rows (or over
any paired replicates, such as random splits), the change of the ECE a paired bootstrap
of the group's rows; the p-values are corrected for the number of groups (Holm 1979, or
Benjamini and Hochberg 1995), and a group is made worse when its corrected p-value is at
most the level and its change positive.
"""

import numpy as np
from scipy import stats
from sklearn.utils import Bunch

from ..._validation import check_number, check_option
from .._functions._binned import _expected_calibration_error
from .._functions._scores import per_sample_score
from ._multiple_testing import CORRECTIONS, adjust_pvalues


def paired_change_test(changes, *, alpha=0.05, correction="holm"):
    """Which groups got significantly worse, from paired changes of a metric.

    Each group's changes (after minus before, on paired replicates: the same rows, or
    the same random split) get a two-sided one-sample t test of a zero mean; the
    p-values are corrected for the number of groups tested, and a group is worse when
    its corrected p-value is at most ``alpha`` and its mean change is positive. A group
    with fewer than two changes, or with all of them equal, is not tested (p-value 1,
    outside the correction's count): it has no variation to test.

    Parameters
    ----------
    changes : dict
        Group label to a 1-D array-like of paired changes of a lower-is-better metric.
    alpha : float, default=0.05
        Level of the corrected tests, in (0, 1).
    correction : {"holm", "fdr_bh"}, default="holm"
        The multiple-testing correction (:func:`adjust_pvalues`).

    Returns
    -------
    result : :class:`~sklearn.utils.Bunch`
        ``table``: a dict of equal-length columns, one row per group in the order of
        ``changes``: ``group``, ``n_pairs``, ``change`` (the mean change), ``pvalue``,
        ``pvalue_adjusted`` and ``worse``; ``worse_groups``, the labels of the groups
        made worse.

    See Also
    --------
    calibration_audit : With ``y_prob_reference``, tests each group's change this way.

    References
    ----------
    .. [1] S. Holm, "A Simple Sequentially Rejective Multiple Test Procedure",
       Scandinavian Journal of Statistics 6(2), 1979.

    Examples
    --------
    >>> from sklearn_calib.metrics import paired_change_test
    >>> result = paired_change_test({"a": [0.02, 0.03, 0.025, 0.028],
    ...                              "b": [0.01, -0.02, 0.0, 0.005]})
    >>> result.worse_groups
    ['a']
    """
    alpha = check_number("alpha", alpha, low=0.0, high=1.0, low_open=True)
    check_option(correction, "correction", CORRECTIONS)
    if not isinstance(changes, dict):
        raise TypeError(f"Expected `changes` to be a dict of group to changes, got {changes!r}.")
    groups = list(changes)
    arrays = [_check_changes(changes[group], group) for group in groups]
    means = np.array([array.mean() if array.size else 0.0 for array in arrays])
    pvalues = np.ones(len(groups))
    tested = np.array([_varies(array) for array in arrays], dtype=bool)
    for i in np.flatnonzero(tested):
        pvalues[i] = _t_pvalue(arrays[i], None)
    return _result(
        groups, [array.size for array in arrays], means, pvalues, tested, alpha, correction
    )


def group_changes(grouped, audited, reference, *, n_bins, convention, n_resamples, rng):
    """Per audited group, the paired changes of the log loss (per row) and the ECE
    (per bootstrap replicate of the group's rows) from ``reference`` to the audited
    predictions.

    Parameters
    ----------
    grouped : GroupedPredictions
        The audited predictions by group.
    audited : list of tuple
        ``(name, rows, size)`` of each audited group.
    reference : Predictions
        The reference predictions of the same rows.
    n_bins : int
        Bins of the ECE.
    convention : str
        What the ECE judges.
    n_resamples : int
        Bootstrap replicates of each group's ECE change.
    rng : numpy.random.RandomState
        Draws the replicates.

    Returns
    -------
    ece, log_loss : dict
        Group label to ``(value before, value after, changes, weights)``; the log loss's
        changes are per row with the rows' weights, the ECE's per replicate (weights
        None).
    """
    after_loss = per_sample_score(grouped.data.proba, grouped.data.y_index, "log_loss")
    before_loss = per_sample_score(reference.proba, reference.y_index, "log_loss")
    ece, log_loss = {}, {}
    for name, rows, _ in audited:
        weight = None if grouped.data.sample_weight is None else grouped.data.sample_weight[rows]
        kept = rows if weight is None else rows[weight > 0]
        row_weight = None if weight is None else weight[weight > 0]
        log_loss[name] = (
            _mean(before_loss[kept], row_weight),
            _mean(after_loss[kept], row_weight),
            after_loss[kept] - before_loss[kept],
            row_weight,
        )
        values = [
            _ece(data.rows(kept), n_bins=n_bins, convention=convention)
            for data in (reference, grouped.data)
        ]
        replicates = np.empty(n_resamples)
        for b in range(n_resamples):
            draw = kept[rng.randint(0, kept.shape[0], size=kept.shape[0])]
            replicates[b] = _ece(grouped.data.rows(draw), n_bins=n_bins, convention=convention)
            replicates[b] -= _ece(reference.rows(draw), n_bins=n_bins, convention=convention)
        ece[name] = (values[0], values[1], replicates, None)
    return ece, log_loss


def change_columns(ece, log_loss, *, alpha, correction):
    """The audit's columns of the changes, and the groups made worse by either metric."""
    columns, worse = {}, set()
    for key, changes, pvalue in (
        ("ece", ece, _bootstrap_pvalue),
        ("log_loss", log_loss, _t_pvalue),
    ):
        groups = list(changes)
        means = np.array([after - before for before, after, *_ in changes.values()])
        tested = np.array([_varies(change) for _, _, change, _ in changes.values()], dtype=bool)
        pvalues = np.array(
            [
                pvalue(change, weight) if ok else 1.0
                for (*_, change, weight), ok in zip(changes.values(), tested, strict=True)
            ]
        )
        result = _result(groups, [0] * len(groups), means, pvalues, tested, alpha, correction)
        columns[f"{key}_reference"] = np.array([before for before, *_ in changes.values()])
        columns[f"{key}_change"] = means
        columns[f"{key}_change_pvalue_adjusted"] = result.table["pvalue_adjusted"]
        columns[f"{key}_worse"] = result.table["worse"]
        worse.update(result.worse_groups)
    order = list(ece)
    return columns, [group for group in order if group in worse]


def _result(groups, sizes, means, pvalues, tested, alpha, correction):
    adjusted = np.ones(len(groups))
    if tested.any():
        adjusted[tested] = adjust_pvalues(pvalues[tested], correction)
    worse = tested & (adjusted <= alpha) & (means > 0)
    table = {
        "group": groups,
        "n_pairs": np.asarray(sizes, dtype=np.intp),
        "change": means,
        "pvalue": pvalues,
        "pvalue_adjusted": adjusted,
        "worse": worse,
    }
    return Bunch(table=table, worse_groups=[g for g, w in zip(groups, worse, strict=True) if w])


def _t_pvalue(changes, weight):
    """Two-sided p-value of a zero (weighted) mean change; weights count as Kish's
    effective number of rows."""
    if weight is None:
        return float(stats.ttest_1samp(changes, 0.0).pvalue)
    total = weight.sum()
    mean = np.dot(weight, changes) / total
    n_effective = total**2 / np.dot(weight, weight)
    variance = np.dot(weight, (changes - mean) ** 2) / total * n_effective / (n_effective - 1)
    statistic = mean / np.sqrt(variance / n_effective)
    return float(2 * stats.t.sf(abs(statistic), n_effective - 1))


def _bootstrap_pvalue(replicates, weight):
    """Two-sided p-value of a zero change from its bootstrap replicates: twice the
    smaller share of replicates on either side of 0 (with the plus-one correction)."""
    n = replicates.shape[0]
    below = (np.count_nonzero(replicates <= 0) + 1) / (n + 1)
    above = (np.count_nonzero(replicates >= 0) + 1) / (n + 1)
    return float(min(1.0, 2 * min(below, above)))


def _varies(changes):
    return changes.shape[0] >= 2 and not np.all(changes == changes[0])


def _mean(values, weight):
    return float(np.mean(values) if weight is None else np.dot(weight, values) / weight.sum())


def _check_changes(values, group):
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(
            f"Expected the changes of group {group!r} to be 1-D, got shape {array.shape}."
        )
    if not np.all(np.isfinite(array)):
        raise ValueError(f"Expected finite changes of group {group!r}, got {array}.")
    return array


def _ece(data, *, n_bins, convention):
    return float(_expected_calibration_error(data, n_bins=n_bins, convention=convention))
