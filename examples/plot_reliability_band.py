"""
Pointwise intervals and a simultaneous band
===========================================

A reliability diagram with a Clopper-Pearson interval per bin invites reading the
intervals as a band around the whole curve: "the curve lies within the bars". Each
interval covers its own bin's accuracy with 95 % probability, but all fifteen together
cover far less often. The band of Dimitriadis et al. (2023)
(:func:`~sklearn_calib.metrics.reliability_band`) covers the whole reliability curve with
95 % probability, and it turns into a test that can certify a model calibrated within a
tolerance (:func:`~sklearn_calib.metrics.calibration_equivalence_test`).
"""

# %%
# A calibrated model
# ------------------
# Scores uniform on [0, 1] and outcomes drawn with exactly those probabilities: the true
# reliability curve is the diagonal.
import matplotlib.pyplot as plt
import numpy as np

from sklearn_calib import ReliabilityDisplay
from sklearn_calib.metrics import (
    calibration_equivalence_test,
    reliability_band,
    reliability_diagram,
)

rng = np.random.default_rng(0)
p = rng.random(2000)
y = rng.random(2000) < p

display = ReliabilityDisplay.from_predictions(
    y, p, pos_label=True, confidence_level=0.95, band=True, name="calibrated scores"
)
plt.show()

# %%
# How often do they cover?
# ------------------------
# Over 200 draws of the same calibrated model, count how often all fifteen per-bin
# intervals cover their bins' true accuracy (the mean score of the bin, since the model is
# calibrated) and how often the band covers the diagonal everywhere.
pointwise, simultaneous = [], []
for _ in range(200):
    p = rng.random(2000)
    y = rng.random(2000) < p
    diagram = reliability_diagram(
        y, p, convention="positive_class", confidence_level=0.95, labels=[False, True]
    )
    truth = diagram.mean_confidence
    pointwise.append(np.all((diagram.accuracy_low <= truth) & (truth <= diagram.accuracy_high)))
    band = reliability_band(y, p, pos_label=True)
    simultaneous.append(np.all((band.lower <= band.scores) & (band.scores <= band.upper)))
print(f"all 15 pointwise intervals cover: {np.mean(pointwise):.2f}")
print(f"the simultaneous band covers:     {np.mean(simultaneous):.2f}")

# %%
# Certifying calibration
# ----------------------
# A test of perfect calibration that does not reject says only that the data cannot tell.
# The band says more: every curve inside it is within ``deviation`` of the diagonal, so
# the model is certified calibrated within any tolerance above it. A miscalibrated model
# (its curve strays 0.15 from the diagonal at the ends) is not.
p = rng.random(20000)
calibrated = rng.random(20000) < p
overconfident = rng.random(20000) < 0.5 + 0.7 * (p - 0.5)
for name, outcome in (("calibrated", calibrated), ("overconfident", overconfident)):
    result = calibration_equivalence_test(outcome, p, pos_label=True, tolerance=0.15)
    print(f"{name}: certified within 0.15: {result.certified} (deviation {result.deviation:.3f})")
