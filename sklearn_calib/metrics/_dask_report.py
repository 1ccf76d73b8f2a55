"""``calibration_report`` of Dask collections: the same report from passes over chunks.

- errors: ECE, classwise ECE and smECE, with their Poisson-bootstrap intervals, from one
  :class:`CalibrationAccumulator` pass; the adaptive ECE and the debiased error on the
  exact equal-mass bins (three passes, :func:`._dask.equal_mass_sums`) and a fourth pass
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

import numbers

import numpy as np
from sklearn.isotonic import isotonic_regression

from .._validation import check_n_bins
from ._accumulator import check_batch
from ._accumulator_results import interval
from ._binning import assign_bins, uniform_bin_edges
from ._bootstrap import CI_METHODS
from ._calibration_report import _format
from ._dask import DaskPredictions, equal_mass_sums, smooth_ece_of
from ._dask_metrics import seed_of
from ._debiased import _debiased_from_bins
from ._decomposition import (
    LOGIT_FLOOR,
    _nll_derivatives,
    inverse_temperature_root,
    logit_gaps,
    per_sample_score,
    tempered,
)
from ._dispatch import register
from ._fused import replicate_sums
from ._metrics import (
    CONVENTIONS,
    NLL_EPS,
    _calibration_error_from_bins,
    _check_option,
    scores_and_outcomes,
)
from ._poisson import row_keys, seed_key
from ._resampling import check_interval_options

#: Cells per class of the Brier score's isotonic recalibration on Dask input.
ISOTONIC_CELLS = 1 << 12


def _chunk(y, p, w, labels):
    y_index, proba, weight = check_batch(y, p, labels, w)
    return y_index, proba, np.ones(len(y_index)) if weight is None else weight


def _fixed_bin_replicates(y, p, w, first_row, labels, convention, edges, n_resamples, seed):
    """Poisson-bootstrap sums of ``w``, ``w s``, ``w y``, ``w^2``, ``1[w > 0]`` per bin."""
    y_index, proba, weight = _chunk(y, p, w, labels)
    native, outcome = scores_and_outcomes(proba, y_index, convention)
    cells = assign_bins(native, edges).astype(np.int64)[:, None]
    score = native.astype(np.float64)
    columns = [weight, weight * score, weight * outcome, weight * weight, (weight > 0) * 1.0]
    values = np.ascontiguousarray(np.stack(columns, axis=1)[:, None, :])
    out = np.zeros((edges.shape[0] - 1, 5, n_resamples))
    base = row_keys(first_row + np.arange(len(y_index)), seed_key(seed))
    replicate_sums(base, cells, values, out)
    return out


def _log_parts(y, p, w, first_row, labels):
    y_index, proba, weight = _chunk(y, p, w, labels)
    return np.log(np.maximum(proba.astype(np.float64), LOGIT_FLOOR)), y_index, weight


def _derivative_sums(y, p, w, first_row, labels, total, beta):
    log_proba, y_index, weight = _log_parts(y, p, w, first_row, labels)
    gap, true_gap = logit_gaps(log_proba, y_index)
    return np.array(_nll_derivatives(gap, true_gap, weight / total, beta))


def _tempered_loss(y, p, w, first_row, labels, beta, n_samples):
    log_proba, y_index, weight = _log_parts(y, p, w, first_row, labels)
    recalibrated = tempered(log_proba, beta, n_samples)
    return np.array([weight @ per_sample_score(recalibrated, y_index, "log_loss")])


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


def _decompositions(data, result, frequencies, n_samples, total):
    labels = data.labels
    beta = inverse_temperature_root(
        lambda b: tuple(data.reduce(_derivative_sums, labels, total, b))
    )
    refined_log = float(data.reduce(_tempered_loss, labels, beta, n_samples)[0]) / total
    cells = data.reduce(_class_cells, labels, ISOTONIC_CELLS)
    refined_brier = sum(_isotonic_on_cells(*column) for column in cells) / total
    if cells.shape[0] == 1:  # binary: both columns of the recalibrated pair
        refined_brier *= 2.0
    clipped = np.clip(frequencies, NLL_EPS, 1.0)
    parts = {}
    for key, score, refined, uncertainty, extra in (
        ("brier", result.brier, refined_brier, 1.0 - np.sum(frequencies**2), {}),
        (
            "log_loss",
            result.nll,
            refined_log,
            float(-np.sum(frequencies * np.log(clipped))),
            {"temperature": 1.0 / beta},
        ),
    ):
        parts[key] = {
            "score": float(score),
            "miscalibration": float(score - refined),
            "discrimination": float(uncertainty - refined),
            "uncertainty": float(uncertainty),
            "refinement": float(refined),
            **{name: float(value) for name, value in extra.items()},
        }
    return parts


def _check_report_options(call):
    n_bins = check_n_bins(call.n_bins)
    _check_option(call.ci_method, "ci_method", CI_METHODS)
    _check_option(call.convention, "convention", CONVENTIONS)
    if call.ci_method != "percentile":
        raise ValueError(
            "calibration_report of Dask input reads its intervals off Poisson-bootstrap "
            f"replicates: it takes ci_method='percentile', got {call.ci_method!r}."
        )
    if not isinstance(call.output_dict, (bool, np.bool_)):
        raise ValueError(f"Expected `output_dict` to be a bool, got {call.output_dict!r}.")
    digits = call.digits
    if isinstance(digits, (bool, np.bool_)) or not isinstance(digits, numbers.Integral):
        raise ValueError(f"Expected `digits` to be an integer >= 0, got {digits!r}.")
    if digits < 0:
        raise ValueError(f"Expected `digits` to be an integer >= 0, got {digits!r}.")
    n_resamples, level = check_interval_options(call.n_resamples, call.confidence_level)
    return n_bins, n_resamples, level


@register("calibration_report")
def calibration_report(call):
    """:func:`~sklearn_calib.metrics.calibration_report` of Dask input."""
    n_bins, n_resamples, level = _check_report_options(call)
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
    errors = {
        key: {part: result.intervals[key][part] for part in ("estimate", "low", "high")}
        for key in ("ece", "classwise_ece", "smooth_ece")
    }
    if result.smooth_ece_bound:  # smECE's own grid does not nest: bin it exactly
        exact, _ = smooth_ece_of(data, result.smooth_ece_bandwidth, convention)
        errors["smooth_ece"]["estimate"] = exact
    errors["smooth_ece"]["bandwidth"] = result.smooth_ece_bandwidth
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
        ("debiased_ce", _debiased_from_bins(*sums), _debiased_from_bins(*columns)),
    ):
        entry = interval(float(estimate), values, level, key)
        errors[key] = {part: entry[part] for part in ("estimate", "low", "high")}
    order = ("ece", "adaptive_ece", "classwise_ece", "smooth_ece", "debiased_ce")
    errors = {key: errors[key] for key in order}
    if result.spiegelhalter is None or result.ks is None:
        raise ValueError(
            "The tests of calibration are undefined: every weighted score is 0 or 1 (or "
            "1/2 for Spiegelhalter's), so the outcomes have no variance under the null."
        )
    tests = {"spiegelhalter": dict(result.spiegelhalter)}
    tests.update({key: dict(result[key]) for key in ("ks", "kuiper")})
    total = float(accumulator._state["scores"][0])
    frequencies = accumulator._state["classwise"][2].sum(axis=1) / total
    decomposition = _decompositions(data, result, frequencies, result.n_samples, total)
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
        "decomposition": decomposition,
    }
    if call.output_dict:
        return report
    return _format(report, call.digits) + (
        "\n(Dask input: intervals by the Poisson bootstrap; KS and Kuiper within "
        f"{tests['kuiper']['bound']:.2g} of their statistics; the Brier decomposition's "
        "isotonic recalibration on 2^12 cells per class)"
    )
