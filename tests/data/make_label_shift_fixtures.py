"""Run Alexandari et al.'s ``abstention`` package on small synthetic scores, for
tests/test_label_shift.py.

``abstention`` (kundajelab/abstention, the code of Alexandari, Kundaje and Shrikumar,
ICML 2020) is not a dependency of sklearn_calib: run this script in an environment that
has it (``pip install abstention cvxpy``; it needs neither torch nor sklearn_calib)::

    python tests/data/make_label_shift_fixtures.py tests/data

It writes ``label_shift_abstention.npz``: the synthetic source and target probabilities
and source labels of :func:`scores`, and abstention's results on them: its bias-corrected
temperature scaling (``TempScaling(bias_positions="all")``) of the target probabilities,
and the class weights (``multipliers``) of EM without and with that calibration and of
BBSE and RLLS with hard and soft confusion matrices (no calibration). EM runs to a
tolerance of 1e-14 (abstention's default, 1e-6 in 100 iterations, stops short of the
maximum). EM with calibration is given the calibrated probabilities, as Alexandari et
al.'s experiments (kundajelab/labelshiftexperiments) give them: abstention 0.1.3.1's
``EMImbalanceAdapter(calibrator_factory=...)`` calibrates the source probabilities but
runs EM on the uncalibrated target ones.
"""

import sys
from pathlib import Path

import numpy as np
from abstention.calibration import TempScaling
from abstention.label_shift import (
    BBSEImbalanceAdapter,
    EMImbalanceAdapter,
    RLLSImbalanceAdapter,
)

N_CLASSES = 4
TARGET_PRIOR = np.array([0.55, 0.25, 0.15, 0.05])


def scores():
    """Overconfident, biased probabilities of a balanced source and a shifted target."""
    rng = np.random.default_rng(0)

    def draw(prior, n):
        y = rng.choice(N_CLASSES, size=n, p=prior)
        logits = 2.0 * (1.5 * np.eye(N_CLASSES)[y] + rng.normal(size=(n, N_CLASSES)))
        logits[:, 0] += 0.7
        proba = np.exp(logits - logits.max(axis=1, keepdims=True))
        return proba / proba.sum(axis=1, keepdims=True), y

    source_proba, source_y = draw(np.full(N_CLASSES, 1.0 / N_CLASSES), 800)
    target_proba, _ = draw(TARGET_PRIOR, 500)
    return source_proba, source_y, target_proba


def main(folder):
    source_proba, source_y, target_proba = scores()
    onehot = np.eye(N_CLASSES)[source_y]
    bcts = TempScaling(bias_positions="all")(source_proba, onehot, posterior_supplied=True)
    results = {
        "source_proba": source_proba,
        "source_y": source_y,
        "target_proba": target_proba,
        "bcts_target_proba": bcts(target_proba),
    }
    em = EMImbalanceAdapter(tolerance=1e-14, max_iterations=100000)
    for name, adapter, calibrate in [
        ("em", em, None),
        ("em_bcts", em, bcts),
        ("bbse_hard", BBSEImbalanceAdapter(soft=False), None),
        ("bbse_soft", BBSEImbalanceAdapter(soft=True), None),
        ("rlls_hard", RLLSImbalanceAdapter(soft=False), None),
        ("rlls_soft", RLLSImbalanceAdapter(soft=True), None),
    ]:
        calibrate = calibrate or (lambda proba: proba)
        func = adapter(
            valid_labels=onehot,
            tofit_initial_posterior_probs=calibrate(target_proba),
            valid_posterior_probs=calibrate(source_proba),
        )
        results[f"{name}_multipliers"] = np.asarray(func.multipliers, dtype=np.float64)
    np.savez_compressed(Path(folder) / "label_shift_abstention.npz", **results)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
