"""
Measuring any scikit-learn classifier
=====================================

The metrics take labels and predicted probabilities, so they measure any classifier that
has ``predict_proba``. Here three scikit-learn classifiers are fitted on the digits and
measured on held-out data: logistic regression, Gaussian naive Bayes (known to be
overconfident) and a random forest (known to be underconfident).
"""

# %%
# Fit three classifiers
# ---------------------
import matplotlib.pyplot as plt
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_calib import (
    ReliabilityDisplay,
    adaptive_calibration_error,
    brier_score,
    classwise_calibration_error,
    expected_calibration_error,
    negative_log_likelihood,
    top_label_accuracy,
)

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, stratify=y, random_state=0)
models = {
    "LogisticRegression": make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
    "GaussianNB": GaussianNB(),
    "RandomForest": RandomForestClassifier(n_estimators=100, random_state=0),
}
for model in models.values():
    model.fit(X_train, y_train)

# %%
# Measure them
# ------------
# The ECE bins the top-label confidence into 15 equal-width bins ``(lower, upper]`` and
# averages the gap between accuracy and confidence, weighted by the bins' sizes; the
# adaptive ECE uses equal-mass bins, the classwise ECE bins every class's probability.
# The negative log-likelihood and the Brier score are proper scores: they reward
# calibration and accuracy together.
metrics = {
    "accuracy": top_label_accuracy,
    "ECE": expected_calibration_error,
    "adaptive ECE": adaptive_calibration_error,
    "classwise ECE": classwise_calibration_error,
    "NLL": negative_log_likelihood,
    "Brier": brier_score,
}
print(f"{'model':<19}" + "".join(f"{name:>14}" for name in metrics))
for name, model in models.items():
    proba = model.predict_proba(X_test)
    values = [metric(y_test, proba) for metric in metrics.values()]
    print(f"{name:<19}" + "".join(f"{value:>14.4f}" for value in values))

# %%
# Reliability diagrams
# --------------------
# Bars below the diagonal are overconfident bins (accuracy lower than confidence), bars
# above it underconfident ones; the lower panels show how many predictions fall in each
# bin.
fig, axes = plt.subplots(2, 3, figsize=(12, 6), height_ratios=[3, 1], sharex=True)
for column, (name, model) in enumerate(models.items()):
    ReliabilityDisplay.from_estimator(
        model, X_test, y_test, name=name, ax=axes[0, column], hist_ax=axes[1, column]
    )
fig.tight_layout()
plt.show()
