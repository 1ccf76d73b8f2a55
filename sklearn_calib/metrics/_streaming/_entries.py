"""What each of the library's metrics takes from an accumulator's sums: its entries of
``CalibrationAccumulator.compute`` (``results``) and the values of its bootstrap
replicates (``values``), as the metric declarations of ``metrics/_catalogue.py`` name them.

A ``results`` function takes the state (the sums, as numpy arrays), its layout and the
settings of ``compute`` (``confidence_level``, ``smooth_bandwidth``,
``sece_bandwidth``) and returns a dict of entries. A ``values`` function takes the
replicate sums of its resampled group from its first cell, ``(n_resamples, cells, 3)``,
the layout, the state and the entries computed so far.
"""

import numpy as np

from .._functions._binned import _calibration_error_from_bins
from .._functions._debiased import _debiased_from_bins
from .._functions._smece import _SMECE_DENSITY_EPS, _smece_from_grid
from .._functions._top_label import _combine
from ._layout import NON_COUNTS, REPLICATE_GRID
from ._results import (
    cumulative_tests,
    equal_mass_bins,
    reliability,
    scaled_bins,
    spiegelhalter,
)
from ._smooth_grid import grid_sece, grid_smooth_ece


def _binned_errors(counts, score_sums, outcome_sums, norm="l1"):
    return _calibration_error_from_bins(counts, score_sums, outcome_sums, norm)


def ece(state, layout, settings):
    """The ECE of the equal-width bins, and the total weight."""
    top = state["top"]
    return {"weight": float(top[0].sum()), "ece": float(_binned_errors(*top[:3]))}


def mce(state, layout, settings):
    """The MCE of the equal-width bins."""
    return {"mce": float(_binned_errors(*state["top"][:3], "max"))}


def reliability_diagram(state, layout, settings):
    """The reliability diagram of the equal-width bins, with Clopper-Pearson intervals."""
    return {"reliability": reliability(state["top"], settings.confidence_level)}


def _equal_mass(state, layout):
    not_counts = "scores" in state and state["scores"][NON_COUNTS] > 0
    return equal_mass_bins(state["fine"], layout.n_bins, not_counts)


def adaptive_ece(state, layout, settings):
    """The adaptive ECE of equal-mass bins made of fine cells, its bound and edges."""
    sums, edges, moved = _equal_mass(state, layout)
    return {
        "adaptive_ece": float(_binned_errors(*sums[:3])),
        "adaptive_ece_bound": 2.0 * moved / float(state["fine"][0].sum()),
        "adaptive_edges": edges,
    }


def debiased_ce(state, layout, settings):
    """The debiased error of the adaptive ECE's bins."""
    sums, _, _ = _equal_mass(state, layout)
    return {"debiased_ce": float(_debiased_from_bins(*scaled_bins(sums)))}


def ks(state, layout, settings):
    """The Kolmogorov-Smirnov test read at the fine cells' ends."""
    return {"ks": cumulative_tests(state["fine"], state["scores"])[0]}


def kuiper(state, layout, settings):
    """Kuiper's test read at the fine cells' ends."""
    return {"kuiper": cumulative_tests(state["fine"], state["scores"])[1]}


def classwise_ece(state, layout, settings):
    """The classwise ECE."""
    return {"classwise_ece": float(_binned_errors(*state["classwise"]).mean())}


def top_label_ece(state, layout, settings):
    """Gupta and Ramdas' top-label ECE (weighted over predicted classes)."""
    return {"top_label_ece": float(_combine(*state["predicted"], "l1", "weighted"))}


def _score_mean(name, column):
    def results(state, layout, settings):
        scores = state["scores"]
        return {name: float(scores[column] / scores[0])}

    results.__doc__ = f"The weighted mean of ``scores[{column}]``: ``{name}``."
    return results


nll = _score_mean("nll", 1)
brier = _score_mean("brier", 2)
accuracy = _score_mean("accuracy", 3)


def spiegelhalter_test(state, layout, settings):
    """Spiegelhalter's two-sided test."""
    return {"spiegelhalter": spiegelhalter(state["scores"])}


def smooth_ece(state, layout, settings):
    """smECE of the grid sums, its bandwidth and bound."""
    error, bandwidth, bound = grid_smooth_ece(
        state["grid"], int(state["positive"]), settings.smooth_bandwidth
    )
    return {"smooth_ece": error, "smooth_ece_bandwidth": bandwidth, "smooth_ece_bound": bound}


def sece(state, layout, settings):
    """SECE of the grid sums and its bound."""
    error, bound = grid_sece(state["grid"], int(state["positive"]), settings.sece_bandwidth)
    return {"sece": error, "sece_bound": bound}


def _top_replicates(replicates, layout):
    return np.moveaxis(replicates[:, : layout.n_bins], 2, 0)


def ece_replicates(replicates, layout, state, result):
    """The replicates' ECE."""
    return _binned_errors(*_top_replicates(replicates, layout))


def mce_replicates(replicates, layout, state, result):
    """The replicates' MCE."""
    return _binned_errors(*_top_replicates(replicates, layout), "max")


def accuracy_replicates(replicates, layout, state, result):
    """The replicates' top-label accuracy (the top-label bins' outcomes)."""
    weight, _, outcome = _top_replicates(replicates, layout)
    return outcome.sum(axis=-1) / weight.sum(axis=-1)


def nll_replicates(replicates, layout, state, result):
    """The replicates' NLL."""
    weight, nll_sums, _ = np.moveaxis(replicates[:, 0], 1, 0)
    return nll_sums / weight


def brier_replicates(replicates, layout, state, result):
    """The replicates' Brier score."""
    weight, _, brier_sums = np.moveaxis(replicates[:, 0], 1, 0)
    return brier_sums / weight


def smooth_ece_replicates(replicates, layout, state, result):
    """The replicates' smECE at the estimate's bandwidth."""
    weight, score, outcome = np.moveaxis(replicates[:, :REPLICATE_GRID], 2, 0)
    sums = np.stack([weight, score - outcome], axis=1)
    # the replicate's mean weight per drawn row, as the in-memory plan's
    eps = _SMECE_DENSITY_EPS * weight.sum(axis=-1) / float(state["positive"])
    return _smece_from_grid(sums, result.smooth_ece_bandwidth, eps[:, None])


def classwise_ece_replicates(replicates, layout, state, result):
    """The replicates' classwise ECE."""
    size = layout.n_classes * layout.n_bins
    block = replicates[:, :size].reshape(-1, layout.n_classes, layout.n_bins, 3)
    return _binned_errors(*np.moveaxis(block, -1, 0)).mean(axis=-1)
