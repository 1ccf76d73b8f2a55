"""
I have logits and labels: measure, compare calibrators, pick one
================================================================

A network is trained; its logits on a held-out calibration set and on a test set are all
there is. This example measures how miscalibrated the logits are, and how sure that
measurement is (:func:`~sklearn_calib.metrics.calibration_report`); compares post-hoc
calibrators by cross-fitting on the calibration set and picks the best
(:class:`~sklearn_calib.calibrators.CalibratorSelector`); and checks the pick on the test
set. Every calibrator takes logits (``input="logits"``, the default) or probabilities
(``input="probabilities"``).

Here the logits are stand-ins for a network's outputs, drawn so that the answer is known:
10 classes, labels drawn from ``softmax(logits / 2)``, so the logits are twice too
confident and temperature scaling with T = 2 calibrates them exactly. Any
``(n_samples, n_classes)`` array of logits, such as ``net.decision_function(X)``, works
the same way.
"""

# %%
# Logits and labels
# -----------------
import matplotlib.pyplot as plt
import numpy as np
from scipy.special import softmax

from sklearn_calib import (
    ReliabilityDisplay,
    calibration_error_ci,
    calibration_report,
    expected_calibration_error,
)
from sklearn_calib.calibrators import (
    CalibratorSelector,
    EnsembleTemperatureScaling,
    HistogramBinning,
    IsotonicCalibration,
    StructuredMatrixScaling,
    StructuredVectorScaling,
    TemperatureScaling,
    VectorScaling,
)


def overconfident_logits(n_samples, rng):
    """Logits and labels drawn from the softmax of the logits divided by 2."""
    logits = rng.normal(size=(n_samples, 10)) * 3
    cumulative = softmax(logits / 2, axis=1).cumsum(axis=1)
    labels = (cumulative < rng.random((n_samples, 1))).sum(axis=1)
    return logits, labels


rng = np.random.default_rng(0)
logits_cal, y_cal = overconfident_logits(5000, rng)
logits_test, y_test = overconfident_logits(5000, rng)

# %%
# How miscalibrated are they, and how sure is that?
# -------------------------------------------------
# The report gives each error with a bootstrap interval, tests of calibration with
# p-values, and how much of the log loss post-hoc recalibration could remove.
proba_test = softmax(logits_test, axis=1)
print(calibration_report(y_test, proba_test, n_resamples=200, random_state=0))

# %%
# Compare calibrators by cross-fitting on the calibration set
# -----------------------------------------------------------
# Each candidate is fitted on four fifths of the calibration logits and scored on the
# rest, by the negated log loss (a proper score) unless ``scoring=`` says otherwise; the
# best is refitted on all of them.
candidates = [
    TemperatureScaling(),
    VectorScaling(),
    StructuredVectorScaling(),
    StructuredMatrixScaling(),
    EnsembleTemperatureScaling(),
    IsotonicCalibration(),
    HistogramBinning(n_bins=10),
]
selector = CalibratorSelector(candidates, cv=5).fit(logits_cal, y_cal)
for name, score, rank in zip(
    selector.cv_results_["calibrator"],
    selector.cv_results_["mean_test_score"],
    selector.cv_results_["rank_test_score"],
    strict=True,
):
    print(f"{rank}. {name:<45} held-out log loss {-score:.4f}")
print("picked:", selector.best_calibrator_)
if hasattr(selector.best_calibrator_, "temperature_"):
    print(f"fitted temperature {selector.best_calibrator_.temperature_:.3f} (the truth is 2)")

# %%
# Check the pick on the test set
# ------------------------------
calibrated_test = selector.predict_proba(logits_test)
for name, proba in [("uncalibrated", proba_test), ("calibrated", calibrated_test)]:
    ci = calibration_error_ci(
        expected_calibration_error, y_test, proba, n_resamples=200, random_state=0
    )
    print(f"{name:<13} test ECE {ci.estimate:.4f}, 95 % interval [{ci.low:.4f}, {ci.high:.4f}]")

fig, axes = plt.subplots(2, 2, figsize=(9, 6), height_ratios=[3, 1], sharex=True)
for column, (name, proba) in enumerate(
    [("uncalibrated", proba_test), ("calibrated", calibrated_test)]
):
    ReliabilityDisplay.from_predictions(
        y_test,
        proba,
        n_bins=10,
        name=name,
        confidence_level=0.95,
        ax=axes[0, column],
        hist_ax=axes[1, column],
    )
fig.tight_layout()
plt.show()
