"""Tests of the null hypothesis "the scores are calibrated": Spiegelhalter, KS and Kuiper."""

from collections import namedtuple

import numpy as np
from scipy.stats import norm

from ..._validation import check_option
from .._core._dispatch import dask_aware
from .._functions._predictions import check_predictions

CalibrationTestResult = namedtuple("CalibrationTestResult", ["statistic", "pvalue"])
CalibrationTestResult.__doc__ = """Result of :func:`calibration_test` (unpacks as a tuple).

Attributes
----------
statistic : float
    The test statistic.
pvalue : float
    Its p-value under the null hypothesis of calibration.
"""

_METHODS = ("spiegelhalter", "ks", "kuiper")
_ALTERNATIVES = ("two-sided", "greater", "less")
#: Below this statistic the survival functions are 1 - (theta series of the CDF); above,
#: their own series (both converge in a few terms there and keep tiny p-values exact).
_SERIES_SWITCH = 1.0


def _brownian_max_sf(x):
    """``P(max_{[0, 1]} |B| > x)`` for a standard Brownian motion ``B``."""
    if x <= 0:
        return 1.0
    if x < _SERIES_SWITCH:
        k = np.arange(0, 40)
        odd = 2 * k + 1
        terms = (-1.0) ** k / odd * np.exp(-(odd**2) * np.pi**2 / (8 * x * x))
        return float(min(1.0, max(0.0, 1.0 - 4 / np.pi * terms.sum())))
    odd = 2 * np.arange(0, 40) + 1
    return float(4 * np.sum((-1.0) ** np.arange(0, 40) * norm.sf(odd * x)))


def _brownian_range_sf(x):
    """``P(max_{[0, 1]} B - min_{[0, 1]} B > x)`` for a standard Brownian motion ``B``."""
    if x <= 0:
        return 1.0
    if x < _SERIES_SWITCH:
        half = np.arange(0, 40) + 0.5
        terms = (8 / (x * x) + 2 / (half**2 * np.pi**2)) * np.exp(-2 * half**2 * np.pi**2 / (x * x))
        return float(min(1.0, max(0.0, 1.0 - terms.sum())))
    k = np.arange(1, 60)
    return float(min(1.0, 8 * np.sum((-1.0) ** (k - 1) * k * norm.sf(k * x))))


def check_test_options(method, alternative):
    """Check ``calibration_test``'s method and alternative (one-sided: Spiegelhalter only)."""
    check_option(method, "method", _METHODS)
    check_option(alternative, "alternative", _ALTERNATIVES)
    if method != "spiegelhalter" and alternative != "two-sided":
        raise ValueError(
            f"Expected `alternative='two-sided'` for method={method!r} (only Spiegelhalter's "
            f"test has one-sided forms), got {alternative!r}."
        )


def _cumulative_differences(score, outcome, weight, order):
    """Weighted partial sums of ``outcome - score`` in score order, at each distinct score."""
    score, outcome, weight = score[order], outcome[order], weight[order]
    partial = np.cumsum(weight * (outcome - score))
    last_of_tie = np.append(score[1:] != score[:-1], True)
    return partial[last_of_tie]


def undefined_reason(score, method):
    """Why the statistic of ``method`` is undefined on these scores, or None if it is not.

    Spiegelhalter's statistic needs a score other than 0, 1/2 and 1 (with positive weight);
    the cumulative-difference statistics (KS, Kuiper) a score other than 0 and 1.

    Parameters
    ----------
    score : ndarray of shape (n_samples,)
        The scores of the samples with positive weight.
    method : {"spiegelhalter", "ks", "kuiper"}
        The test.

    Returns
    -------
    reason : str or None
    """
    informative = (score > 0) & (score < 1)
    return reason_undefined(
        method, bool(informative.any()), bool((informative & (score != 0.5)).any())
    )


def reason_undefined(method, varies, brier_varies):
    """:func:`undefined_reason` from what the scores hold.

    Parameters
    ----------
    method : {"spiegelhalter", "ks", "kuiper"}
        The test.
    varies : bool
        Whether a score of positive weight lies strictly between 0 and 1.
    brier_varies : bool
        Whether such a score differs from 1/2.

    Returns
    -------
    reason : str or None
    """
    if not varies:
        return (
            "every weighted score is 0 or 1, so the outcomes have no variance under the null "
            "and no test of calibration applies"
        )
    if method == "spiegelhalter" and not brier_varies:
        return (
            "every weighted score is 0, 1/2 or 1, so the Brier score has no variance under "
            "the null; method='ks' or method='kuiper' is defined"
        )
    return None


def undefined_error(method, reason):
    """The error of a test whose statistic is undefined, for ``reason``."""
    return ValueError(f"The statistic of method={method!r} is undefined: {reason}.")


@dask_aware
def calibration_test(
    y_true,
    y_prob,
    *,
    method="spiegelhalter",
    alternative="two-sided",
    convention="top_label",
    labels=None,
    sample_weight=None,
):
    """Test the null hypothesis that the predicted probabilities are calibrated.

    Each sample's score ``s`` (top-label confidence) is a probability for its outcome
    ``y`` (correctness); under the null, ``E[y | s] = s``.

    - ``"spiegelhalter"`` (Spiegelhalter 1986): ``Z = sum w (y - s)(1 - 2s) /
      sqrt(sum w^2 (1 - 2s)^2 s (1 - s))``, standard normal under the null (it tests the
      Brier score against its expectation). ``alternative`` picks the tail:
      ``"two-sided"`` (default), ``"greater"`` (``P(N > Z)``, MAPIE's
      ``spiegelhalter_p_value``) or ``"less"``.
    - ``"ks"`` and ``"kuiper"`` (Arrieta-Ibarra et al. 2022, Tygert 2023): the partial
      sums ``C`` of ``w (y - s)`` in increasing order of ``s``, scaled by
      ``sigma = sqrt(sum w^2 s (1 - s))``, behave like a standard Brownian motion on
      [0, 1]; KS is ``max |C| / sigma`` and Kuiper ``(max C - min C) / sigma``, with the
      p-values of the maximum and of the range of the Brownian motion (asymptotic).
      Tied scores enter the partial sums together (MAPIE breaks ties by a random jitter
      instead; without ties the two agree).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    method : {"spiegelhalter", "ks", "kuiper"}, default="spiegelhalter"
        The test.
    alternative : {"two-sided", "greater", "less"}, default="two-sided"
        The tail of Spiegelhalter's test; KS and Kuiper only take ``"two-sided"``.
    convention : {"top_label", "positive_class"}, default="top_label"
        What is tested; see :func:`expected_calibration_error`.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights (their scale does not matter).

    Returns
    -------
    result : CalibrationTestResult
        ``(statistic, pvalue)``, a named tuple.

    See Also
    --------
    calibration_error_ci : How large the miscalibration is, with an interval.
    calibration_report : The tests with the errors and decompositions.

    References
    ----------
    .. [1] D. J. Spiegelhalter, "Probabilistic prediction in patient management and
       clinical trials", Statistics in Medicine 5(5), 1986.
    .. [2] I. Arrieta-Ibarra, P. Gujral, J. Tannen, M. Tygert and C. Xu, "Metrics of
       calibration for probabilistic predictions", Journal of Machine Learning Research
       23, 2022.
    .. [3] M. Tygert, "Calibration of P-values for calibration and for deviation of a
       subpopulation from the full population", Advances in Computational Mathematics
       49, 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.scoring import calibration_test
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(5000)
    >>> y = rng.random(5000) < p ** 1.2  # slightly overconfident in the positive class
    >>> statistic, pvalue = calibration_test(y, p, method="kuiper",
    ...                                      convention="positive_class")
    >>> bool(pvalue < 0.01)
    True
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return _calibration_test(data, method=method, alternative=alternative, convention=convention)


def _calibration_test(
    data, *, method="spiegelhalter", alternative="two-sided", convention="top_label"
):
    """:func:`calibration_test` of checked predictions."""
    check_test_options(method, alternative)
    score = data.scores(convention)[0]
    if data.sample_weight is not None:
        score = score[data.sample_weight > 0]
    reason = undefined_reason(score, method)
    if reason is not None:
        raise undefined_error(method, reason)
    if method == "spiegelhalter":
        return _spiegelhalter(data, convention, alternative)
    return cumulative_tests(data, convention)[method]


def _weighted_scores(data, convention):
    """Scores and outcomes in float64, and the weights scaled to a largest weight of 1."""
    score, outcome = data.scores(convention)
    sample_weight = data.sample_weight
    weight = (
        np.ones(score.shape[0]) if sample_weight is None else sample_weight / sample_weight.max()
    )
    return score.astype(np.float64), outcome.astype(np.float64), weight


def _spiegelhalter(data, convention, alternative):
    """Spiegelhalter's test, defined on these scores."""
    score, outcome, weight = _weighted_scores(data, convention)
    variance = score * (1.0 - score)
    spread = np.sum(weight**2 * (1.0 - 2.0 * score) ** 2 * variance)
    statistic = float(np.sum(weight * (outcome - score) * (1.0 - 2.0 * score)) / np.sqrt(spread))
    tails = {
        "two-sided": 2.0 * norm.sf(abs(statistic)),
        "greater": norm.sf(statistic),
        "less": norm.cdf(statistic),
    }
    return CalibrationTestResult(statistic, float(min(1.0, tails[alternative])))


def cumulative_tests(data, convention):
    """The Kolmogorov-Smirnov and Kuiper tests, from one pass of cumulative differences.

    Parameters
    ----------
    data : Predictions
        Checked predictions on whose scores the tests are defined.
    convention : {"top_label", "positive_class"}
        What is tested.

    Returns
    -------
    results : dict
        ``{"ks": CalibrationTestResult, "kuiper": CalibrationTestResult}``.
    """
    score, outcome, weight = _weighted_scores(data, convention)
    spread = np.sum(weight**2 * score * (1.0 - score))
    partial = _cumulative_differences(score, outcome, weight, data.score_order(convention))
    partial /= np.sqrt(spread)
    ks = float(np.abs(partial).max())
    kuiper = float(partial.max() - partial.min())
    return {
        "ks": CalibrationTestResult(ks, _brownian_max_sf(ks)),
        "kuiper": CalibrationTestResult(kuiper, _brownian_range_sf(kuiper)),
    }
