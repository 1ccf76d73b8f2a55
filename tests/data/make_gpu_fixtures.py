"""Fit small models on a CUDA GPU and save them for tests/test_persistence.py.

Run on a machine with CUDA, from the repository root::

    PYTHONPATH=. python tests/data/make_gpu_fixtures.py tests/data

It writes ``gpu_{net,meta}.pkl`` (pickle), ``gpu_{net,meta}.skops`` (skops) and
``gpu_{net,meta}_proba.npy`` (the probabilities the GPU predicted for digits 1500 onwards).
"""

import pickle
import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

from sklearn_calib import MetaNetClassifier, NetClassifier
from sklearn_calib.persistence import dump

NAMES = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])
N_TRAIN = 1500


def digits():
    """Digits scaled to [0, 1] as float32, with string labels."""
    X, y = load_digits(return_X_y=True)
    return (X / 16).astype(np.float32), NAMES[y]


def main(out):
    X, y = digits()
    models = {
        "net": NetClassifier(module__hidden_units=(32,), max_epochs=5, device="cuda"),
        "meta": MetaNetClassifier(module__hidden_units=(32,), max_epochs=3, device="cuda"),
    }
    for name, model in models.items():
        model.set_params(random_state=0).fit(X[:N_TRAIN], y[:N_TRAIN])
        print(name, model.device_, "CUDA graph per epoch:", model.history[:, "cuda_graph"])
        (out / f"gpu_{name}.pkl").write_bytes(pickle.dumps(model))
        dump(model, out / f"gpu_{name}.skops")
        np.save(out / f"gpu_{name}_proba.npy", model.predict_proba(X[N_TRAIN:]))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
