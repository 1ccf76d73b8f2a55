"""One batch's statistics added to an accumulator's state: numpy arrays, or torch tensors
on their device (no copy to the host).

The statistics are those of ``_layout``. Both functions take checked
(numpy) or raw (torch, checked on the device and counted in ``invalid``) probabilities.
The torch functions import torch where they run: a tensor batch has imported it already.
"""

import functools

import numpy as np

from ..._validation import ROW_SUM_TOLERANCE
from .._core._binning import assign_bins, linear_binning, uniform_bin_edges
from .._core._registry import by_name
from .._core._rows import block_rows
from .._core._scores import _confidence_and_correct, scores_and_outcomes
from .._core._weights import SQUARE_RANGES, non_counts, range_exponent, square_range
from .._functions._predictions import Predictions
from .._functions._scores import log_loss_clip, per_sample_score
from .._fused._bins import classwise_sums
from .._fused._replicates import replicate_sums, torch_replicate_sums
from ._layout import REPLICATE_GRID

#: Entries per block of the resampled statistics (bounds their temporaries).
_REPLICATE_ELEMENTS = 1 << 16
#: Cells a row adds to in each resampled group (classwise: one per class).
_ENTRIES = {"top": 1, "scores": 1, "smooth": 2}


def _sums(index, n_cells, columns):
    """``np.bincount`` of each column (float64) into ``n_cells`` cells, stacked."""
    return np.stack([np.bincount(index, column, minlength=n_cells) for column in columns])


def _linear_sums(score, n_points, columns):
    index, frac = linear_binning(score, n_points)
    lower = _sums(index, n_points, [c * (1.0 - frac) for c in columns])
    return lower + _sums(index + 1, n_points, [c * frac for c in columns])


def weight_columns(weight, score, outcome, ldexp=np.ldexp):
    """Per row: ``w``, ``w s``, ``w y``, ``1[w > 0]``, and the square of ``w`` scaled by
    a power of two in the column of its range of scale (:func:`square_range`).

    numpy arrays, or torch tensors with ``ldexp=torch.ldexp``.
    """
    ranges = square_range(weight)
    scaled = ldexp(weight, range_exponent(ranges))
    square = scaled * scaled
    squares = [square * (ranges == r) for r in range(SQUARE_RANGES)]
    return [weight, weight * score, weight * outcome, (weight > 0) * 1.0, *squares]


def add_numpy_batch(state, layout, proba, y_index, sample_weight, base):
    """Add one checked batch to the numpy state, in place.

    Parameters
    ----------
    state : dict of str to ndarray
        The accumulator's statistics.
    layout : Layout
        Their sizes.
    proba : ndarray of shape (n_rows, n_classes)
        Checked probabilities.
    y_index : ndarray of shape (n_rows,)
        Column of each row's true class.
    sample_weight : ndarray of shape (n_rows,) or None
        Sample weights.
    base : ndarray of shape (n_rows,), uint64, or None
        The rows' bootstrap keys (None without replicates).
    """
    n_rows, n_classes = proba.shape
    n_bins = layout.n_bins
    weight = np.ones(n_rows) if sample_weight is None else sample_weight
    score, outcome = scores_and_outcomes(proba, y_index, layout.convention)
    score64, outcome64 = score.astype(np.float64), outcome.astype(np.float64)
    columns = weight_columns(weight, score64, outcome64)
    top_bin = assign_bins(score, uniform_bin_edges(n_bins))
    if "top" in state:
        state["top"] += _sums(top_bin, n_bins, columns)
    if "fine" in state:
        fine_bin = assign_bins(score, uniform_bin_edges(layout.n_fine))
        state["fine"] += _sums(fine_bin, layout.n_fine, columns)
    if "grid" in state:
        state["grid"] += _linear_sums(score64, layout.n_grid, columns[:3])
    confidence, correct = _confidence_and_correct(proba, y_index)
    if "predicted" in state:
        cell = proba.argmax(axis=1) * n_bins + assign_bins(confidence, uniform_bin_edges(n_bins))
        columns_of_prediction = [weight, weight * confidence, weight * correct]
        state["predicted"] += _sums(cell, n_classes * n_bins, columns_of_prediction).reshape(
            3, n_classes, n_bins
        )
    if "classwise" in state:
        data = Predictions(y_index, proba, sample_weight)
        sums = classwise_sums(data, n_bins, block_rows(n_classes), None, 1)
        state["classwise"] += sums.reshape(3, n_classes, n_bins)
    nll = brier = None
    if "scores" in state or "scores" in layout.groups:
        nll = per_sample_score(proba, y_index, "log_loss")
        brier = per_sample_score(proba, y_index, "brier")
    if "scores" in state:
        terms = _score_terms(weight, nll, brier, correct * 1.0, score64, outcome64, columns[4:])
        state["scores"] += terms + [non_counts(weight)]
    if base is not None:
        offsets = layout.replicate_offsets()
        n_entries = sum(_ENTRIES.get(group, n_classes) for group in layout.groups)
        step = max(1, _REPLICATE_ELEMENTS // n_entries)
        for start in range(0, n_rows, step):
            rows = slice(start, start + step)
            cells, values = _replicate_entries(
                layout.groups,
                layout.n_bins,
                offsets,
                proba[rows],
                y_index[rows],
                weight[rows],
                score64[rows],
                outcome64[rows],
                top_bin[rows],
                None if nll is None else nll[rows],
                None if brier is None else brier[rows],
            )
            replicate_sums(base[rows], cells, values, state["replicates"], n_rows)
    _add_own_sums(state, layout, proba.astype(np.float64, copy=False), y_index, weight, np.stack)
    state["rows"] += n_rows
    state["positive"] += np.count_nonzero(weight)


def _add_own_sums(state, layout, proba, y_index, weight, stack):
    """Add the sums of the metrics declared with sums of their own (``Streaming.sums``),
    each stacked by ``stack`` (numpy's or torch's)."""
    for name, _ in layout.own_sums:
        sums = by_name(name).streaming.sums(proba, y_index, weight)
        state[name] += stack([term * 1.0 for term in sums])


def _score_terms(weight, nll, brier, correct, score, outcome, squares):
    """The state's ``scores`` but the last (numpy arrays or torch tensors); ``squares``
    are the scaled squared weights per range of scale (:func:`weight_columns`)."""
    spread = score * (1.0 - score)
    tilt = 1.0 - 2.0 * score
    return [
        weight.sum(),
        weight @ nll,
        weight @ brier,
        weight @ correct,
        weight @ ((outcome - score) * tilt),
        *(square @ (tilt * tilt * spread) for square in squares),
        *(square @ spread for square in squares),
    ]


def _replicate_entries(
    groups, n_bins, offsets, proba, y_index, weight, score, outcome, top_bin, nll, brier
):
    """Each row's cells and values ``(n_rows, n_entries)``, ``(n_rows, n_entries, 3)``."""
    cells, values = [], []
    base_columns = np.stack([weight, weight * score, weight * outcome], axis=1)
    for group in groups:
        start = offsets[group]
        if group == "top":
            cells.append(start + top_bin[:, None])
            values.append(base_columns[:, None, :])
        elif group == "scores":
            cells.append(np.full((weight.shape[0], 1), start))
            values.append(np.stack([weight, weight * nll, weight * brier], axis=1)[:, None, :])
        elif group == "smooth":
            index, frac = linear_binning(score, REPLICATE_GRID)
            cells.append(start + np.stack([index, index + 1], axis=1))
            share = np.stack([1.0 - frac, frac], axis=1)
            values.append(share[:, :, None] * base_columns[:, None, :])
        else:
            n_classes = proba.shape[1]
            bins = assign_bins(proba.ravel(), uniform_bin_edges(n_bins)).reshape(-1, n_classes)
            cells.append(start + np.arange(n_classes) * n_bins + bins)
            probability = proba.astype(np.float64)
            indicator = (y_index[:, None] == np.arange(n_classes)) * 1.0
            stacked = np.stack([np.ones_like(probability), probability, indicator], axis=2)
            values.append(weight[:, None, None] * stacked)
    cells = np.concatenate(cells, axis=1).astype(np.int64)
    return cells, np.ascontiguousarray(np.concatenate(values, axis=1))


@functools.lru_cache(maxsize=64)
def _device_constant(name, size, dtype, device):
    """Inner edges of ``size`` equal-width bins, or ``arange(size)``, on a device."""
    import torch

    if name == "edges":
        return torch.as_tensor(uniform_bin_edges(size)[1:-1], dtype=dtype, device=device)
    return torch.arange(size, device=device)


def _torch_sums(index, n_cells, columns):
    import torch

    return torch.stack([torch.bincount(index, c, minlength=n_cells) for c in columns])


def _torch_bins(values, n_bins):
    import torch

    edges = _device_constant("edges", n_bins, values.dtype, values.device)
    return torch.bucketize(values, edges, right=False)


def _torch_linear_binning(score, n_points):
    position = score * (n_points - 1)
    index = position.long().clamp(0, n_points - 2)
    return index, position - index


def _torch_linear_sums(score, n_points, columns):
    index, frac = _torch_linear_binning(score, n_points)
    lower = _torch_sums(index, n_points, [c * (1.0 - frac) for c in columns])
    return lower + _torch_sums(index + 1, n_points, [c * frac for c in columns])


def _torch_checked(proba, y_index, sample_weight):
    """Count the invalid rows (without a host sync) and make every row computable.

    Returns the probabilities (NaN as 0, clipped to [0, 1], as ``check_probabilities``
    clips rounding above 1), the labels clipped to the columns, the weights (NaN and
    negative ones as 0) and the four counts of ``_layout``'s ``invalid``.
    """
    import torch

    n_classes = proba.shape[1]
    entries_ok = (torch.isfinite(proba) & (proba >= 0)).all(dim=1)
    sums_ok = (proba.sum(dim=1, dtype=torch.float64) - 1.0).abs() <= ROW_SUM_TOLERANCE
    labels_ok = (y_index >= 0) & (y_index < n_classes)
    counts = [~entries_ok, entries_ok & ~sums_ok, ~labels_ok]
    if sample_weight is None:
        weight = torch.ones(proba.shape[0], dtype=torch.float64, device=proba.device)
        counts.append(~torch.ones_like(labels_ok))
    else:
        weight = sample_weight.to(torch.float64)
        weight_ok = torch.isfinite(weight) & (weight >= 0)
        counts.append(~weight_ok)
        weight = torch.where(weight_ok, weight, 0.0)
    invalid = torch.stack([c.sum() for c in counts]).to(torch.float64)
    proba = torch.nan_to_num(proba, nan=0.0, posinf=1.0, neginf=0.0).clamp(0.0, 1.0)
    return proba, y_index.clamp(0, n_classes - 1), weight, invalid


def add_torch_batch(state, layout, proba, y_index, sample_weight, row_ids, key):
    """Add one batch of torch tensors to the torch state on their device, in place.

    Parameters
    ----------
    state : dict of str to torch.Tensor
        The accumulator's statistics (float64, on the batch's device).
    layout : Layout
        Their sizes.
    proba : torch.Tensor of shape (n_rows, n_classes)
        Probabilities, unchecked.
    y_index : torch.Tensor of shape (n_rows,), int64
        Column of each row's true class.
    sample_weight : torch.Tensor of shape (n_rows,) or None
        Sample weights.
    row_ids : torch.Tensor of shape (n_rows,), int64, or None
        The rows' ids (None without replicates).
    key : int
        The bootstrap's key.
    """
    import torch

    proba, y_index, weight, invalid = _torch_checked(proba, y_index, sample_weight)
    state["invalid"] += invalid
    n_rows, n_classes = proba.shape
    n_bins = layout.n_bins
    confidence, predicted = proba.max(dim=1)
    correct = predicted == y_index
    if layout.convention == "top_label":
        score, outcome = confidence, correct
    else:
        score, outcome = proba[:, 1], y_index == 1
    score64, outcome64 = score.to(torch.float64), outcome.to(torch.float64)
    columns = weight_columns(weight, score64, outcome64, torch.ldexp)
    top_bin = _torch_bins(score, n_bins)
    if "top" in state:
        state["top"] += _torch_sums(top_bin, n_bins, columns)
    if "fine" in state:
        state["fine"] += _torch_sums(_torch_bins(score, layout.n_fine), layout.n_fine, columns)
    if "grid" in state:
        state["grid"] += _torch_linear_sums(score64, layout.n_grid, columns[:3])
    confidence64, correct64 = confidence.to(torch.float64), correct.to(torch.float64)
    if "predicted" in state:
        cell = predicted * n_bins + _torch_bins(confidence, n_bins)
        state["predicted"] += _torch_sums(
            cell, n_classes * n_bins, [weight, weight * confidence64, weight * correct64]
        ).reshape(3, n_classes, n_bins)
    if "classwise" in state:
        classes = _device_constant("arange", n_classes, None, proba.device)
        class_cell = (_torch_bins(proba, n_bins) + classes * n_bins).reshape(-1)
        repeated = weight[:, None].expand(n_rows, n_classes).reshape(-1)
        probability = proba.to(torch.float64).reshape(-1)
        indicator = (y_index[:, None] == classes).reshape(-1).to(torch.float64)
        state["classwise"] += _torch_sums(
            class_cell, n_classes * n_bins, [repeated, repeated * probability, repeated * indicator]
        ).reshape(3, n_classes, n_bins)
    true_proba = proba.gather(1, y_index[:, None])[:, 0].to(torch.float64)
    # clipped at the machine epsilon of the dtype the numpy checks would give
    clip = log_loss_clip(np.float32 if proba.dtype == torch.float32 else np.float64)
    nll = -torch.log(true_proba.clamp(*clip))
    brier = proba.to(torch.float64).square().sum(dim=1) - 2.0 * true_proba + 1.0
    if "scores" in state:
        terms = _score_terms(weight, nll, brier, correct64, score64, outcome64, columns[4:])
        state["scores"] += torch.stack(terms + [non_counts(weight).to(torch.float64)])
    if row_ids is not None:
        _add_torch_replicates(
            state["replicates"],
            layout,
            proba,
            y_index,
            weight,
            score64,
            outcome64,
            top_bin,
            nll,
            brier,
            row_ids,
            key,
        )
    _add_own_sums(state, layout, proba.to(torch.float64), y_index, weight, torch.stack)
    state["rows"] += n_rows
    state["positive"] += (weight > 0).sum()


def _add_torch_replicates(
    out, layout, proba, y_index, weight, score, outcome, top_bin, nll, brier, row_ids, key
):
    """The Poisson bootstrap's sums of one batch, on its device (blocks of rows)."""
    import torch

    n_resamples = out.shape[2]
    offsets = layout.replicate_offsets()
    n_classes = proba.shape[1]
    n_entries = sum(_ENTRIES.get(group, n_classes) for group in layout.groups)
    step = max(1, _REPLICATE_ELEMENTS * 16 // (n_entries * 3 * n_resamples))
    for start in range(0, proba.shape[0], step):
        rows = slice(start, start + step)
        cells, values = [], []
        columns = torch.stack(
            [weight[rows], weight[rows] * score[rows], weight[rows] * outcome[rows]], 1
        )
        for group in layout.groups:
            first = offsets[group]
            if group == "top":
                cells.append(first + top_bin[rows, None])
                values.append(columns[:, None, :])
            elif group == "scores":
                cells.append(torch.full_like(top_bin[rows, None], first))
                stacked = torch.stack(
                    [weight[rows], weight[rows] * nll[rows], weight[rows] * brier[rows]], 1
                )
                values.append(stacked[:, None, :])
            elif group == "smooth":
                index, frac = _torch_linear_binning(score[rows], REPLICATE_GRID)
                cells.append(first + torch.stack([index, index + 1], 1))
                values.append(torch.stack([1.0 - frac, frac], 1)[:, :, None] * columns[:, None, :])
            else:
                classes = _device_constant("arange", n_classes, None, proba.device)
                cells.append(
                    first + classes * layout.n_bins + _torch_bins(proba[rows], layout.n_bins)
                )
                probability = proba[rows].to(torch.float64)
                indicator = (y_index[rows, None] == classes).to(torch.float64)
                stacked = torch.stack([torch.ones_like(probability), probability, indicator], 2)
                values.append(weight[rows, None, None] * stacked)
        cells = torch.cat(cells, dim=1)
        torch_replicate_sums(row_ids[rows], key, cells, torch.cat(values, dim=1), out)
