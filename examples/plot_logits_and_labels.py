"""
I have logits and labels: measure, compare calibrators, pick one
================================================================

A network is trained; its logits on a held-out calibration set and on a test set are all
there is. This example measures how miscalibrated the logits are, compares post-hoc
calibrators by cross-validation on the calibration set, picks the best, and checks it on
the test set. Every calibrator takes logits (``input="logits"``, the default) or
probabilities (``input="probabilities"``).

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
from sklearn.model_selection import StratifiedKFold, cross_validate

from sklearn_calib import (
    EnsembleTemperatureScaling,
    HistogramBinning,
    IsotonicCalibration,
    MatrixScaling,
    PlattScaling,
    ReliabilityDisplay,
    TemperatureScaling,
    VectorScaling,
    expected_calibration_error,
    get_scorer,
    negative_log_likelihood,
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
# How miscalibrated are they?
# ---------------------------
proba_test = softmax(logits_test, axis=1)
print(f"test ECE {expected_calibration_error(y_test, proba_test):.4f}, "
      f"NLL {negative_log_likelihood(y_test, proba_test):.4f}")

# %%
# Compare calibrators by cross-validation on the calibration set
# --------------------------------------------------------------
# A calibrator is a scikit-learn estimator whose ``X`` is the logits, so
# :func:`~sklearn.model_selection.cross_validate` compares them on held-out folds. The
# negative log-likelihood is the criterion here (a proper score); the ECE is shown too.
candidates = {
    "temperature": TemperatureScaling(),
    "vector": VectorScaling(),
    "matrix": MatrixScaling(),
    "ensemble temperature": EnsembleTemperatureScaling(),
    "Platt (one-vs-rest)": PlattScaling(),
    "isotonic": IsotonicCalibration(),
    "histogram binning": HistogramBinning(n_bins=10),
}
folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
scoring = {"nll": get_scorer("neg_nll"), "ece": get_scorer("neg_ece")}
scores = {}
for name, calibrator in candidates.items():
    cv = cross_validate(calibrator, logits_cal, y_cal, cv=folds, scoring=scoring)
    scores[name] = (-cv["test_nll"].mean(), -cv["test_ece"].mean())
    print(f"{name:<22} held-out NLL {scores[name][0]:.4f}  ECE {scores[name][1]:.4f}")
best = min(scores, key=lambda name: scores[name][0])
print("picked:", best)

# %%
# Fit the pick on the whole calibration set and check it on the test set
# -----------------------------------------------------------------------
calibrator = candidates[best].fit(logits_cal, y_cal)
if hasattr(calibrator, "temperature_"):
    print(f"fitted temperature {calibrator.temperature_:.3f} (the truth is 2)")
calibrated_test = calibrator.predict_proba(logits_test)
print(f"test ECE {expected_calibration_error(y_test, calibrated_test):.4f}, "
      f"NLL {negative_log_likelihood(y_test, calibrated_test):.4f}")

fig, axes = plt.subplots(2, 2, figsize=(9, 6), height_ratios=[3, 1], sharex=True)
for column, (name, proba) in enumerate([("uncalibrated", proba_test),
                                        (best, calibrated_test)]):
    ReliabilityDisplay.from_predictions(y_test, proba, n_bins=10, name=name,
                                        ax=axes[0, column], hist_ax=axes[1, column])
fig.tight_layout()
plt.show()
