"""Metrics of Dask collections: accumulate each chunk, merge, on the user's client.

The rows of the probabilities' chunks are the units of work: each chunk's labels,
probabilities and weights go through the checks of the in-memory functions and into a
:class:`~sklearn_calib.metrics.CalibrationAccumulator` (or, for the passes that need a
first result, another per-chunk sum); a tree of merges adds them up. ``dask.compute``
runs the graph on the active scheduler: the user's ``distributed.Client`` when there is
one. Dask is imported here only, when a Dask collection is met.

What equals the in-memory value (up to the order of float64 additions): the errors of
equal-width bins, the classwise and top-label errors, accuracy, NLL, Brier score,
Spiegelhalter's test and, in three passes (sums, the rows of the fine cells that hold
the edges, the sums of the exact bins), the equal-mass errors (adaptive ECE, debiased
error, reliability diagram) and smECE whose grid nests in the accumulator's (every
bandwidth of at least 0.01). Bounded: SECE, smECE of smaller bandwidths, and the
Kolmogorov-Smirnov and Kuiper tests (see ``CalibrationAccumulator``).
"""

import copy
import numbers

import numpy as np

from ..._dask_chunks import ChunkedRows
from ..._validation import check_probability_shape, resolve_classes
from .._core._binning import _group_ends, assign_bins, linear_binning, uniform_bin_edges
from .._core._dispatch import register_handler
from .._core._scores import scores_and_outcomes
from .._functions._smece import _SMECE_DENSITY_EPS, _smece_from_grid, _smece_grid_size
from .._streaming._accumulator import CalibrationAccumulator, check_batch
from .._streaming._batch_sums import weight_columns
from .._streaming._layout import NON_COUNTS
from .._streaming._smooth_grid import grid_smooth_ece


class DaskPredictions(ChunkedRows):
    """Labels, probabilities and weights of Dask input, in the probabilities' row chunks.

    Parameters
    ----------
    y_true, y_prob, sample_weight : Dask collection or array-like
        As the metric functions take them.
    labels : array-like, default=None
        The class of each column; None resolves them from the distinct labels as the
        in-memory functions do (one pass over the labels).
    """

    def __init__(self, y_true, y_prob, sample_weight=None, labels=None):
        super().__init__(y_true, y_prob, sample_weight)
        check_probability_shape(self.scores.shape)
        self.n_classes = 2 if self.scores.ndim == 1 else self.scores.shape[1]
        if labels is None:
            if not self.n_samples:  # the chunks' checks would say so, but labels come first
                raise ValueError("Expected at least one sample, got empty `y_prob`.")
            labels = resolve_classes(self.distinct_labels(), None, self.n_classes)
        self.labels = np.asarray(labels)

    def accumulate(self, template=None, first_row=0, **options):
        """A :class:`CalibrationAccumulator` of all rows.

        Parameters
        ----------
        template : CalibrationAccumulator, default=None
            Whose options to take (its state is not used); None builds one of
            ``options`` with these labels.
        first_row : int, default=0
            Id of the first row (the bootstrap's key).
        """
        if template is None:
            template = CalibrationAccumulator(labels=self.labels, **options)
        empty = copy.copy(template)
        empty._layout, empty._state, empty.n_samples_, empty._implicit_ids = None, None, 0, False
        self.offsets = self.offsets + first_row
        return self.reduce(_accumulate_chunk, empty, merge=_merge)


def _merge(first, second):
    return first.merge(second)


@register_handler("CalibrationAccumulator.update")
def update(accumulator, y_true, y_prob, sample_weight, row_ids):
    """``accumulator.update`` of Dask input: its chunks accumulated and merged into it,
    their rows numbered on from ``row_ids`` (None: the accumulator's rows so far)."""
    first_row = accumulator.n_samples_ if row_ids is None else row_ids
    if not isinstance(first_row, numbers.Integral):
        raise ValueError("Expected `row_ids` of Dask input to be the first row's id (an int).")
    n_classes = 2 if np.ndim(y_prob) == 1 else np.shape(y_prob)[1]
    device = accumulator._device() if accumulator._on_torch() else None
    accumulator._check_fits(n_classes, device)
    labels = accumulator.labels if accumulator.labels is not None else np.arange(n_classes)
    data = DaskPredictions(y_true, y_prob, sample_weight, labels)
    merged = data.accumulate(accumulator, first_row)
    accumulator._add(merged, None)
    return accumulator._added(row_ids, data.n_samples)


def _accumulate_chunk(y, p, w, first_row, template):
    return copy.deepcopy(template).update(y, p, w, row_ids=first_row)


def _checked(y, p, w, labels):
    return check_batch(y, p, labels, w)


def _cell_members(y, p, w, first_row, labels, convention, n_fine, cells):
    """The scores and weights of the rows whose fine cell is one of ``cells``."""
    y_index, proba, weight = _checked(y, p, w, labels)
    score, _ = scores_and_outcomes(proba, y_index, convention)
    inside = np.isin(assign_bins(score, uniform_bin_edges(n_fine)), cells)
    weight = np.ones(score.shape[0]) if weight is None else weight
    return [(score[inside].astype(np.float64), weight[inside])]


def _bin_sums(y, p, w, first_row, labels, convention, edges):
    """Per bin of ``edges``: the sums of ``weight_columns`` (an accumulator's ``top``)."""
    y_index, proba, weight = _checked(y, p, w, labels)
    score, outcome = scores_and_outcomes(proba, y_index, convention)
    weight = np.ones(score.shape[0]) if weight is None else weight
    index = assign_bins(score, edges)
    columns = weight_columns(weight, score.astype(np.float64), outcome.astype(np.float64))
    n_bins = edges.shape[0] - 1
    return np.stack([np.bincount(index, column, minlength=n_bins) for column in columns])


def equal_mass_sums(data, n_bins, convention):
    """Exact equal-mass bins (as ``quantile_bin_edges``) and their sums, in three passes.

    The fine histogram places each edge in a cell; the rows of those cells, sorted,
    give the exact edges; a last pass sums the exact bins.

    Returns
    -------
    edges : ndarray of shape (n_bins + 1,)
    sums : ndarray of shape (7, n_bins)
    """
    accumulator = data.accumulate(
        n_bins=n_bins, convention=convention, metrics=["adaptive_ece", "accuracy"]
    )
    fine = accumulator._state["fine"]
    layout = accumulator._layout
    weight, positive = fine[0], fine[3]
    not_counts = accumulator._state["scores"][NON_COUNTS] > 0
    cumulative = np.cumsum(weight)
    scale = positive.sum() / cumulative[-1] if not_counts else 1.0
    cumulative = cumulative * scale
    targets = _group_targets(cumulative[-1], n_bins)
    cells = np.minimum(np.searchsorted(cumulative, targets, side="left"), layout.n_fine - 1)
    members = data.reduce(_cell_members, data.labels, convention, layout.n_fine, np.unique(cells))
    values = np.concatenate([m[0] for m in members])
    weights = np.concatenate([m[1] for m in members])
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order] * scale
    inner = np.empty(n_bins - 1)
    for j, (cell, target) in enumerate(zip(cells, targets, strict=True)):
        before = cumulative[cell - 1] if cell > 0 else 0.0
        in_cell = assign_bins(values, uniform_bin_edges(layout.n_fine)) == cell
        running = before + np.cumsum(weights[in_cell])
        position = min(int(np.searchsorted(running, target, side="left")), running.shape[0] - 1)
        inner[j] = values[in_cell][position]
    edges = np.concatenate([[0.0], inner, [1.0]])
    return edges, data.reduce(_bin_sums, data.labels, convention, edges)


def _group_targets(total, n_bins):
    """Cumulative weight at which each of the first ``n_bins - 1`` groups ends (plus 1/2)."""
    return _group_ends(total, n_bins) + 0.5


def binned_sums(data, n_bins, strategy, convention):
    """The edges of memory's bins and the sums of ``weight_columns`` per bin."""
    if strategy == "uniform":
        edges = uniform_bin_edges(n_bins)
        return edges, data.reduce(_bin_sums, data.labels, convention, edges)
    return equal_mass_sums(data, n_bins, convention)


def _linear_grid(y, p, w, first_row, labels, convention, n_points):
    """``w`` and ``w (s - y)`` linearly binned on ``n_points`` points (smECE's grid)."""
    y_index, proba, weight = _checked(y, p, w, labels)
    score, outcome = scores_and_outcomes(proba, y_index, convention)
    score = score.astype(np.float64)
    weight = np.ones(score.shape[0]) if weight is None else weight
    index, frac = linear_binning(score, n_points)
    sums = np.zeros((2, n_points))
    for row, column in enumerate((weight, weight * score - weight * outcome)):
        sums[row] = np.bincount(index, column * (1.0 - frac), minlength=n_points)
        sums[row] += np.bincount(index + 1, column * frac, minlength=n_points)
    return sums


def smooth_ece_of(data, bandwidth, convention):
    """smECE and its bandwidth; a second pass bins smECE's own grid where it does not nest."""
    accumulator = data.accumulate(convention=convention, metrics=["smooth_ece"])
    grid = accumulator._state["grid"]
    n_positive = accumulator.n_positive_rows()
    error, bandwidth, bound = grid_smooth_ece(grid, n_positive, bandwidth)
    if bound:
        sums = data.reduce(_linear_grid, data.labels, convention, _smece_grid_size(bandwidth))
        eps = _SMECE_DENSITY_EPS * float(grid[0].sum()) / n_positive
        error = float(_smece_from_grid(sums, bandwidth, eps))
    return error, bandwidth
