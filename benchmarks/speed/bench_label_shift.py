"""Label-shift adaptation: accuracy and time on Alexandari et al.'s demo, and EM at scale.

Two parts, both by default:

``demo``: the default ``LabelShiftAdapter`` (EM with bias-corrected temperature scaling,
200 bootstrap replicates) fitted on the 10,000 CIFAR-10 validation predictions of
Alexandari, Kundaje and Shrikumar's demo (kundajelab/labelshiftexperiments,
``notebooks/demo``) and adapted to its label-shifted test set (1,000 rows drawn with
Dirichlet(0.1) class priors). It prints the L1 error of the estimated priors against the
test set's class frequencies, the accuracy before and after adaptation, and the time of
``fit`` plus ``adapt`` (best of ``--repeat``), with the same without calibration and
with BBSE for comparison. Targets: L1 <= 0.005, accuracy >= 99 %, under 1 s. The data are
read from ``../shared/data/label_shift/`` (``--data``). The labels file has 1,000 labels
(its last line has no newline, so ``wc -l`` counts 999); all 1,000 rows are used.

``scale``: EM on ``--n`` x ``--k`` target scores (float32 logits, default 10^6 x 100) of
an adapter fitted on 20,000 source rows (BCTS, ``n_resamples=0``). It prints the time of
EM on the calibrated probabilities against one pass over them (a product with a vector,
which reads every probability once: the least any estimator of the priors costs), and the
time of the whole ``adapt`` (checking and calibrating the scores, EM, the test of no
shift) against one calibration pass (``calibrator_.predict_proba``). Target: EM <= 10
passes. Ratios are measured in the same run (best of ``--repeat``).

Run: ``OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/speed/bench_label_shift.py``;
a smoke check: ``... --n 100000 --k 20 --repeat 1``.
"""

import argparse
import gzip
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np

from sklearn_calib.label_shift import LabelShiftAdapter

DATA = Path("../shared/data/label_shift")


def best_time(function, repeat):
    """The best wall-clock time of ``repeat`` calls, and the last call's result."""
    best, result = np.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def quietly(adapt, scores):
    """``adapt(scores)`` without the warning of EM on uncalibrated probabilities (the
    probabilities given here are calibrated already, or meant to be uncalibrated)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="EM estimates", category=UserWarning)
        return adapt(scores)


def read(folder, name):
    with gzip.open(folder / name, "rt") as handle:
        return np.loadtxt(handle)


def demo(folder, repeat):
    valid = read(folder, "demo_valid_preds.txt.gz")
    valid_y = read(folder, "demo_valid_labels.txt.gz").astype(int)
    test = read(folder, "demo_shifted_test_preds.txt.gz")
    test_y = read(folder, "demo_shifted_test_labels.txt.gz").astype(int)
    if len(test_y) != len(test):
        raise ValueError(f"Expected one label per test row, got {len(test_y)} for {len(test)}.")
    truth = np.bincount(test_y, minlength=valid.shape[1]) / len(test_y)
    before = np.mean(test.argmax(axis=1) == test_y)
    print(f"Demo: {len(valid)} validation rows, {len(test)} shifted test rows")
    print(f"  accuracy before adaptation: {100 * before:.1f} %")
    for name, params in [
        ("default (EM + BCTS, 200 bootstrap replicates)", {}),
        ("EM without calibration", {"calibrator": "passthrough"}),
        ("BBSE (hard), BCTS", {"method": "bbse"}),
    ]:
        adapter = LabelShiftAdapter(input="probabilities", random_state=0, **params)

        def run(adapter=adapter):
            return quietly(adapter.fit(valid, valid_y).adapt, test)

        seconds, fitted = best_time(run, repeat)
        l1 = np.abs(fitted.target_prior_ - truth).sum()
        after = np.mean(fitted.predict(test) == test_y)
        print(
            f"  {name}: prior L1 error {l1:.4f}, accuracy after {100 * after:.1f} %, "
            f"fit + adapt {seconds:.3f} s"
        )


def scale(n, k, repeat):
    rng = np.random.default_rng(0)
    source_y = rng.integers(0, k, size=20000)
    source = (
        3.0 * (2.5 * np.eye(k, dtype=np.float32)[source_y] + rng.normal(size=(20000, k)))
    ).astype(np.float32)
    target_prior = rng.dirichlet(np.ones(k))
    target_y = rng.choice(k, size=n, p=target_prior)
    target = rng.standard_normal(size=(n, k), dtype=np.float32)
    target[np.arange(n), target_y] += 2.5
    target *= 3.0
    adapter = LabelShiftAdapter(n_resamples=0).fit(source, source_y)
    print(f"Scale: EM on {n} x {k} float32 target scores")
    calibrate_seconds, proba = best_time(lambda: adapter.calibrator_.predict_proba(target), repeat)
    vector = np.full(k, 1.0 / k)
    pass_seconds, _ = best_time(lambda: proba @ vector, repeat)
    em = LabelShiftAdapter(
        input="probabilities",
        calibrator="passthrough",
        source_prior=adapter.source_prior_,
        n_resamples=0,
    ).fit(adapter.calibrator_.predict_proba(source), source_y)
    em_seconds, fitted_em = best_time(lambda: quietly(em.adapt, proba), repeat)
    adapt_seconds, fitted = best_time(lambda: adapter.adapt(target), repeat)
    l1 = np.abs(fitted.target_prior_ - np.bincount(target_y, minlength=k) / n).sum()
    print(
        f"  one pass (probabilities @ vector): {pass_seconds:.3f} s; EM on the probabilities: "
        f"{em_seconds:.3f} s ({fitted_em.n_iter_} passes after the subsample start): "
        f"ratio {em_seconds / pass_seconds:.1f}"
    )
    print(
        f"  calibration pass (predict_proba): {calibrate_seconds:.3f} s; whole adapt: "
        f"{adapt_seconds:.3f} s: ratio {adapt_seconds / calibrate_seconds:.1f}; "
        f"prior L1 error {l1:.4f}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["demo", "scale", "both"], default="both")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    print(f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, OMP_NUM_THREADS={threads}")
    if args.part in ("demo", "both"):
        demo(args.data, args.repeat)
    if args.part in ("scale", "both"):
        scale(args.n, args.k, args.repeat)


if __name__ == "__main__":
    main()
