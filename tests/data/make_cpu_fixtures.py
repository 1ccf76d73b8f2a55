"""Fit the models of ``make_gpu_fixtures.py`` on the CPU and save them for test_persistence.py.

Run from the repository root::

    OMP_NUM_THREADS=1 PYTHONPATH=. python tests/data/make_cpu_fixtures.py tests/data

It writes ``cpu_{net,meta}.pkl`` (pickle), ``cpu_{net,meta}.skops`` (skops) and
``cpu_{net,meta}_proba.npy`` (the probabilities predicted for digits 1500 onwards). The
committed files were written by an earlier version of the package: later versions must
load them and predict exactly these probabilities.
"""

import pickle
import sys
from pathlib import Path

import numpy as np
from make_gpu_fixtures import N_TRAIN, digits

from sklearn_calib import MetaNetClassifier, NetClassifier
from sklearn_calib.persistence import dump


def models():
    """The unfitted models, by file name: the GPU fixtures' models on the CPU."""
    return {
        "net": NetClassifier(module__hidden_units=(32,), max_epochs=5, device="cpu"),
        "meta": MetaNetClassifier(module__hidden_units=(32,), max_epochs=3, device="cpu"),
    }


def main(out):
    X, y = digits()
    for name, model in models().items():
        model.set_params(random_state=0).fit(X[:N_TRAIN], y[:N_TRAIN])
        (out / f"cpu_{name}.pkl").write_bytes(pickle.dumps(model))
        dump(model, out / f"cpu_{name}.skops")
        np.save(out / f"cpu_{name}_proba.npy", model.predict_proba(X[N_TRAIN:]))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
