"""Fit every calibrator on small fixed scores and save them for tests/test_persistence.py.

Run from the repository root with the version whose files should keep loading::

    PYTHONPATH=. python tests/data/make_calibrator_fixtures.py tests/data

It writes ``calibrators_0_1_0.pkl`` (a pickle of a dict name to fitted calibrator),
``calibrators_0_1_0.skops`` (the same dict in skops' format) and
``calibrators_0_1_0_proba.npz`` (each calibrator's probabilities on :func:`scores`).
"""

import pickle
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from sklearn_calib import calibrators
from sklearn_calib.persistence import dump

STEM = "calibrators_0_1_0"


def scores():
    """Overconfident logits of 3 classes, their labels, and features for a classifier."""
    rng = np.random.default_rng(0)
    true = rng.normal(size=(90, 3))
    y = np.argmax(true - np.log(-np.log(rng.uniform(size=true.shape))), axis=1)
    return 3.0 * true, y


def fitted_calibrators():
    """Name to fitted calibrator: every class of ``sklearn_calib.calibrators``."""
    logits, y = scores()
    fitted = {}
    for name in calibrators.__all__:
        cls = getattr(calibrators, name)
        if not isinstance(cls, type):
            continue
        if name == "CalibratedClassifier":
            model = cls(LogisticRegression(max_iter=1000), method="cv", cv=3)
        elif name in ("CalibratorSelector", "DirichletCalibration"):
            model = cls(cv=3)
        else:
            model = cls()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted[name] = model.fit(logits, y)
    return fitted


def main(out):
    logits, _ = scores()
    models = fitted_calibrators()
    (out / f"{STEM}.pkl").write_bytes(pickle.dumps(models))
    dump(models, out / f"{STEM}.skops")
    np.savez(out / f"{STEM}_proba.npz", **{n: m.predict_proba(logits) for n, m in models.items()})


if __name__ == "__main__":
    main(Path(sys.argv[1]))
