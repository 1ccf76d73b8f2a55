"""A one-call summary of calibration: errors with intervals, tests, decompositions."""

import contextvars
import numbers
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from sklearn import config_context, get_config
from sklearn.utils import check_random_state

from ..._validation import check_n_bins, check_option
from .._core._dispatch import dask_aware
from .._core._registry import declared
from .._core._resampling import check_interval_options
from .._core._scores import AUTO, CONVENTIONS, resolve_convention
from .._functions._predictions import check_predictions
from .._functions._smece import _smooth_ece, smooth_ece
from ._bootstrap import CI_METHODS, shared_bootstrap_intervals
from ._decomposition import _calibration_decomposition
from ._groups import CORRECTIONS, _calibration_audit, format_audit
from ._hypothesis_tests import _calibration_test, cumulative_tests, undefined_reason

_TESTS = (
    ("spiegelhalter", "Spiegelhalter"),
    ("ks", "Kolmogorov-Smirnov"),
    ("kuiper", "Kuiper"),
)
#: Decomposition rows: key, label, score, recalibration.
_DECOMPOSITIONS = (
    ("brier", "Brier (isotonic, CORP)", "brier", "isotonic"),
    ("log_loss", "log loss (temperature)", "log_loss", "temperature"),
)
_DECOMPOSITION_COLUMNS = ("score", "miscalibration", "discrimination", "uncertainty")


def report_errors():
    """The metrics of the report's errors, in the order of its rows: the declared metrics
    with a ``report`` label (``_core._registry``)."""
    return tuple(metric for metric in declared() if metric.report is not None)


def _format(report, digits):
    """Plain-text tables of a report dictionary; flagged and undefined rows get footnotes."""
    level = report["confidence_level"]
    header = (
        f"Calibration report: {report['n_samples']} samples, {report['n_classes']} classes, "
        f"{report['convention'].replace('_', '-')} convention, {report['n_bins']} bins"
    )
    intervals = (
        f"intervals: {100 * level:g} % {report['ci_method']} bootstrap, "
        f"{report['n_resamples']} replicates"
    )
    lines = [header, intervals, ""]
    notes = []
    width = 26
    cell = digits + 7

    def row(label, values):
        return f"{label:<{width}}" + "".join(f"  {value:>{cell - 2}}" for value in values)

    def number(value):
        return f"{value:.{digits}f}"

    def footnotes(label, explanations):
        marks = []
        for explanation in explanations:
            notes.append(f"({len(notes) + 1}) {label}: {explanation}.")
            marks.append(f"({len(notes)})")
        return " ".join(marks)

    lines.append(row("calibration error", ["estimate", "low", "high"]))
    for metric in report_errors():
        key, label = metric.name, metric.report
        entry = report["errors"][key]
        if key == "smooth_ece":
            label = f"{label} (h = {entry['bandwidth']:.3g})"
        values = [number(entry[part]) for part in ("estimate", "low", "high")]
        flagged = footnotes(label, entry["flags"].values())
        lines.append(row(label, values) + (f"  {flagged}" if flagged else ""))
    lines += ["", row("test of calibration", ["statistic", "p-value"])]
    for key, label in _TESTS:
        entry = report["tests"][key]
        if "undefined" in entry:
            mark = footnotes(label, [entry["undefined"]])
            lines.append(row(label, ["undefined", ""]) + f"  {mark}")
        else:
            lines.append(row(label, [number(entry["statistic"]), f"{entry['pvalue']:.3g}"]))
    lines += ["", row("decomposition", ["score", "MCB", "DSC", "UNC"])]
    for key, label, *_ in _DECOMPOSITIONS:
        entry = report["decomposition"][key]
        lines.append(row(label, [number(entry[part]) for part in _DECOMPOSITION_COLUMNS]))
    lines.append("(score = MCB - DSC + UNC; MCB is what the recalibration removes)")
    if notes:
        lines += [""] + notes
    return "\n".join(lines)


def check_report_options(
    n_bins, convention, correction, confidence_level, n_resamples, ci_method, output_dict, digits
):
    """Check the options of :func:`calibration_report`.

    Returns
    -------
    n_bins, n_resamples, confidence_level
        Checked.
    """
    n_bins = check_n_bins(n_bins)
    check_option(ci_method, "ci_method", CI_METHODS)
    check_option(convention, "convention", (AUTO, *CONVENTIONS))
    check_option(correction, "correction", CORRECTIONS)
    n_resamples, confidence_level = check_interval_options(n_resamples, confidence_level)
    if not isinstance(output_dict, (bool, np.bool_)):
        raise ValueError(f"Expected `output_dict` to be a bool, got {output_dict!r}.")
    if isinstance(digits, (bool, np.bool_)) or not isinstance(digits, numbers.Integral):
        raise ValueError(f"Expected `digits` to be an integer >= 0, got {digits!r}.")
    if digits < 0:
        raise ValueError(f"Expected `digits` to be an integer >= 0, got {digits!r}.")
    return n_bins, n_resamples, confidence_level


def _tests(data, convention):
    """The tests' entries; an undefined statistic gets NaN and the reason."""
    score = data.scores(convention)[0]
    if data.sample_weight is not None:
        score = score[data.sample_weight > 0]
    tests = {}
    for key, _ in _TESTS:
        reason = undefined_reason(score, key)
        if reason is not None:
            tests[key] = {"statistic": float("nan"), "pvalue": float("nan"), "undefined": reason}
        elif key == "spiegelhalter":
            statistic, pvalue = _calibration_test(data, method=key, convention=convention)
            tests[key] = {"statistic": statistic, "pvalue": pvalue}
    if "ks" not in tests:  # KS and Kuiper share their partial sums
        for key, (statistic, pvalue) in cumulative_tests(data, convention).items():
            tests[key] = {"statistic": statistic, "pvalue": pvalue}
    return {key: tests[key] for key, _ in _TESTS}


def _errors(data, n_bins, convention, n_resamples, confidence_level, ci_method, rng):
    """The errors' entries: estimates and intervals read off one shared bootstrap."""
    # one automatic-bandwidth search, reused by the interval (whose plan would search again)
    _, smece_bandwidth = _smooth_ece(data, return_bandwidth=True, convention=convention)
    rows = report_errors()
    metrics = []
    for metric in rows:
        options = {}
        if metric.function is smooth_ece:
            options["bandwidth"] = smece_bandwidth
        if metric.takes("n_bins"):
            options["n_bins"] = n_bins
        if metric.takes("convention"):
            options["convention"] = convention
        metrics.append((metric.as_kernel(), options, metric.function.__name__))
    intervals = shared_bootstrap_intervals(
        metrics,
        data,
        n_resamples=n_resamples,
        confidence_level=confidence_level,
        ci_method=ci_method,
        rng=rng,
    )
    parts = ("estimate", "low", "high", "flags")
    errors = {
        metric.name: {part: interval[part] for part in parts}
        for metric, interval in zip(rows, intervals, strict=True)
    }
    errors["smooth_ece"]["bandwidth"] = smece_bandwidth
    return errors


def _submit_in_this_context(worker, function, *args):
    """Submit ``function(*args)`` to ``worker`` as if called here: numpy's error state
    (a context variable) and scikit-learn's configuration (per thread) carry over."""
    context = contextvars.copy_context()
    config = get_config()

    def call():
        with config_context(**config):
            return function(*args)

    return worker.submit(context.run, call)


def _decompositions_and_tests(data, convention):
    """The decompositions' and the tests' entries."""
    decomposition = {
        key: dict(_calibration_decomposition(data, score=score, method=method))
        for key, _, score, method in _DECOMPOSITIONS
    }
    return decomposition, _tests(data, convention)


@dask_aware
def calibration_report(
    y_true,
    y_prob,
    *,
    n_bins=15,
    convention="auto",
    confidence_level=0.95,
    n_resamples=1000,
    ci_method="percentile",
    random_state=None,
    labels=None,
    sample_weight=None,
    groups=None,
    correction="holm",
    output_dict=False,
    digits=4,
):
    """Report how calibrated the predictions are, how sure that is, and what it costs.

    Like scikit-learn's ``classification_report``, one call gives a readable text (or a
    dictionary with ``output_dict=True``) of

    - the calibration errors with bootstrap intervals (:func:`calibration_error_ci`): ECE,
      adaptive ECE, classwise ECE, smECE (automatic bandwidth) and the debiased L2 error;
    - the tests of calibration (:func:`calibration_test`): Spiegelhalter (two-sided),
      Kolmogorov-Smirnov and Kuiper, with p-values;
    - the decompositions (:func:`calibration_decomposition`) of the Brier score by
      isotonic recalibration (CORP; class by class beyond two classes) and of the log loss
      by temperature scaling: ``score = MCB - DSC + UNC``, the miscalibration MCB being
      what recalibration removes;
    - with ``groups``, the audit of every group (:func:`calibration_audit`): its ECE and
      smECE with intervals, its Kolmogorov-Smirnov test with p-values adjusted for the
      number of groups, the smallest shift its size can detect, and the worst group.

    The decompositions and tests are computed on a second thread while the bootstrap
    resamples; the result does not depend on which finishes first.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    n_bins : int, default=15
        Bins of the binned errors.
    convention : {"auto", "top_label", "positive_class"}, default="auto"
        What the errors and tests judge; see :func:`expected_calibration_error`.
        ``"auto"``: the top label overall, and the positive class in the audit of the
        groups of a binary problem (:func:`calibration_audit`).
    confidence_level : float, default=0.95
        Coverage of the intervals.
    n_resamples : int, default=1000
        Bootstrap replicates per interval.
    ci_method : {"percentile", "bca"}, default="percentile"
        How the intervals are read off the replicates.
    random_state : int, RandomState instance or None, default=None
        Seeds the resampling. The rows are resampled once for all the intervals: each
        bootstrap replicate is one resampled data set on which every error is computed.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    groups : array-like of shape (n_samples,) or (n_samples, n_columns), default=None
        Group of each sample, or columns whose distinct rows are the groups; when given,
        the report ends with the groups' audit.
    correction : {"holm", "fdr_bh"}, default="holm"
        The groups' multiple-testing correction (Holm's, or Benjamini and Hochberg's).
    output_dict : bool, default=False
        Return a dictionary instead of text.
    digits : int, default=4
        Decimals of the text.

    Returns
    -------
    report : str or dict
        The text, or ``{"n_samples", "n_classes", "n_bins", "convention",
        "confidence_level", "ci_method", "n_resamples",
        "errors": {name: {"estimate", "low", "high", "flags"}},
        "tests": {name: {"statistic", "pvalue"}}, "decomposition": {"brier" | "log_loss":
        {"score", "miscalibration", "discrimination", "uncertainty", "refinement"}}}``;
        the smECE entry also holds its ``bandwidth``, the log-loss decomposition its
        ``temperature``. An interval's ``flags`` are those of
        :func:`calibration_error_ci` (what makes it suspect: it excludes the estimate,
        or has zero width, with an explanation; empty when nothing does). A test whose
        statistic is undefined on these scores (Spiegelhalter's when every score is 0,
        1/2 or 1, all of them when every score is 0 or 1) has NaN statistic and
        p-value and its reason under ``"undefined"``. In the text, flagged and
        undefined rows point to numbered notes below the tables. With ``groups``,
        ``"groups"`` holds the audit (the fields of :func:`calibration_audit`'s result).

    See Also
    --------
    calibration_error_ci : A bootstrap interval of any metric.
    calibration_test : A test of calibration, with its p-value.
    calibration_decomposition : The Brier or log-loss decomposition.
    calibration_audit : The errors and tests of every group.

    References
    ----------
    .. [1] J. Błasiok and P. Nakkiran, "Smooth ECE: Principled Reliability Diagrams via
       Kernel Smoothing", International Conference on Learning Representations, 2024.
    .. [2] A. Kumar, P. Liang and T. Ma, "Verified Uncertainty Calibration", Advances in
       Neural Information Processing Systems 32, 2019.
    .. [3] T. Dimitriadis, T. Gneiting and A. I. Jordan, "Stable reliability diagrams for
       probabilistic classifiers", Proceedings of the National Academy of Sciences 118(8),
       2021.
    .. [4] E. Berta, D. Holzmüller, M. I. Jordan and F. Bach, "Rethinking Early Stopping:
       Refine, Then Calibrate", arXiv:2501.19195, 2025.

    Examples
    --------
    An overconfident model: its probabilities are sharper than the truth it was drawn
    from.

    >>> import numpy as np
    >>> from sklearn_calib.scoring import calibration_report
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(2000, 3)) * 3
    >>> proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    >>> truth = np.exp(logits / 2) / np.exp(logits / 2).sum(axis=1, keepdims=True)
    >>> y = (truth.cumsum(axis=1) < rng.random((2000, 1))).sum(axis=1)
    >>> print(calibration_report(y, proba, n_resamples=200, random_state=0))
    Calibration report: 2000 samples, 3 classes, top-label convention, 15 bins
    intervals: 95 % percentile bootstrap, 200 replicates
    <BLANKLINE>
    calibration error            estimate        low       high
    ECE                            0.1459     0.1259     0.1642
    adaptive ECE                   0.1422     0.1209     0.1606
    classwise ECE                  0.0962     0.0858     0.1094
    smECE (h = 0.144)              0.1435     0.1223     0.1620
    debiased L2 CE                 0.1533     0.1354     0.1764
    <BLANKLINE>
    test of calibration         statistic    p-value
    Spiegelhalter                 24.0724  4.86e-128
    Kolmogorov-Smirnov            18.4491   1.06e-75
    Kuiper                        18.8126   2.38e-78
    <BLANKLINE>
    decomposition                   score        MCB        DSC        UNC
    Brier (isotonic, CORP)         0.4572     0.0441     0.2528     0.6659
    log loss (temperature)         0.8400     0.1252     0.3827     1.0975
    (score = MCB - DSC + UNC; MCB is what the recalibration removes)
    >>> report = calibration_report(y, proba, n_resamples=200, random_state=0,
    ...                             output_dict=True)
    >>> sorted(report["errors"])
    ['adaptive_ece', 'classwise_ece', 'debiased_ce', 'ece', 'smooth_ece']
    >>> round(report["decomposition"]["log_loss"]["temperature"], 2)
    1.98
    """
    n_bins, n_resamples, confidence_level = check_report_options(
        n_bins,
        convention,
        correction,
        confidence_level,
        n_resamples,
        ci_method,
        output_dict,
        digits,
    )
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    rng = check_random_state(random_state)
    overall = resolve_convention(convention, data.n_classes, by_group=False)
    # the decompositions and tests read the checked predictions only: a second thread
    # computes them while this one resamples (numpy and the kernels release the GIL)
    with ThreadPoolExecutor(max_workers=1) as worker:
        beside = _submit_in_this_context(worker, _decompositions_and_tests, data, overall)
        errors = _errors(data, n_bins, overall, n_resamples, confidence_level, ci_method, rng)
        decomposition, tests = beside.result()
    report = {
        "n_samples": data.n_samples,
        "n_classes": data.n_classes,
        "n_bins": n_bins,
        "convention": overall,
        "confidence_level": float(confidence_level),
        "ci_method": ci_method,
        "n_resamples": n_resamples,
        "errors": errors,
        "tests": tests,
        "decomposition": decomposition,
    }
    if groups is None:
        return report if output_dict else _format(report, digits)
    audit = _calibration_audit(
        data,
        groups,
        n_bins=n_bins,
        convention=convention,
        correction=correction,
        confidence_level=confidence_level,
        n_resamples=n_resamples,
        ci_method=ci_method,
        random_state=rng,
    )
    report["groups"] = dict(audit)
    if output_dict:
        return report
    return f"{_format(report, digits)}\n\n{format_audit(audit, digits)}"
