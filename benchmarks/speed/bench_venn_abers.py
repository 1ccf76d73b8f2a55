"""Venn-Abers fit + predict times against the `venn-abers` package, in one run.

- Multiclass: ``--k`` classes (default 100), ``--n-cal`` calibration rows (5,000) and
  ``--n-test`` test rows (10,000) of probabilities (softmax of Gaussian logits, labels drawn
  from them): ours, ``VennAbersCalibrator(input="probabilities", multi_class=...)`` fitted
  and predicting, against the package's ``predict_proba_prefitted_va(p_cal, y_cal, p_test,
  va_tpe=...)`` on the same input, one-vs-one (pairwise coupling) and one-vs-rest; the
  largest difference of the probabilities is printed beside each ratio (the two compute
  the same predictor). Target: ours at least 10 times as fast.
- Binary: ``--n-binary`` rows (10^6): ``VennAbersCalibrator(input="probabilities")``
  fitted on them and predicting them; target at most 2 s. The package's construction is
  quadratic in the worst case, so it is not run on these.

Ours is timed ``--repeat`` times (best of) after a warm-up fit large enough to load the
compiled pass (numba, when installed); the package runs once. A smoke check:
``PYTHONPATH=. python benchmarks/speed/bench_venn_abers.py --k 10 --n-binary 100000``.
"""

import argparse
import importlib.util
import os
import platform
import time

import numpy as np
from threadpoolctl import threadpool_limits

from sklearn_calib.calibrators import VennAbersCalibrator

#: The package's name for each of our reductions.
SCHEMES = {"one_vs_one": "one_vs_one", "one_vs_rest": "one_vs_all"}


def _package():
    """The `venn-abers` package's module, with numpy's error state kept (its import sets
    ``np.seterr(divide="ignore", invalid="ignore")`` for the whole process)."""
    state = np.geterr()
    try:
        from venn_abers import venn_abers
    finally:
        np.seterr(**state)
    return venn_abers


def _multiclass_data(k, n_cal, n_test, seed):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n_cal + n_test, k)) * 2.0
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    y = (proba.cumsum(axis=1) < rng.random((n_cal + n_test, 1))).sum(axis=1)
    y = np.minimum(y, k - 1)
    return proba[:n_cal], y[:n_cal], proba[n_cal:]


def _best_time(function, repeat):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def _ours(multi_class, p_cal, y_cal, p_test):
    calibrator = VennAbersCalibrator(input="probabilities", multi_class=multi_class)
    return calibrator.fit(p_cal, y_cal).predict_proba(p_test)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--n-cal", type=int, default=5000)
    parser.add_argument("--n-test", type=int, default=10000)
    parser.add_argument("--n-binary", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    package = _package()
    numba = importlib.util.find_spec("numba") is not None
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, threads {args.threads}; "
        f"numba {'installed' if numba else 'missing'} "
        f"(SKLEARN_CALIB_NUMBA={os.environ.get('SKLEARN_CALIB_NUMBA', 'auto')})"
    )
    with threadpool_limits(args.threads):
        rng = np.random.default_rng(args.seed)
        warm = rng.random(300_000)
        VennAbersCalibrator(input="probabilities").fit(warm, rng.random(300_000) < warm)

        p_cal, y_cal, p_test = _multiclass_data(args.k, args.n_cal, args.n_test, args.seed)
        print(
            f"\nmulticlass: k = {args.k}, {args.n_cal} calibration and {args.n_test} test "
            "rows, fit + predict"
        )
        print(f"{'scheme':<12} {'ours (s)':>9} {'package (s)':>12} {'ratio':>7} {'max |diff|':>11}")
        for multi_class, scheme in SCHEMES.items():
            ours, proba = _best_time(
                lambda m=multi_class: _ours(m, p_cal, y_cal, p_test), args.repeat
            )
            start = time.perf_counter()
            with np.errstate(divide="ignore", invalid="ignore"):
                reference, _ = package.predict_proba_prefitted_va(
                    p_cal, y_cal, p_test, va_tpe=scheme
                )
            theirs = time.perf_counter() - start
            difference = np.abs(proba - reference).max()
            print(
                f"{multi_class:<12} {ours:>9.3f} {theirs:>12.2f} {theirs / ours:>6.1f}x "
                f"{difference:>11.2e}"
            )

        p = rng.random(args.n_binary)
        y = rng.random(args.n_binary) < p
        binary, _ = _best_time(
            lambda: VennAbersCalibrator(input="probabilities").fit(p, y).predict_proba(p),
            args.repeat,
        )
        print(f"\nbinary: {args.n_binary} rows, fit + predict: {binary:.3f} s (target <= 2 s)")


if __name__ == "__main__":
    main()
