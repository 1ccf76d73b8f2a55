"""How sure the estimated target priors are: bootstrap intervals and tests of "no shift".

- Intervals: the target rows are resampled with replacement (each replicate's EM starts
  near the full sample's priors), and optionally the labelled source rows too, within
  each class (so every class stays present), with the calibrator refitted on each
  resample; percentile intervals of each class's prior, as
  :class:`~sklearn_calib.metrics.BootstrapInterval` objects.
- Tests: the likelihood-ratio test of ``q = pi`` for EM (twice the log-likelihood
  ratio, asymptotically chi-square with ``K - 1`` degrees of freedom when the calibrated
  probabilities are right; conservative when the estimate lies on the simplex's
  boundary), and for BBSE and RLLS the test of Lipton et al. (2018): Pearson's
  chi-square test that the predicted classes are as frequent on the target as on the
  source (under label shift they are unless ``q = pi``, for an invertible confusion
  matrix).
"""

from collections import namedtuple

import numpy as np
from scipy.stats import chi2, chi2_contingency

from ..metrics import BootstrapInterval
from ._em import away_from_zero

LabelShiftTestResult = namedtuple("LabelShiftTestResult", ["statistic", "pvalue", "df", "method"])
LabelShiftTestResult.__doc__ = """Result of a test of "no label shift" (unpacks as a tuple).

Attributes
----------
statistic : float
    The test statistic.
pvalue : float
    Its p-value under the null hypothesis that the target priors equal the source's.
df : int
    Degrees of freedom of its chi-square distribution.
method : {"likelihood_ratio", "prediction_counts"}
    Which test.
"""

#: Elements of the count matrices of the replicates drawn at once (their memory).
_COUNT_ELEMENTS = 1 << 24


def likelihood_ratio_test(loglik, n_samples, n_classes):
    """The likelihood-ratio test of ``q = pi`` from EM's mean log-likelihood ratio."""
    statistic = max(2.0 * n_samples * float(loglik), 0.0)
    df = n_classes - 1
    return LabelShiftTestResult(statistic, float(chi2.sf(statistic, df)), df, "likelihood_ratio")


def prediction_count_test(source_counts, target_counts):
    """Lipton et al.'s test: the predicted classes' counts, source against target."""
    table = np.vstack([source_counts, target_counts])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        return LabelShiftTestResult(0.0, 1.0, 0, "prediction_counts")
    result = chi2_contingency(table, correction=False)
    return LabelShiftTestResult(
        float(result.statistic), float(result.pvalue), int(result.dof), "prediction_counts"
    )


def resampled_counts(rng, n_samples, n_resamples):
    """Rows drawn with replacement: (n_resamples, n_samples) counts."""
    draws = rng.integers(0, n_samples, size=(n_resamples, n_samples))
    offsets = np.arange(n_resamples)[:, None] * n_samples
    counts = np.bincount((draws + offsets).ravel(), minlength=n_resamples * n_samples)
    return counts.reshape(n_resamples, n_samples).astype(np.float64)


def stratified_counts(rng, y_index, n_classes):
    """Rows drawn with replacement within each class: counts of shape (n_samples,)."""
    counts = np.zeros(y_index.shape[0])
    for k in range(n_classes):
        rows = np.flatnonzero(y_index == k)
        np.add.at(counts, rows[rng.integers(0, rows.shape[0], rows.shape[0])], 1.0)
    return counts


def replicate_start(prior, source_prior, n_replicates):
    """EM's start of the replicates: the estimate moved a little towards the source."""
    start = away_from_zero(prior, source_prior)
    return np.repeat(start[None, :], n_replicates, axis=0)


def target_replicates(estimate, prior, source_prior, n_samples, n_resamples, rng):
    """The priors of ``n_resamples`` resamples of the target rows.

    Parameters
    ----------
    estimate : callable
        ``estimate(counts, start)`` gives the priors (rows) of row weightings.
    prior, source_prior : ndarray of shape (n_classes,)
        The full sample's estimate and the source's priors.
    n_samples, n_resamples : int
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (n_resamples, n_classes)
    """
    batch = max(1, _COUNT_ELEMENTS // n_samples)
    replicates = []
    for first in range(0, n_resamples, batch):
        size = min(batch, n_resamples - first)
        counts = resampled_counts(rng, n_samples, size)
        replicates.append(estimate(counts, replicate_start(prior, source_prior, size)))
    return np.vstack(replicates)


def _flags(estimate, low, high, replicates):
    flags = {}
    if high <= low:
        flags["zero_width"] = (
            f"zero width: the {replicates.shape[0]} replicates take "
            f"{np.unique(replicates).shape[0]} distinct value(s), as when a prior sits at 0 "
            "in every resample"
        )
    if not low <= estimate <= high:
        flags["excludes_estimate"] = (
            "the interval excludes the estimate: the estimator is biased at this sample size, "
            "as near the simplex's boundary"
        )
    return flags


def prior_intervals(prior, replicates, confidence_level):
    """Percentile intervals of each class's prior, as ``BootstrapInterval`` objects.

    Parameters
    ----------
    prior : ndarray of shape (n_classes,)
    replicates : ndarray of shape (n_resamples, n_classes)
    confidence_level : float

    Returns
    -------
    list of BootstrapInterval
    """
    alpha = (1.0 - confidence_level) / 2.0
    lows, highs = np.quantile(replicates, [alpha, 1.0 - alpha], axis=0)
    intervals = []
    for k in range(prior.shape[0]):
        low, high = float(lows[k]), float(highs[k])
        intervals.append(
            BootstrapInterval(
                estimate=float(prior[k]),
                low=low,
                high=high,
                replicates=replicates[:, k].copy(),
                confidence_level=confidence_level,
                ci_method="percentile",
                flags=_flags(float(prior[k]), low, high, replicates[:, k]),
            )
        )
    return intervals
