"""
Tuning a focal loss's γ by ECE with GridSearchCV
================================================

:class:`~sklearn_calib.estimators.NetClassifier` takes the loss by name, and the loss's
hyperparameters route as ``criterion__<name>``, so scikit-learn's grid search tunes them
like any other parameter. Scored by ``get_scorer("neg_ece")``, the search picks the focal
loss's γ whose held-out predictions are best calibrated. γ = 0 is cross-entropy.
"""

# %%
# Search
# ------
import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, train_test_split

from sklearn_calib import NetClassifier, expected_calibration_error, get_scorer

torch.set_num_threads(1)
X, y = load_digits(return_X_y=True)
X = (X / 16).astype(np.float32)
X_train, X_test, y_train, y_test = train_test_split(X, y, stratify=y, random_state=0)

net = NetClassifier("mlp", criterion="focal", max_epochs=15, lr=0.05, random_state=0)
gammas = [0.0, 1.0, 2.0, 3.0, 5.0]
search = GridSearchCV(
    net,
    {"criterion__gamma": gammas},
    scoring={"ece": get_scorer("neg_ece"), "nll": get_scorer("neg_nll")},
    refit="ece",
    cv=3,
).fit(X_train, y_train)
print("best:", search.best_params_)
print(
    f"test ECE of the refitted best model: "
    f"{expected_calibration_error(y_test, search.predict_proba(X_test)):.4f}"
)

# %%
# Cross-validated ECE and NLL against γ
# -------------------------------------
# The scorers return negated errors (greater is better), so the plot negates them back.
results = search.cv_results_
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
for ax, key, label in zip(axes, ["ece", "nll"], ["ECE", "NLL"], strict=True):
    ax.errorbar(
        gammas, -results[f"mean_test_{key}"], yerr=results[f"std_test_{key}"], marker="o", capsize=3
    )
    ax.set_xlabel("focal γ")
    ax.set_ylabel(f"cross-validated {label}")
fig.tight_layout()
plt.show()
