"""ECE in one pass: ``expected_calibration_error`` against one memory pass over the array.

On ``--rows`` x ``--classes`` float32 probabilities (default 10^7 x 10, 381 MiB), times
the best of ``--repeat`` rounds (the candidates take turns in each round) of:
``np.sum`` and ``torch.sum`` over the array (one memory pass, the limit),
``expected_calibration_error`` with numba (the check every metric makes, in one read of
the probabilities that also finds each row's maximum and whether its column is the true
class; then the bins and weighted sums of those maxima) and with numpy
(``SKLEARN_CALIB_NUMBA=0``), and prints each as a ratio of the ``np.sum`` pass, with the
two ECE values (equal bit for bit). Run from the repository root::

    PYTHONPATH=. python benchmarks/speed/bench_ece_pass.py [--rows 10000000] [--repeat 7]

numba uses ``NUMBA_NUM_THREADS`` threads (all cores by default), torch its own.
"""

import argparse
import os
import time

import numpy as np
import torch

from sklearn_calib.metrics import expected_calibration_error


def best_times(functions, repeat):
    """Each function's best time over ``repeat`` rounds, the functions taking turns in
    every round (so that other jobs on the machine slow them alike)."""
    best = dict.fromkeys(functions, np.inf)
    for _ in range(repeat):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def with_numba(enabled, function):
    def call():
        previous = os.environ.get("SKLEARN_CALIB_NUMBA")
        os.environ["SKLEARN_CALIB_NUMBA"] = "1" if enabled else "0"
        try:
            return function()
        finally:
            if previous is None:
                del os.environ["SKLEARN_CALIB_NUMBA"]
            else:
                os.environ["SKLEARN_CALIB_NUMBA"] = previous

    return call


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**7)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    proba = rng.random((args.rows, args.classes), dtype=np.float32) ** 4
    proba /= proba.sum(axis=1, keepdims=True)
    labels = rng.integers(0, args.classes, args.rows)
    tensor = torch.from_numpy(proba)

    def ece():
        return expected_calibration_error(labels, proba)

    fused = with_numba(True, ece)
    plain = with_numba(False, ece)
    values = {"numba": fused(), "numpy": plain()}  # also the warm-up (numba's cache)
    candidates = {
        "np.sum pass": proba.sum,
        "torch.sum pass": tensor.sum,
        "ECE, numba (one read)": fused,
        "ECE, numpy": plain,
    }
    times = best_times(candidates, args.repeat)
    size = proba.nbytes / 2**20
    print(
        f"{args.rows:,} x {args.classes} float32 ({size:.0f} MiB), best of {args.repeat}, "
        f"torch threads {torch.get_num_threads()}, NUMBA_NUM_THREADS "
        f"{os.environ.get('NUMBA_NUM_THREADS', 'all cores')}"
    )
    baseline = times["np.sum pass"]
    for name, seconds in times.items():
        print(f"  {name:26s} {seconds:.4f} s   {seconds / baseline:5.2f} x np.sum pass")
    same = values["numba"] == values["numpy"]
    print(f"  ECE numba {values['numba']!r}, numpy {values['numpy']!r}: identical {same}")


if __name__ == "__main__":
    main()
