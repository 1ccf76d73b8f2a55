"""Post-hoc calibration and metrics of stored logits, with the library's metrics.

Temperature scaling as the seeds do it picks ``T`` from a grid by the ECE of the
calibration data. :func:`grid_ece` computes the ECE of every temperature of a grid in one
vectorised pass (on the device when there is one): dividing logits by ``T > 0`` keeps the
predicted class, so only the confidence ``1 / sum_k exp((z_k - z_max) / T)`` depends on
``T``; bins follow the library's rule ((lower, upper] on ``linspace(0, 1, M + 1)``, 0 in
the first bin) and sums are float64. It selects the same temperature as
``TemperatureScaling(objective="ece", grid=...)`` (tested), hundreds of times faster,
which the sweeps need (thousands of fits).
"""

import numpy as np
import torch
from scipy.special import softmax

from sklearn_calib._binning import uniform_bin_edges
from sklearn_calib.calibrators import HistogramBinning, TemperatureScaling
from sklearn_calib.scoring import (
    adaptive_calibration_error,
    brier_score,
    classwise_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    top_label_accuracy,
)

#: Elements of one (temperatures x samples x classes) block of :func:`grid_ece`.
_BLOCK = 1 << 24


def grid_ece(logits, y, temperatures, *, n_bins=15, device=None):
    """ECE of ``softmax(logits / T)`` for every ``T`` of a grid.

    Parameters
    ----------
    logits : ndarray or torch.Tensor of shape (n_samples, n_classes)
    y : ndarray or torch.Tensor of shape (n_samples,)
        Class indices.
    temperatures : array-like of shape (n_temperatures,)
        Positive temperatures.
    n_bins : int, default=15
    device : str, torch.device or None, default=None
        Where to compute; None: where ``logits`` is (the CPU for numpy input).

    Returns
    -------
    ece : ndarray of shape (n_temperatures,), float64
    """
    z = torch.as_tensor(logits, device=device).to(torch.float64)
    device = z.device
    y = torch.as_tensor(y, device=device).long()
    temps = torch.as_tensor(np.asarray(temperatures, dtype=np.float64), device=device)
    if temps.ndim != 1 or not bool((temps > 0).all()):
        raise ValueError("Expected a 1-D grid of positive temperatures.")
    n, k = z.shape
    offsets = z - z.max(dim=1, keepdim=True).values
    correct = (z.argmax(dim=1) == y).to(torch.float64)
    edges = torch.as_tensor(uniform_bin_edges(n_bins), device=device)
    step = max(1, _BLOCK // max(n * k, 1))
    result = []
    for start in range(0, len(temps), step):
        block = temps[start : start + step]
        confidence = 1.0 / torch.exp(offsets[None] / block[:, None, None]).sum(dim=2)
        bins = (torch.searchsorted(edges, confidence, right=False) - 1).clamp_(0, n_bins - 1)
        bins += n_bins * torch.arange(len(block), device=device)[:, None]
        gaps = torch.zeros(len(block) * n_bins, dtype=torch.float64, device=device)
        gaps.index_add_(0, bins.reshape(-1), (correct[None] - confidence).reshape(-1))
        result.append(gaps.view(len(block), n_bins).abs().sum(dim=1) / n)
    return torch.cat(result).cpu().numpy()


def ece_temperature(logits, y, temperatures, *, n_bins=15, device=None):
    """The grid temperature with the lowest ECE on ``(logits, y)`` (the first on ties)."""
    errors = grid_ece(logits, y, temperatures, n_bins=n_bins, device=device)
    return float(np.asarray(temperatures, dtype=np.float64)[int(np.argmin(errors))])


def nll_temperature(logits, y):
    """The NLL-optimal temperature (exact, :class:`TemperatureScaling`)."""
    return float(TemperatureScaling().fit(logits, y).temperature_)


def scaled_probabilities(logits, temperature=1.0):
    """``softmax(logits / T)`` in float64."""
    return softmax(np.asarray(logits, dtype=np.float64) / temperature, axis=1)


def histogram_binning(val_logits, val_y, test_logits, n_bins=15):
    """Probabilities of ``test_logits`` after top-label histogram binning fitted on validation.

    Equal-size bins on the top-1 confidence, each bin's value the validation accuracy in
    it (seed 001; empty bins fall back as :class:`HistogramBinning` documents).
    """
    calibrator = HistogramBinning(n_bins=n_bins, strategy="uniform", mode="top_label")
    calibrator.fit(np.asarray(val_logits, dtype=np.float64), val_y)
    return calibrator.predict_proba(np.asarray(test_logits, dtype=np.float64))


#: Metric name -> function(y, proba, labels) (all from sklearn_calib.scoring, M = 15).
METRICS = {
    "accuracy": lambda y, p, labels: top_label_accuracy(y, p, labels=labels),
    "nll": lambda y, p, labels: negative_log_likelihood(y, p, labels=labels),
    "brier": lambda y, p, labels: brier_score(y, p, labels=labels),
    "ece": lambda y, p, labels: expected_calibration_error(y, p, labels=labels),
    "mce": lambda y, p, labels: maximum_calibration_error(y, p, labels=labels),
    "ada_ece": lambda y, p, labels: adaptive_calibration_error(y, p, labels=labels),
    "cw_ece": lambda y, p, labels: classwise_calibration_error(y, p, labels=labels),
}


def evaluate(y, proba, metrics=tuple(METRICS)):
    """Return ``{metric: value}`` for probabilities of the classes ``0..K-1``."""
    labels = np.arange(proba.shape[1])
    return {name: float(METRICS[name](y, proba, labels)) for name in metrics}


def learned_epochs(correct):
    """Epoch (1-based) since which each sample stays correctly classified (seed 001).

    Parameters
    ----------
    correct : ndarray of shape (n_epochs, n_samples), bool

    Returns
    -------
    learned : ndarray of shape (n_samples,), int
        The first epoch ``e`` with the sample correct at every epoch from ``e`` to the
        last; ``n_epochs + 1`` for samples wrong at the last epoch.
    """
    correct = np.asarray(correct, dtype=bool)
    n_epochs = correct.shape[0]
    wrong_from = np.flip(np.cumsum(np.flip(~correct, axis=0), axis=0), axis=0)
    return n_epochs + 1 - (wrong_from == 0).sum(axis=0)
