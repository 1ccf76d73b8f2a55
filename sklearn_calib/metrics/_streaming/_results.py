"""The metrics of an accumulator's sums (:mod:`._accumulator_layout`), exact or bounded.

Exact (equal to the in-memory functions up to the order of float64 additions): the
errors of equal-width bins (ECE, MCE, the reliability diagram with its Clopper-Pearson
intervals, classwise and top-label errors), accuracy, NLL, Brier score and
Spiegelhalter's test; sums of squared weights are kept per range of scale and joined in
the scale of the largest (:func:`~sklearn_calib.metrics._weights.combined_squares`), so
that no result depends on the weights' scale. From a fine histogram, with a bound: the
adaptive ECE, the debiased error (on the same equal-mass bins, without a bound), and the
Kolmogorov-Smirnov and Kuiper statistics. From a fine grid (:mod:`._smooth_grid`): smECE
and SECE, with bounds.
"""

import math

import numpy as np
from scipy.stats import norm as normal
from sklearn.utils import Bunch

from .._core._binning import _group_ends, uniform_bin_edges
from .._core._intervals import clopper_pearson
from .._core._weights import combined_squares
from .._functions._binned import _calibration_error_from_bins
from .._functions._debiased import _debiased_from_bins
from .._functions._smece import _SMECE_DENSITY_EPS, _smece_from_grid
from .._functions._top_label import _combine
from .._statistics._bootstrap import _interval
from .._statistics._hypothesis_tests import _brownian_max_sf, _brownian_range_sf
from ._layout import NON_COUNTS, REPLICATE_GRID, SPREAD, VARIANCE
from ._smooth_grid import grid_sece, grid_smooth_ece


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

    The groups are those of :func:`~sklearn_calib.metrics._binning.quantile_bin_edges`
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


def _binned_errors(counts, score_sums, outcome_sums):
    return _calibration_error_from_bins(counts, score_sums, outcome_sums, "l1")


def replicate_values(state, layout, smooth_bandwidth):
    """Each resampled metric's values over the replicates, shape (n_resamples,)."""
    replicates = np.moveaxis(state["replicates"], -1, 0)  # (replicate, cell, value)
    offsets = layout.replicate_offsets()
    values = {}
    for group in layout.groups:
        start = offsets[group]
        if group == "top":
            weight, score, outcome = np.moveaxis(replicates[:, start : start + layout.n_bins], 2, 0)
            values["ece"] = _binned_errors(weight, score, outcome)
            values["mce"] = _calibration_error_from_bins(weight, score, outcome, "max")
            values["accuracy"] = outcome.sum(axis=-1) / weight.sum(axis=-1)
        elif group == "scores":
            weight, nll, brier = np.moveaxis(replicates[:, start], 1, 0)
            values["nll"], values["brier"] = nll / weight, brier / weight
        elif group == "smooth":
            weight, score, outcome = np.moveaxis(
                replicates[:, start : start + REPLICATE_GRID], 2, 0
            )
            sums = np.stack([weight, score - outcome], axis=1)
            # the replicate's mean weight per drawn row, as the in-memory plan's
            eps = _SMECE_DENSITY_EPS * weight.sum(axis=-1) / float(state["positive"])
            values["smooth_ece"] = _smece_from_grid(sums, smooth_bandwidth, eps[:, None])
        else:
            size = layout.n_classes * layout.n_bins
            block = replicates[:, start : start + size].reshape(
                -1, layout.n_classes, layout.n_bins, 3
            )
            values["classwise_ece"] = _binned_errors(*np.moveaxis(block, -1, 0)).mean(axis=-1)
    return values


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
    """The metrics of the sums (see ``CalibrationAccumulator.compute``)."""
    n_rows = int(state["rows"])
    out = Bunch(n_samples=n_rows)
    if "top" in state:
        top = state["top"]
        out.weight = float(top[0].sum())
        out.ece = float(_binned_errors(*top[:3]))
        out.mce = float(_calibration_error_from_bins(*top[:3], "max"))
        out.reliability = reliability(top, confidence_level)
    if "fine" in state:
        not_counts = "scores" in state and state["scores"][NON_COUNTS] > 0
        sums, edges, moved = equal_mass_bins(state["fine"], layout.n_bins, not_counts)
        out.adaptive_ece = float(_binned_errors(*sums[:3]))
        out.adaptive_ece_bound = 2.0 * moved / float(state["fine"][0].sum())
        out.adaptive_edges = edges
        out.debiased_ce = float(_debiased_from_bins(*scaled_bins(sums)))
    if "classwise" in state:
        out.classwise_ece = float(_binned_errors(*state["classwise"]).mean())
    if "predicted" in state:
        out.top_label_ece = float(_combine(*state["predicted"], "l1", "weighted"))
    if "scores" in state:
        weight, nll, brier, correct = state["scores"][:4]
        out.accuracy = float(correct / weight)
        out.nll = float(nll / weight)
        out.brier = float(brier / weight)
        out.spiegelhalter = spiegelhalter(state["scores"])
        if "fine" in state:
            out.ks, out.kuiper = cumulative_tests(state["fine"], state["scores"])
    if "grid" in state:
        n_positive = int(state["positive"])
        error, bandwidth, bound = grid_smooth_ece(state["grid"], n_positive, smooth_bandwidth)
        out.smooth_ece, out.smooth_ece_bandwidth, out.smooth_ece_bound = error, bandwidth, bound
        out.sece, out.sece_bound = grid_sece(state["grid"], n_positive, sece_bandwidth)
    if layout.n_resamples:
        values = replicate_values(state, layout, out.get("smooth_ece_bandwidth"))
        out.intervals = {
            name: interval(out[name], values[name], confidence_level, name)
            for name in interval_metrics
        }
    return out
