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

import numpy as np

from .._validation import check_classification_inputs, resolve_classes
from ._accumulator import CalibrationAccumulator
from ._binning import _group_ends, assign_bins, uniform_bin_edges
from ._metrics import scores_and_outcomes
from ._smooth import _SMECE_DENSITY_EPS, _smece_from_grid, _smece_grid_size, linear_binning
from ._smooth_grid import grid_smooth_ece


def _as_array(value, name):
    """A Dask array of a Dask array, DataFrame or Series (None stays None)."""
    if value is None:
        return None
    import dask.array as da

    if hasattr(value, "to_dask_array"):
        value = value.to_dask_array(lengths=True)
    elif not hasattr(value, "chunks"):
        value = np.asarray(value)
    if not isinstance(value, da.Array):
        value = da.from_array(value)
    if value.ndim == 2 and value.shape[1] == 1 and name != "y_prob":
        value = value[:, 0]
    if any(np.isnan(size) for size in value.shape):
        raise ValueError(f"Expected `{name}` with known chunk sizes, got shape {value.shape}.")
    return value


class DaskPredictions:
    """Labels, probabilities and weights as Dask arrays with the same row chunks.

    Parameters
    ----------
    y_true, y_prob, sample_weight : Dask or array-like
        As the metric functions take them; the probabilities' row chunks are kept.
    labels : array-like, default=None
        The class of each column; None resolves them from the distinct labels as the
        in-memory functions do (one pass over the labels).
    """

    def __init__(self, y_true, y_prob, sample_weight=None, labels=None):
        proba = _as_array(y_prob, "y_prob")
        if proba.ndim == 2 and proba.numblocks[1] > 1:
            proba = proba.rechunk({1: -1})
        rows = proba.chunks[0]
        self.proba = proba
        self.y_true = self._aligned(y_true, rows, "y_true")
        self.sample_weight = self._aligned(sample_weight, rows, "sample_weight")
        self.n_classes = 2 if proba.ndim == 1 else proba.shape[1]
        self.offsets = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64)
        if labels is None:
            import dask.array as da

            present = np.asarray(da.unique(self.y_true).compute())
            labels = resolve_classes(present, None, self.n_classes)
        self.labels = np.asarray(labels)

    @staticmethod
    def _aligned(value, rows, name):
        value = _as_array(value, name)
        if value is None:
            return None
        if value.shape[0] != sum(rows):
            raise ValueError(
                f"`{name}` has {value.shape[0]} samples but `y_prob` has {sum(rows)}; "
                "they must have the same length."
            )
        return value.rechunk({0: rows})

    def blocks(self):
        """Per chunk: delayed labels, probabilities, weights (or None) and first row."""
        y_blocks = self.y_true.to_delayed().ravel()
        p_blocks = self.proba.to_delayed().ravel()
        w_blocks = (
            [None] * len(p_blocks)
            if self.sample_weight is None
            else self.sample_weight.to_delayed().ravel()
        )
        return list(zip(y_blocks, p_blocks, w_blocks, self.offsets.tolist(), strict=True))

    def reduce(self, function, *args):
        """``function(y, p, w, first_row, *args)`` of every chunk, added up by merges.

        The results are accumulators (merged), arrays or lists (added).
        """
        import dask

        parts = [dask.delayed(function)(*block, *args) for block in self.blocks()]
        while len(parts) > 1:
            pairs = zip(parts[::2], parts[1::2], strict=False)
            merged = [dask.delayed(_add)(first, second) for first, second in pairs]
            parts = merged + ([parts[-1]] if len(parts) % 2 else [])
        return dask.compute(parts[0])[0]

    def accumulate(self, **options):
        """A :class:`CalibrationAccumulator` of all rows (the options as its own)."""
        template = CalibrationAccumulator(labels=self.labels, **options)
        return self.reduce(_accumulate_chunk, template)


def _add(first, second):
    if isinstance(first, CalibrationAccumulator):
        return first.merge(second)
    return first + second


def _accumulate_chunk(y, p, w, first_row, template):
    return copy.deepcopy(template).update(y, p, w, row_ids=first_row)


def _checked(y, p, w, labels):
    return check_classification_inputs(y, p, labels=labels, sample_weight=w)


def _cell_members(y, p, w, first_row, labels, convention, n_fine, cells):
    """The scores and weights of the rows whose fine cell is one of ``cells``."""
    y_index, proba, weight = _checked(y, p, w, labels)
    score, _ = scores_and_outcomes(proba, y_index, convention)
    inside = np.isin(assign_bins(score, uniform_bin_edges(n_fine)), cells)
    weight = np.ones(score.shape[0]) if weight is None else weight
    return [(score[inside].astype(np.float64), weight[inside])]


def _bin_sums(y, p, w, first_row, labels, convention, edges):
    """Per bin of ``edges``: ``w``, ``w s``, ``w y``, ``w^2`` and ``1[w > 0]``."""
    y_index, proba, weight = _checked(y, p, w, labels)
    score, outcome = scores_and_outcomes(proba, y_index, convention)
    weight = np.ones(score.shape[0]) if weight is None else weight
    index = assign_bins(score, edges)
    columns = [weight, weight * score, weight * outcome, weight * weight, (weight > 0) * 1.0]
    n_bins = edges.shape[0] - 1
    return np.stack([np.bincount(index, column, minlength=n_bins) for column in columns])


def equal_mass_sums(data, n_bins, convention):
    """Exact equal-mass bins (as ``quantile_bin_edges``) and their sums, in three passes.

    The fine histogram places each edge in a cell; the rows of those cells, sorted,
    give the exact edges; a last pass sums the exact bins.

    Returns
    -------
    edges : ndarray of shape (n_bins + 1,)
    sums : ndarray of shape (5, n_bins)
    """
    accumulator = data.accumulate(
        n_bins=n_bins, convention=convention, metrics=["adaptive_ece", "accuracy"]
    )
    fine = accumulator._state["fine"]
    layout = accumulator._layout
    weight, positive = fine[0], fine[4]
    nonintegral = accumulator._state["scores"][7] > 0
    cumulative = np.cumsum(weight)
    scale = positive.sum() / cumulative[-1] if nonintegral else 1.0
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
    """Per-bin ``w``, ``w s``, ``w y``, ``w^2``, ``1[w > 0]`` and the edges, in memory's bins."""
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
    n_rows = accumulator.n_samples_total()
    error, bandwidth, bound = grid_smooth_ece(grid, n_rows, bandwidth)
    if bound:
        sums = data.reduce(_linear_grid, data.labels, convention, _smece_grid_size(bandwidth))
        eps = _SMECE_DENSITY_EPS * float(grid[0].sum()) / n_rows
        error = float(_smece_from_grid(sums, bandwidth, eps))
    return error, bandwidth
