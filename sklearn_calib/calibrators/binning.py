"""Histogram binning (Zadrozny and Elkan 2001) and scaling-binning (Kumar et al. 2019).

Both map a probability to a value per bin, with the bin rule of the metrics
(:mod:`sklearn_calib.metrics._core._binning`: ``(lower, upper]``, 0 in the first bin), with one
of two reductions of a multiclass problem (``multi_class``):

- ``"top_label"``: bins on the top-1 confidence ``r = max_k p_k``. The top class gets the
  bin's value ``c`` and the other classes share ``1 - c`` in proportion to their
  probabilities (uniformly when they are all 0), so rows sum to 1. To keep the predicted
  class, ``c`` is raised where needed to just above the tie point ``t`` at which the
  runner-up would catch up (``t = p_2 / (1 - r + p_2)``, or ``1 / K`` when the others are
  all 0): to the next float above ``t`` (a few ulps more where rounding requires). Where
  this floor does not bind (``c`` above ``t`` by more than those few ulps), the output
  confidence is exactly the bin's value, so it takes at most ``n_bins`` values.
- ``"classwise"``: one-vs-rest, bins on each ``p_k`` separately, then each row is divided
  by its sum (an all-zero row becomes uniform).

A bin that held no fit data (zero total weight) gets its centre, ``(lower + upper) / 2``:
without evidence, a score is left near where it was.
"""

import numbers

import numpy as np
from sklearn.utils._param_validation import Hidden, Interval, StrOptions

from .._deprecation import DEPRECATED, keyword_only, parameter
from ..metrics._core._binning import assign_bins, bin_sums, quantile_bin_edges, uniform_bin_edges
from ._base import BaseCalibrator, renormalize, softmax
from ._dask_fit import fit_histogram_binning
from ._temperature_solver import fit_inverse_temperature

__all__ = ["HistogramBinning", "ScalingBinning"]


def _fit_bin_map(values, targets, n_bins, strategy, sample_weight):
    """Return edges, per-bin mean of ``targets`` (centre if empty) and per-bin weight."""
    if strategy == "uniform":
        edges = uniform_bin_edges(n_bins)
    else:
        edges = quantile_bin_edges(values, n_bins, sample_weight)
    counts, (sums,) = bin_sums(assign_bins(values, edges), n_bins, [targets], sample_weight)
    centres = (edges[:-1] + edges[1:]) / 2
    bin_values = np.divide(sums, counts, out=centres, where=counts > 0)
    return edges, bin_values, counts


def _replace_top_label(proba, confidence):
    """Give each row's top class ``confidence`` (floored to keep it on top); see module doc."""
    n_samples, n_classes = proba.shape
    rows = np.arange(n_samples)
    top = np.argmax(proba, axis=1)
    others = proba.copy()
    others[rows, top] = 0.0
    rest = others.sum(axis=1)
    runner_up = others.max(axis=1)
    shared = rest > 0
    tie = np.full(n_samples, 1.0 / n_classes)
    tie[shared] = runner_up[shared] / (rest[shared] + runner_up[shared])
    calibrated = np.maximum(confidence, np.nextafter(tie, 2.0))
    # Each other class's share of the rest (at most 1, so a subnormal rest cannot overflow).
    shares = np.divide(others, rest[:, None], out=np.zeros_like(others), where=shared[:, None])
    shares[~shared] = 1.0 / (n_classes - 1)
    runner_share = shares.max(axis=1)
    while True:
        # Rounding can leave the runner-up level with the floor: raise it by one ulp.
        level = runner_share * (1.0 - calibrated) >= calibrated
        if not level.any():
            break
        calibrated[level] = np.nextafter(calibrated[level], 2.0)
    shares *= (1.0 - calibrated)[:, None]
    shares[rows, top] = calibrated
    return shares


class _BinMapCalibrator(BaseCalibrator):
    """Shared transform of the binning calibrators (probabilities -> bins -> values).

    Probabilities are binned in their own precision, as the metrics bin them: float32
    probabilities are compared with float32 edges (see :mod:`sklearn_calib.metrics._core._binning`).
    """

    _renamed_parameters: dict = {"mode": "multi_class"}

    def _fit_bins(self, proba, top_targets, class_targets, strategy, sample_weight):
        """Fit the bin map: ``top_targets`` per sample, ``class_targets`` per sample and class."""
        if parameter(self, "multi_class") == "top_label":
            edges, values, weights = _fit_bin_map(
                proba.max(axis=1), top_targets, self.n_bins, strategy, sample_weight
            )
        else:
            fitted = [
                _fit_bin_map(
                    np.ascontiguousarray(proba[:, k]),
                    np.ascontiguousarray(class_targets[:, k]),
                    self.n_bins,
                    strategy,
                    sample_weight,
                )
                for k in range(proba.shape[1])
            ]
            edges, values, weights = (np.stack(part) for part in zip(*fitted, strict=True))
        self.bin_edges_, self.bin_values_, self.bin_weights_ = edges, values, weights

    def _apply_bins(self, proba):
        if parameter(self, "multi_class") == "top_label":
            confidence = proba.max(axis=1)
            return _replace_top_label(
                proba.astype(np.float64),
                self.bin_values_[assign_bins(confidence, self.bin_edges_)],
            )
        calibrated = np.empty(proba.shape)
        for k in range(proba.shape[1]):
            index = assign_bins(np.ascontiguousarray(proba[:, k]), self.bin_edges_[k])
            calibrated[:, k] = self.bin_values_[k][index]
        return renormalize(calibrated)


class HistogramBinning(_BinMapCalibrator):
    """Histogram binning: each bin's value is the accuracy of the fit data in that bin.

    The post-hoc baseline of Wang et al. (Zadrozny and Elkan 2001; Guo et al. 2017) on the top-1
    confidence, or its classwise (one-vs-rest) form. See :mod:`~.binning` for how rows
    are completed, how the predicted class is kept and the empty-bin fallback.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are; logits are turned into ``softmax`` probabilities. See
        :mod:`sklearn_calib.calibrators` for 1-D binary scores.
    n_bins : int, default=15
        Number of bins.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins on [0, 1], or equal-mass bins whose edges are quantiles of the
        (weighted) fit data, as :func:`sklearn_calib.metrics._core._binning.quantile_bin_edges`.
    multi_class : {"top_label", "classwise"}, default="top_label"
        Bin the top-1 confidence (value: accuracy of the bin) or each class probability
        (value: frequency of the class in the bin).
    mode : {"top_label", "classwise"}
        Deprecated name of ``multi_class``.

        .. deprecated:: 0.2
           Renamed ``multi_class``; ``mode`` is removed in 0.3.

    Attributes
    ----------
    bin_edges_ : ndarray of shape (n_bins + 1,) or (n_classes, n_bins + 1)
        Bin edges; one row per class with ``multi_class="classwise"``.
    bin_values_ : ndarray of shape (n_bins,) or (n_classes, n_bins)
        Calibrated value of each bin (weighted accuracy or class frequency; bin centre for
        empty bins).
    bin_weights_ : ndarray of shape (n_bins,) or (n_classes, n_bins)
        Number (total weight) of fit samples in each bin.
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).

    References
    ----------
    B. Zadrozny and C. Elkan, "Obtaining calibrated probability estimates from decision
    trees and naive Bayesian classifiers", ICML 2001.

    D.-B. Wang, L. Feng and M.-L. Zhang, "Rethinking Calibration of Deep Neural
    Networks: Do Not Be Afraid of Overconfidence", NeurIPS 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import HistogramBinning
    >>> proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
    >>> hb = HistogramBinning(n_bins=2, input="probabilities").fit(proba, [0, 1, 1, 1])
    >>> hb.bin_values_  # bin (0, 0.5] is empty: its centre; (0.5, 1]: accuracy 3/4
    array([0.25, 0.75])
    """

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "n_bins": [Interval(numbers.Integral, 1, None, closed="left")],
        "strategy": [StrOptions({"uniform", "quantile"})],
        "multi_class": [StrOptions({"top_label", "classwise"})],
        "mode": [Hidden(StrOptions({DEPRECATED})), StrOptions({"top_label", "classwise"})],
    }

    @keyword_only("n_bins", "strategy", "mode", "input")
    def __init__(
        self,
        *,
        input="logits",
        n_bins=15,
        strategy="uniform",
        multi_class="top_label",
        mode=DEPRECATED,
    ):
        self.input = input
        self.n_bins = n_bins
        self.strategy = strategy
        self.multi_class = multi_class
        self.mode = mode

    def _native_probabilities(self, scores):
        """Return probabilities in the precision of the input (float64 for logits)."""
        return scores if self.input == "probabilities" else softmax(scores)

    def _fit(self, scores, y_index, sample_weight):
        proba = self._native_probabilities(scores)
        correct = (np.argmax(proba, axis=1) == y_index).astype(np.float64)
        one_hot = None
        if parameter(self, "multi_class") == "classwise":
            one_hot = np.zeros(proba.shape)
            one_hot[np.arange(len(y_index)), y_index] = 1.0
        self._fit_bins(proba, correct, one_hot, self.strategy, sample_weight)

    def _predict_proba(self, scores):
        return self._apply_bins(self._native_probabilities(scores))

    def _fit_dask(self, scores, y, sample_weight, classes):
        fit_histogram_binning(self, scores, y, sample_weight, classes)


class ScalingBinning(_BinMapCalibrator):
    """Scaling-binning (Kumar, Liang and Ma 2019): temperature scaling, then binning.

    The fit data are first scaled by the NLL-optimal temperature (as
    :class:`TemperatureScaling`); the scaled probabilities are then put into equal-mass
    bins (quantiles of the weighted scaled values), and each bin's value is the mean
    scaled probability of the fit data in it. The output takes finitely many values, so its
    calibration error can be estimated reliably: with ``multi_class="top_label"`` the top
    confidence is one of the ``n_bins`` bin values, except in rows where a bin value would
    not keep the predicted class and the floor described in :mod:`~.binning` applies; with
    ``"classwise"`` each row is a renormalised vector of bin values. Here all three steps
    use the whole fit data; Kumar et al. fit them on disjoint parts for their guarantee
    (split the data yourself to reproduce that). See :mod:`~.binning` for the two reductions.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are; probabilities become ``log(max(p, 1e-12))``.
    n_bins : int, default=15
        Number of equal-mass bins.
    multi_class : {"top_label", "classwise"}, default="top_label"
        Bin the top-1 scaled confidence, or each scaled class probability (Kumar et al.'s
        marginal calibration).
    mode : {"top_label", "classwise"}
        Deprecated name of ``multi_class``.

        .. deprecated:: 0.2
           Renamed ``multi_class``; ``mode`` is removed in 0.3.

    Attributes
    ----------
    temperature_ : float
        Temperature of the scaling step.
    bin_edges_ : ndarray of shape (n_bins + 1,) or (n_classes, n_bins + 1)
        Equal-mass bin edges of the scaled values.
    bin_values_ : ndarray of shape (n_bins,) or (n_classes, n_bins)
        Mean scaled value of each bin (bin centre for empty bins).
    bin_weights_ : ndarray of shape (n_bins,) or (n_classes, n_bins)
        Number (total weight) of fit samples in each bin.
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).

    References
    ----------
    A. Kumar, P. Liang and T. Ma, "Verified Uncertainty Calibration", NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import ScalingBinning
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(200, 3))
    >>> sb = ScalingBinning(n_bins=5).fit(logits, rng.integers(0, 3, 200))
    >>> sb.bin_values_.shape
    (5,)
    """

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "n_bins": [Interval(numbers.Integral, 1, None, closed="left")],
        "multi_class": [StrOptions({"top_label", "classwise"})],
        "mode": [Hidden(StrOptions({DEPRECATED})), StrOptions({"top_label", "classwise"})],
    }

    @keyword_only("input", "n_bins", "mode")
    def __init__(self, *, input="logits", n_bins=15, multi_class="top_label", mode=DEPRECATED):
        self.input = input
        self.n_bins = n_bins
        self.multi_class = multi_class
        self.mode = mode

    def _fit(self, scores, y_index, sample_weight):
        logits = self._logits(scores)
        beta, _ = fit_inverse_temperature(logits, y_index, sample_weight)
        self.temperature_ = 1.0 / beta
        proba = softmax(logits, 1.0 / self.temperature_)
        self._fit_bins(proba, proba.max(axis=1), proba, "quantile", sample_weight)

    def _predict_proba(self, scores):
        return self._apply_bins(softmax(self._logits(scores), 1.0 / self.temperature_))
