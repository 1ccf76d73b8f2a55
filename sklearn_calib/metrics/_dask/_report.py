"""``calibration_report`` of Dask collections: the same report from passes over chunks.

- errors: ECE, classwise ECE and smECE, with their Poisson-bootstrap intervals, from one
  :class:`CalibrationAccumulator` pass; the adaptive ECE and the debiased error on the
  exact equal-mass bins (three passes, ``_chunks.equal_mass_sums``) and a fourth pass
  for their Poisson-bootstrap intervals on those bins. The estimates are the in-memory
  ones; the intervals resample rows by Poisson counts where the in-memory report draws
  groups of rows, so they differ by the bootstrap's own noise.
- tests: Spiegelhalter's exactly; Kolmogorov-Smirnov and Kuiper read at the ends of
  2^14 cells, with the bound of their statistic (``bound`` in the dictionary);
- decompositions: the log loss's by temperature scaling exactly (the temperature by
  Newton steps on summed derivatives, then one pass); the Brier score's by an isotonic
  recalibration constant on 2^12 cells of each class's probability, an approximation of
  CORP's (which fits every distinct value) that removes at most as much.
"""

import numpy as np
from sklearn.isotonic import isotonic_regression

from .._core._binning import assign_bins, uniform_bin_edges
from .._core._dispatch import register_handler
from .._core._poisson import row_keys, seed_key
from .._core._scores import _confidence, scores_and_outcomes
from .._functions._binned import _calibration_error_from_bins
from .._functions._debiased import _debiased_from_bins
from .._fused._replicates import replicate_sums
from .._statistics._calibration_report import (
    _TESTS,
    _format,
    check_report_options,
    report_errors,
)
from .._statistics._decomposition import marginal_scores
from .._statistics._tempered import (
    _TemperedNLL,
    exponential_row_totals,
    inverse_temperature,
    logit_gaps,
    tempered_scores,
)
from .._streaming._accumulator import check_batch
from .._streaming._batch_sums import weight_columns
from .._streaming._layout import NON_COUNTS
from .._streaming._results import interval, scaled_bins
from ._chunks import DaskPredictions, equal_mass_sums, smooth_ece_of
from ._metrics import seed_of, undefined_test

#: Cells per class of the Brier score's isotonic recalibration on Dask input.
ISOTONIC_CELLS = 1 << 12


def _chunk(y, p, w, labels):
    y_index, proba, weight = check_batch(y, p, labels, w)
    return y_index, proba, np.ones(len(y_index)) if weight is None else weight


def _fixed_bin_replicates(y, p, w, first_row, labels, convention, edges, n_resamples, seed):
    """Poisson-bootstrap sums of ``weight_columns`` per bin."""
    y_index, proba, weight = _chunk(y, p, w, labels)
    native, outcome = scores_and_outcomes(proba, y_index, convention)
    cells = assign_bins(native, edges).astype(np.int64)[:, None]
    columns = weight_columns(weight, native.astype(np.float64), outcome.astype(np.float64))
    values = np.ascontiguousarray(np.stack(columns, axis=1)[:, None, :])
    out = np.zeros((edges.shape[0] - 1, len(columns), n_resamples))
    base = row_keys(first_row + np.arange(len(y_index)), seed_key(seed))
    replicate_sums(base, cells, values, out)
    return out


def _logit_gaps(y, p, w, labels):
    y_index, proba, weight = _chunk(y, p, w, labels)
    return (*logit_gaps(proba, y_index, _confidence(proba)), weight)


def _derivative_sums(y, p, w, first_row, labels, total, beta):
    gap, true_gap, weight = _logit_gaps(y, p, w, labels)
    return np.array(_TemperedNLL(gap, true_gap, weight / total)(beta))


def _tempered_loss(y, p, w, first_row, labels, beta, mixing):
    gap, true_gap, weight = _logit_gaps(y, p, w, labels)
    totals = exponential_row_totals(gap, beta)
    return np.array([weight @ tempered_scores(gap, true_gap, beta, totals, mixing, "log_loss")])


class _ChunkedTemperedNLL:
    """The weighted mean NLL of ``softmax(beta * gap)`` over the chunks, as a function of
    ``beta`` (the in-memory ``_TemperedNLL``'s value and derivatives, summed chunk by
    chunk)."""

    def __init__(self, data, total):
        self.data, self.total = data, total

    def __call__(self, beta):
        """The NLL and its first and second derivative in ``beta``: one pass over the
        chunks."""
        return tuple(self.data.reduce(_derivative_sums, self.data.labels, self.total, beta))


def _class_cells(y, p, w, first_row, labels, n_cells):
    """Per class and cell of its probability: ``w``, ``w 1[y = k]`` (shape (K, 2, cells))."""
    y_index, proba, weight = _chunk(y, p, w, labels)
    edges = uniform_bin_edges(n_cells)
    columns = range(1, 2) if proba.shape[1] == 2 else range(proba.shape[1])
    sums = np.zeros((len(columns), 2, n_cells))
    for row, k in enumerate(columns):
        cell = assign_bins(np.ascontiguousarray(proba[:, k]), edges)
        sums[row, 0] = np.bincount(cell, weight, minlength=n_cells)
        sums[row, 1] = np.bincount(cell, weight * (y_index == k), minlength=n_cells)
    return sums


def _isotonic_on_cells(weight, positive):
    """The recalibrated Brier sum of one column: ``sum w (g - y)^2`` with ``g`` isotonic
    on the cells (pooled within each), from the cells' weights and positive weights."""
    held = weight > 0
    fitted = isotonic_regression(positive[held] / weight[held], sample_weight=weight[held])
    return float(np.sum(weight[held] * fitted**2 - 2.0 * fitted * positive[held] + positive[held]))


def _sample_count(state):
    """The samples the rows stand for (``sample_count`` of all the weights)."""
    not_counts = state["scores"][NON_COUNTS] > 0
    return float(state["positive"]) if not_counts else float(state["scores"][0])


def _decompositions(data, result, state):
    """The Brier score's and the log loss's decompositions (see the module)."""
    labels = data.labels
    total = float(state["scores"][0])
    frequencies = state["classwise"][2].sum(axis=1) / total
    beta = inverse_temperature(_ChunkedTemperedNLL(data, total))
    mixing = 1.0 / (_sample_count(state) + 1)
    refined_log = float(data.reduce(_tempered_loss, labels, beta, mixing)[0]) / total
    cells = data.reduce(_class_cells, labels, ISOTONIC_CELLS)
    refined_brier = sum(_isotonic_on_cells(*column) for column in cells) / total
    if cells.shape[0] == 1:  # binary: both columns of the recalibrated pair
        refined_brier *= 2.0
    parts = {}
    for key, score, refined, extra in (
        ("brier", result.brier, refined_brier, {}),
        ("log_loss", result.nll, refined_log, {"temperature": 1.0 / beta}),
    ):
        uncertainty = float(frequencies @ marginal_scores(frequencies, key))
        parts[key] = {
            "score": float(score),
            "miscalibration": float(score - refined),
            "discrimination": float(uncertainty - refined),
            "uncertainty": uncertainty,
            "refinement": float(refined),
            **{name: float(value) for name, value in extra.items()},
        }
    return parts


def _tests(result, state):
    """The tests' entries; an undefined statistic gets NaN and the reason, as in memory."""
    tests = {}
    for key, _ in _TESTS:
        reason = undefined_test(state["scores"], key)
        if reason is None:
            tests[key] = dict(result[key])
        else:
            tests[key] = {"statistic": float("nan"), "pvalue": float("nan"), "undefined": reason}
    return tests


@register_handler("calibration_report")
def calibration_report(call):
    """:func:`~sklearn_calib.metrics.calibration_report` of Dask input."""
    n_bins, n_resamples, level = check_report_options(
        call.n_bins,
        call.convention,
        call.correction,
        call.confidence_level,
        call.n_resamples,
        call.ci_method,
        call.output_dict,
        call.digits,
    )
    if call.ci_method != "percentile":
        raise ValueError(
            "calibration_report of Dask input reads its intervals off Poisson-bootstrap "
            f"replicates: it takes ci_method='percentile', got {call.ci_method!r}."
        )
    convention = call.convention
    data = DaskPredictions(call.y_true, call.y_prob, call.sample_weight, call.labels)
    seed = seed_of(call.random_state)
    accumulator = data.accumulate(
        n_bins=n_bins,
        convention=convention,
        metrics=["ece", "classwise_ece", "smooth_ece", "spiegelhalter", "ks"],
        n_resamples=n_resamples,
        interval_metrics=("ece", "classwise_ece", "smooth_ece"),
        random_state=seed,
    )
    result = accumulator.compute(confidence_level=level)
    intervals = dict(result.intervals)
    if result.smooth_ece_bound:  # smECE's own grid does not nest: bin it exactly
        exact, _ = smooth_ece_of(data, result.smooth_ece_bandwidth, convention)
        intervals["smooth_ece"] = interval(
            exact, intervals["smooth_ece"].replicates, level, "smooth_ece"
        )
    edges, sums = equal_mass_sums(data, n_bins, convention)
    replicates = data.reduce(
        _fixed_bin_replicates, data.labels, convention, edges, n_resamples, seed
    )
    by_replicate = np.moveaxis(replicates, -1, 0)  # (replicate, bin, column)
    columns = np.moveaxis(by_replicate, 2, 0)
    for key, estimate, values in (
        (
            "adaptive_ece",
            _calibration_error_from_bins(*sums[:3], "l1"),
            _calibration_error_from_bins(*columns[:3], "l1"),
        ),
        (
            "debiased_ce",
            _debiased_from_bins(*scaled_bins(sums)),
            _debiased_from_bins(*scaled_bins(columns)),
        ),
    ):
        intervals[key] = interval(estimate, values, level, key)
    order = [metric.name for metric in report_errors()]
    missing = [key for key in order if key not in intervals]
    if missing:
        raise NotImplementedError(
            f"calibration_report of Dask input computes the errors {sorted(intervals)}, not "
            f"{missing}: compute the Dask collections first."
        )
    parts = ("estimate", "low", "high", "flags")
    errors = {key: {part: intervals[key][part] for part in parts} for key in order}
    errors["smooth_ece"]["bandwidth"] = result.smooth_ece_bandwidth
    state = accumulator._state
    tests = _tests(result, state)
    report = {
        "n_samples": result.n_samples,
        "n_classes": data.n_classes,
        "n_bins": n_bins,
        "convention": convention,
        "confidence_level": level,
        "ci_method": "percentile",
        "n_resamples": n_resamples,
        "errors": errors,
        "tests": tests,
        "decomposition": _decompositions(data, result, state),
    }
    if call.output_dict:
        return report
    notes = ["intervals by the Poisson bootstrap"]
    if "bound" in tests["kuiper"]:
        notes.append(f"KS and Kuiper within {tests['kuiper']['bound']:.2g} of their statistics")
    notes.append("the Brier decomposition's isotonic recalibration on 2^12 cells per class")
    return _format(report, call.digits) + f"\n(Dask input: {'; '.join(notes)})"
