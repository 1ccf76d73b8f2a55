"""Time our ECE against a single max pass, torchmetrics and netcal on the same input.

    PYTHONPATH=. python benchmarks/speed/bench_metrics.py [--n 10000000] [--k 10] [--repeat 3]

Every timing is the best of ``--repeat`` runs (netcal: ``--netcal-repeat``) on one float32
array of softmax probabilities; ratios are against the ``np.max(P, axis=1)`` pass measured
in the same run. The peak extra memory of our ECE is measured as the rise of the process's
peak resident set size (Linux ``VmHWM``, reset through ``/proc/self/clear_refs``) over the
resident size before the call: it counts numpy and torch allocations alike.
"""

import argparse
import os
import platform
import re
import time
from pathlib import Path

import numpy as np
import torch

from sklearn_calib.scoring import expected_calibration_error


def make_probabilities(n, k, seed):
    """Softmax of Gaussian logits (scale 3), float32, built in blocks to spare memory."""
    rng = np.random.default_rng(seed)
    proba = np.empty((n, k), dtype=np.float32)
    for start in range(0, n, 1 << 20):
        logits = rng.standard_normal((min(1 << 20, n - start), k), dtype=np.float32) * 3
        logits -= logits.max(axis=1, keepdims=True)
        np.exp(logits, out=logits)
        logits /= logits.sum(axis=1, keepdims=True)
        proba[start : start + len(logits)] = logits
    # labels drawn from the predicted distribution: a calibrated model, ECE near 0
    u = rng.random(n, dtype=np.float32)[:, None]
    cumulative = np.cumsum(proba, axis=1)
    labels = np.minimum((cumulative < u).sum(axis=1), k - 1)
    del cumulative
    return proba, labels


def best_time(function, repeat):
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - start)
    return best, value


def _status_kib(field):
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"{field}:\s+(\d+)", text).group(1))


def peak_extra_memory(function):
    """Rise of the peak resident set size during ``function()``, in bytes (Linux only)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    before = _status_kib("VmRSS")
    function()
    return (_status_kib("VmHWM") - before) * 1024


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--n-bins", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--netcal-repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from netcal.metrics import ECE
    from torchmetrics.functional.classification import multiclass_calibration_error

    proba, labels = make_probabilities(args.n, args.k, args.seed)
    proba_t, labels_t = torch.from_numpy(proba), torch.from_numpy(labels)
    n_bins = args.n_bins
    print(
        f"P: {args.n} x {args.k} float32 ({proba.nbytes / 2**20:.0f} MiB), {n_bins} bins; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), numpy {np.__version__}"
    )

    def ours():
        return expected_calibration_error(labels, proba, n_bins=n_bins)

    def torchmetrics_ece():
        return multiclass_calibration_error(
            proba_t, labels_t, num_classes=args.k, n_bins=n_bins
        ).item()

    def netcal_ece():
        return float(ECE(bins=n_bins).measure(proba, labels))

    rows = [
        ("np.max(P, axis=1)", best_time(lambda: np.max(proba, axis=1), args.repeat)[0], None),
        ("sklearn_calib ECE", *best_time(ours, args.repeat)),
        ("torchmetrics ECE (CPU)", *best_time(torchmetrics_ece, args.repeat)),
        ("netcal ECE", *best_time(netcal_ece, args.netcal_repeat)),
    ]
    baseline, ours_time = rows[0][1], rows[1][1]
    print(f"\n{'':24s} {'time (s)':>9s} {'/ max pass':>11s} {'/ ours':>8s}  ECE")
    for name, seconds, value in rows:
        shown = "" if value is None else f"{value:.8f}"
        print(
            f"{name:24s} {seconds:9.3f} {seconds / baseline:11.2f} "
            f"{seconds / ours_time:8.2f}  {shown}"
        )

    extra = peak_extra_memory(ours)
    if extra is None:
        print("peak extra memory: not measurable here (needs Linux /proc/self/clear_refs)")
    else:
        print(
            f"peak extra memory of our ECE: {extra / 2**20:.0f} MiB "
            f"({extra / proba.nbytes:.2f} x the input; measured as the VmHWM rise)"
        )
    print(
        f"\ntargets: <= 3x the max pass: {ours_time / baseline:.2f}x; faster than "
        f"torchmetrics: {rows[2][1] / ours_time:.2f}x; >= 10x faster than netcal: "
        f"{rows[3][1] / ours_time:.1f}x"
    )


if __name__ == "__main__":
    main()
