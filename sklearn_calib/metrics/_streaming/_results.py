"""The metrics of an accumulator's sums (``_layout``), exact or bounded: what each
declared metric takes from them (``_entries``), and the helpers they share.

Exact (equal to the in-memory functions up to the order of float64 additions): the
errors of equal-width bins (ECE, MCE, the reliability diagram with its Clopper-Pearson
intervals, classwise and top-label errors), accuracy, NLL, Brier score and
Spiegelhalter's test; sums of squared weights are kept per range of scale and joined in
the scale of the largest (``_core._weights.combined_squares``), so
that no result depends on the weights' scale. From a fine histogram, with a bound: the
adaptive ECE, the debiased error (on the same equal-mass bins, without a bound), and the
Kolmogorov-Smirnov and Kuiper statistics. From a fine grid (``_smooth_grid``): smECE
and SECE, with bounds.
"""

import math

import numpy as np
from scipy.stats import norm as normal
from sklearn.utils import Bunch

from .._core._binning import _group_ends, uniform_bin_edges
from .._core._intervals import clopper_pearson
from .._core._registry import by_name, declared
from .._core._weights import combined_squares
from .._statistics._bootstrap import _interval
from .._statistics._hypothesis_tests import _brownian_max_sf, _brownian_range_sf
from ._layout import SPREAD, VARIANCE


def scaled_bins(sums):
    """Binned sums (``top``, ``fine``, or such sums per replicate) as ``w``, ``w s``,
    ``w y``, ``w^2`` and the count of positive weights, with the weights in the scale of
    their joined squares."""
    squares, factor = combined_squares(sums[4:])
    return np.stack([sums[0] * factor, sums[1] * factor, sums[2] * factor, squares, sums[3]])


def reliability(top, confidence_level):
    """The reliability diagram of the equal-width bins (as ``reliability_diagram``), with
    Clopper-Pearson intervals unless ``confidence_level`` is None."""
    counts, score_sums, outcome_sums = top[:3]
    n_bins = counts.shape[0]
    nonempty = counts > 0
    safe = np.where(nonempty, counts, 1.0)
    diagram = Bunch(
        edges=uniform_bin_edges(n_bins),
        count=counts,
        mean_confidence=np.where(nonempty, score_sums / safe, np.nan),
        accuracy=np.where(nonempty, outcome_sums / safe, np.nan),
    )
    if confidence_level is None:
        return diagram
    # Kish's effective size (sum w)^2 / sum w^2: the count itself for unit weights
    scaled = scaled_bins(top)
    trials = np.where(nonempty, scaled[0] ** 2 / np.where(nonempty, scaled[3], 1.0), 0.0)
    diagram.accuracy_low, diagram.accuracy_high = clopper_pearson(
        np.where(nonempty, diagram.accuracy, 0.0) * trials, trials, confidence_level
    )
    return diagram


def equal_mass_bins(fine, n_bins, not_counts):
    """Equal-mass bins made of fine cells, and a bound on the moved weight.

    The groups are those of :func:`~sklearn_calib.metrics._core._binning.quantile_bin_edges`
    (by weighted count; weights that are not counts rescaled to the number of positive
    ones). Each inner edge, the largest value of its group, lies in a known fine cell;
    the edge is moved up to that cell's upper end, so only samples of that cell can
    change bin.

    Returns
    -------
    sums : ndarray of shape (7, n_bins)
        The fine sums added up per bin.
    edges : ndarray of shape (n_bins + 1,)
    moved : float
        Total weight of the fine cells holding an exact edge (at least the weight that
        changed bin).
    """
    weight, positive = fine[0], fine[3]
    n_fine = weight.shape[0]
    cumulative = np.cumsum(weight)
    if not_counts:
        cumulative = cumulative * (positive.sum() / cumulative[-1])
    position = _group_ends(cumulative[-1], n_bins)
    cells = np.minimum(np.searchsorted(cumulative, position + 0.5, side="left"), n_fine - 1)
    bin_of_cell = np.searchsorted(cells, np.arange(n_fine), side="left")
    sums = np.stack([np.bincount(bin_of_cell, row, minlength=n_bins) for row in fine])
    edges = np.concatenate([[0.0], uniform_bin_edges(n_fine)[cells + 1], [1.0]])
    return sums, edges, float(weight[cells].sum())


def cumulative_tests(fine, scores):
    """Kolmogorov-Smirnov and Kuiper statistics on the fine cells' ends, with bounds.

    The partial sums of ``w (y - s)`` at each cell's upper end are some of the partial
    sums at the distinct scores; within a cell they move by at most the cell's weight,
    so the statistics are low by at most ``max cell weight / sigma`` (twice for Kuiper).
    ``sigma^2`` is the sum of ``w^2 s (1 - s)`` of ``scores``.
    """
    variance, factor = combined_squares(scores[VARIANCE])
    if variance <= 0:
        return None, None
    sigma = math.sqrt(variance)
    partial = np.cumsum(fine[2] - fine[1]) * factor / sigma
    gap = float(fine[0].max()) * factor / sigma
    ks = float(np.abs(partial).max())
    kuiper = float(max(partial.max(), 0.0) - min(partial.min(), 0.0))
    return (
        Bunch(statistic=ks, pvalue=_brownian_max_sf(ks), bound=gap),
        Bunch(statistic=kuiper, pvalue=_brownian_range_sf(kuiper), bound=2.0 * gap),
    )


def spiegelhalter_statistic(scores):
    """Spiegelhalter's statistic of an accumulator's ``scores``; None where every score
    is 0, 1/2 or 1."""
    spread, factor = combined_squares(scores[SPREAD])
    if spread <= 0:
        return None
    return float(scores[4] * factor / math.sqrt(spread))


def spiegelhalter(scores):
    """Spiegelhalter's two-sided test; None where every score is 0, 1/2 or 1."""
    statistic = spiegelhalter_statistic(scores)
    if statistic is None:
        return None
    return Bunch(statistic=statistic, pvalue=float(min(1.0, 2.0 * normal.sf(abs(statistic)))))


def interval(estimate, replicates, confidence_level, name):
    """Percentile interval of the replicates: a :class:`BootstrapInterval` with its flags."""
    if not np.isfinite(replicates).all():
        raise ValueError(
            f"The Poisson bootstrap replicates of {name!r} are not all finite (a replicate "
            "drew no rows, which happens with very few rows); use more rows or fewer "
            "replicates."
        )
    return _interval(float(estimate), replicates, None, confidence_level, "percentile", name)


def results(state, layout, interval_metrics, confidence_level, smooth_bandwidth, sece_bandwidth):
    """The metrics of the sums (see ``CalibrationAccumulator.compute``): those of every
    declared metric whose parts the state keeps, in the order of the declarations."""
    out = Bunch(n_samples=int(state["rows"]))
    settings = Bunch(
        confidence_level=confidence_level,
        smooth_bandwidth=smooth_bandwidth,
        sece_bandwidth=sece_bandwidth,
    )
    for metric in declared():
        entry = metric.streaming
        if entry is None:
            continue
        if entry.sums is not None:
            if metric.name in state:
                out[metric.name] = float(entry.value(state[metric.name]))
        elif all(part in state for part in entry.parts):
            out.update(entry.results(state, layout, settings))
    if layout.n_resamples:
        replicates = np.moveaxis(state["replicates"], -1, 0)  # (replicate, cell, value)
        offsets = layout.replicate_offsets()
        out.intervals = {}
        for name in interval_metrics:
            resampled = by_name(name).streaming.interval
            values = resampled.values(replicates[:, offsets[resampled.group] :], layout, state, out)
            out.intervals[name] = interval(out[name], values, confidence_level, name)
    return out
