"""Temperature scaling and histogram binning fitted on Dask collections.

Both fits need sums over the rows only, so each chunk is checked as an in-memory fit
checks its data and summed on the active Dask scheduler (the user's client if any):

- temperature scaling: the weighted mean NLL and its first two derivatives in
  ``beta = 1/T`` are sums, so the safeguarded Newton search of the in-memory fit runs
  unchanged on them, one pass over the data per step, from the optimum of the same
  evenly spaced subsample; the temperature equals the in-memory one to the solver's
  tolerance;
- histogram binning (equal-width bins): per-bin weights and sums of the targets.
"""

import numpy as np
from sklearn.base import clone

from .._dask_chunks import ChunkedRows
from .._deprecation import parameter
from .._validation import check_class_labels, check_two_classes, resolve_classes
from ..metrics._core._binning import assign_bins, uniform_bin_edges
from ._base import evenly_spaced_rows
from ._temperature_solver import (
    _SUBSAMPLE_ROWS,
    RTOL,
    NLLPasses,
    _every_weighted_row_ties,
    solve_inverse_temperature,
    subsample_start,
)

_NAMES = ("y", "scores", "sample_weight")


class _DaskFitData(ChunkedRows):
    """Scores, labels and weights of a Dask fit, and the fitted classes."""

    def __init__(self, calibrator, scores, y, sample_weight, classes):
        super().__init__(y, scores, sample_weight, names=_NAMES)
        self.calibrator = clone(calibrator)
        n_classes = 2 if self.scores.ndim == 1 else self.scores.shape[1]
        present = self.distinct_labels()
        check_class_labels(present)
        if classes is None:
            check_two_classes(present)
        self.classes = resolve_classes(
            present, classes, n_classes, names=("y", "classes", "scores")
        )
        self.n_classes = n_classes
        if self.sample_weight is None:
            self.total_weight = float(self.n_samples)
        else:
            self.total_weight = float(self.reduce(_weight_total, self.calibrator, self.classes))
            if not self.total_weight > 0:
                raise ValueError(
                    "Expected `sample_weight` to have a positive sum, got all weights zero."
                )

    def fitted(self, calibrator):
        """Set the attributes of the checked data on ``calibrator``."""
        calibrator.classes_ = self.classes
        calibrator.n_classes_ = self.n_classes
        calibrator._scores_ndim = self.scores.ndim
        if self.scores.ndim == 2:
            calibrator.n_features_in_ = self.scores.shape[1]
        elif hasattr(calibrator, "n_features_in_"):
            del calibrator.n_features_in_


def _checked_chunk(y, scores, weight, calibrator, classes):
    """One chunk as the in-memory fit checks it; a chunk of zero weights is allowed."""
    weightless = weight is not None and not np.any(weight)
    scores, y_index, checked = calibrator._validate_fit_data(
        scores, y, None if weightless else weight, classes
    )
    if weightless:
        checked = np.zeros(np.shape(weight))
        if checked.shape != y_index.shape:
            raise ValueError(
                f"Expected `sample_weight` of shape {y_index.shape}, got shape {checked.shape}."
            )
    return scores, y_index, checked


def _weight_total(y, scores, weight, first_row, calibrator, classes):
    return float(_checked_chunk(y, scores, weight, calibrator, classes)[2].sum())


def _nll_sums(y, scores, weight, first_row, calibrator, classes, beta):
    """The chunk's NLL and derivatives times its total weight (they add over chunks)."""
    scores, y_index, weight = _checked_chunk(y, scores, weight, calibrator, classes)
    total = float(len(y_index) if weight is None else weight.sum())
    if total == 0:
        return np.zeros(3)
    return np.array(NLLPasses(calibrator._logits(scores), y_index, weight)(beta)) * total


def _fit_data(calibrator, scores, y, sample_weight, classes, option, value, reason):
    """Check the calibrator's parameters (``option`` must be ``value`` on Dask input)."""
    calibrator._validate_params()
    found = getattr(calibrator, option)
    if found != value:
        raise ValueError(
            f"{type(calibrator).__name__} fits Dask input with {option}={value!r} only "
            f"({reason}); got {option}={found!r}."
        )
    return _DaskFitData(calibrator, scores, y, sample_weight, classes)


def fit_temperature(calibrator, scores, y, sample_weight, classes):
    """Fit ``TemperatureScaling(objective="nll")`` on Dask collections, in place.

    ``fit_histogram_binning`` takes the same arguments: the calibrator, then the
    arguments of its ``fit``, the first three Dask collections or arrays.
    """
    reason = "the NLL and its derivatives are sums over the rows"
    data = _fit_data(calibrator, scores, y, sample_weight, classes, "objective", "nll", reason)
    rtol = RTOL.get(np.dtype(data.scores.dtype), RTOL[np.dtype(np.float64)])

    def evaluate(beta):
        sums = data.reduce(_nll_sums, data.calibrator, data.classes, beta)
        return tuple(sums / data.total_weight)

    beta = 1.0
    if data.n_samples > 4 * _SUBSAMPLE_ROWS:
        rows = evenly_spaced_rows(data.n_samples, _SUBSAMPLE_ROWS)
        sub_y, sub_scores, sub_weight = data.rows(rows)
        sub_scores, sub_index, sub_weight = _checked_chunk(
            sub_y, sub_scores, sub_weight, data.calibrator, data.classes
        )
        if sub_weight is None or sub_weight.sum() > 0:
            beta = subsample_start(data.calibrator._logits(sub_scores), sub_index, sub_weight, rtol)

    def every_row_ties():
        return bool(data.reduce(_ties, data.calibrator, data.classes) == 0)

    beta, calibrator.n_iter_ = solve_inverse_temperature(evaluate, beta, rtol, every_row_ties)
    calibrator.temperature_ = 1.0 / beta
    data.fitted(calibrator)
    return calibrator


def _ties(y, scores, weight, first_row, calibrator, classes):
    """The number of weighted rows whose scores do not all tie."""
    scores, _, weight = _checked_chunk(y, scores, weight, calibrator, classes)
    logits = calibrator._logits(scores)
    return int(not _every_weighted_row_ties(logits, weight))


def _bin_sums(y, scores, weight, first_row, calibrator, classes, n_bins):
    """Per bin (per class when classwise): the weight and the weighted targets."""
    scores, y_index, weight = _checked_chunk(y, scores, weight, calibrator, classes)
    proba = calibrator._native_probabilities(scores)
    weight = np.ones(len(y_index)) if weight is None else weight
    edges = uniform_bin_edges(n_bins)
    if parameter(calibrator, "multi_class") == "top_label":
        correct = (np.argmax(proba, axis=1) == y_index) * weight
        index = assign_bins(proba.max(axis=1), edges)
        return np.stack([np.bincount(index, w, minlength=n_bins) for w in (weight, correct)])
    sums = np.empty((2, proba.shape[1], n_bins))
    for k in range(proba.shape[1]):
        index = assign_bins(np.ascontiguousarray(proba[:, k]), edges)
        sums[0, k] = np.bincount(index, weight, minlength=n_bins)
        sums[1, k] = np.bincount(index, weight * (y_index == k), minlength=n_bins)
    return sums


def fit_histogram_binning(calibrator, scores, y, sample_weight, classes):
    """Fit ``HistogramBinning(strategy="uniform")`` on Dask collections, in place."""
    reason = "equal-width bins are counts"
    data = _fit_data(calibrator, scores, y, sample_weight, classes, "strategy", "uniform", reason)
    n_bins = calibrator.n_bins
    counts, sums = data.reduce(_bin_sums, data.calibrator, data.classes, n_bins)
    edges = uniform_bin_edges(n_bins)
    centres = np.broadcast_to((edges[:-1] + edges[1:]) / 2, counts.shape)
    values = np.divide(sums, counts, out=np.array(centres), where=counts > 0)
    if parameter(calibrator, "multi_class") == "classwise":
        edges = np.tile(edges, (counts.shape[0], 1))
    calibrator.bin_edges_, calibrator.bin_values_, calibrator.bin_weights_ = edges, values, counts
    data.fitted(calibrator)
    return calibrator
