"""
A network on Fashion-MNIST, calibrated end to end
=================================================

Trains a multilayer perceptron on part of Fashion-MNIST with
:class:`~sklearn_calib.estimators.NetClassifier`, calibrates it post hoc with temperature
scaling on a held-out split (:class:`~sklearn_calib.calibrators.CalibratedClassifier`),
and compares the two on the official test set.

The data set is read from its IDX files (``apt-get install dataset-fashion-mnist``
installs them in ``/usr/share/datasets/fashion-mnist``; ``load_fashion_mnist(data_home=...)``
reads another folder). Without them this example stops with the loader's message saying
how to get them.
"""

# %%
# Load the data
# -------------
import matplotlib.pyplot as plt
import numpy as np
import torch

from sklearn_calib import (
    CalibratedClassifier,
    NetClassifier,
    ReliabilityDisplay,
    TemperatureScaling,
    expected_calibration_error,
    negative_log_likelihood,
    top_label_accuracy,
)
from sklearn_calib.datasets import load_fashion_mnist

torch.set_num_threads(1)
data = load_fashion_mnist(as_image=False)  # FileNotFoundError, saying how to install it, if missing
rng = np.random.default_rng(0)
subset = rng.choice(len(data.X_train), size=6000, replace=False)
X_train, y_train = data.X_train[subset], data.y_train[subset]
X_test, y_test = data.X_test[:5000], data.y_test[:5000]
print(len(X_train), "training images,", len(X_test), "test images, 784 pixels each")

# %%
# Train and calibrate
# -------------------
# ``CalibratedClassifier`` trains the network on 85 % of the training images and fits the
# temperature on the other 15 %. A fitted temperature above 1 means the network was
# overconfident: dividing its logits by T softens its probabilities.
net = NetClassifier("mlp", max_epochs=30, random_state=0)
calibrated = CalibratedClassifier(
    net, calibrator=TemperatureScaling(), cv=0.15, random_state=0
).fit(X_train, y_train)
network = calibrated.estimators_[0]
print(f"fitted temperature: {calibrated.calibrators_[0].temperature_:.3f}")

# %%
# Compare on the test set
# -----------------------
# Temperature scaling divides the logits by one number, so it leaves the predicted class,
# and the accuracy, unchanged.
predictions = {
    "network": network.predict_proba(X_test),
    "network + temperature scaling": calibrated.predict_proba(X_test),
}
for name, proba in predictions.items():
    print(
        f"{name:<32} accuracy {top_label_accuracy(y_test, proba):.4f}  "
        f"ECE {expected_calibration_error(y_test, proba):.4f}  "
        f"NLL {negative_log_likelihood(y_test, proba):.4f}"
    )

fig, axes = plt.subplots(2, 2, figsize=(9, 6), height_ratios=[3, 1], sharex=True)
for column, (name, proba) in enumerate(predictions.items()):
    ReliabilityDisplay.from_predictions(
        y_test, proba, name=name, ax=axes[0, column], hist_ax=axes[1, column]
    )
fig.tight_layout()
plt.show()
