"""Post-hoc calibration and metrics of stored logits, with the library's metrics.

Temperature scaling as the papers do it picks ``T`` from a grid by the ECE of the
calibration data: the library's vectorised grid search, here run on the device where the
logits are (the sweeps make thousands of such fits).
"""

import numpy as np
from scipy.special import softmax

from sklearn_calib.calibrators import HistogramBinning, TemperatureScaling, grid_ece
from sklearn_calib.evaluation import calibrate_scores
from sklearn_calib.metrics import REPORT_METRICS, calibration_error_ci, metric_values

from ._uncertainty import ROW_SEED

#: The metrics of a run's CSV rows: the report's (:data:`sklearn_calib.metrics.REPORT_METRICS`,
#: 15 bins) but SECE, which the stored reports do not show.
METRICS = tuple(metric.name for metric in REPORT_METRICS if metric.name != "sece")
_BY_NAME = {metric.name: metric for metric in REPORT_METRICS}


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
    it (Wang et al. 2021; empty bins fall back as :class:`HistogramBinning` documents).
    """
    calibrator = HistogramBinning(n_bins=n_bins, strategy="uniform", multi_class="top_label")
    proba, _ = calibrate_scores(
        calibrator,
        np.asarray(val_logits, dtype=np.float64),
        val_y,
        np.asarray(test_logits, dtype=np.float64),
    )
    return proba


def evaluate(y, proba, metrics=METRICS):
    """Return ``{metric: value}`` for probabilities of the classes ``0..K-1``."""
    return metric_values(y, proba, labels=np.arange(proba.shape[1]), metrics=metrics)


def resampled_metric(metric, y, proba, n_bins, n_resamples):
    """A metric of :data:`METRICS` and its values on bootstrap resamples of the rows.

    The resamples come from :func:`sklearn_calib.metrics.calibration_error_ci` with
    ``random_state=ROW_SEED``: for a given number of rows (and metric and bins) they are
    the same rows whatever the probabilities, so the replicates of two runs scored on one
    test set are paired.

    Parameters
    ----------
    metric : str
    y : ndarray of shape (n_samples,)
        Class indices ``0..K-1``.
    proba : ndarray of shape (n_samples, K)
    n_bins : int
        Bins of a binned metric.
    n_resamples : int

    Returns
    -------
    value : float
    replicates : ndarray of shape (n_resamples,)
    """
    entry = _BY_NAME[metric]
    options = {"n_bins": n_bins} if entry.binned else {}
    result = calibration_error_ci(
        entry.function,
        y,
        proba,
        labels=np.arange(proba.shape[1]),
        n_resamples=n_resamples,
        random_state=ROW_SEED,
        **options,
    )
    return result.estimate, result.replicates


def learned_epochs(correct):
    """Epoch (1-based) since which each sample stays correctly classified (Wang et al. 2021).

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
