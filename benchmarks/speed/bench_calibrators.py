"""Temperature-scaling fit time against scikit-learn and netcal on the same logits.

Synthetic, seeded, overconfident float32 logits: true logits ``t`` (standard normal times
2, plus 3 on one random class per row), labels drawn from ``softmax(t)`` (Gumbel-max), and
the scores handed to every method are ``2.5 * t``, so the NLL-optimal temperature is
about 2.5. Each method is fitted once, as a user would call it:

- ours: ``TemperatureScaling().fit(logits, y)``;
- scikit-learn: ``CalibratedClassifierCV(FrozenEstimator(s), method="temperature")``
  where ``s`` is a fitted classifier whose ``decision_function`` returns the logits;
- netcal: ``TemperatureScaling(method="mle").fit(softmax(logits), y)`` (netcal takes
  probabilities and takes their log itself). The probabilities are float64: given float32
  probabilities, netcal 1.4's optimiser stops at its start and returns weight 1 (T = 1)
  without a warning. Its ``temperature`` attribute holds the weight ``1/T``.

The NLL of each is computed (float64) from the probabilities that method returns for the
fit data. Run ``PYTHONPATH=. python benchmarks/speed/bench_calibrators.py --n 100000``
for a quick check.
"""

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch
from scipy.special import softmax as scipy_softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator

from sklearn_calib.calibrators import TemperatureScaling


def softmax(logits):
    """Row-wise softmax in float64."""
    return scipy_softmax(np.asarray(logits, dtype=np.float64), axis=1)


class _FixedScores(ClassifierMixin, BaseEstimator):
    """A classifier whose decision function returns its input (feeds logits to sklearn)."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def decision_function(self, X):
        return X

    def predict(self, X):
        return self.classes_[np.argmax(X, axis=1)]


def make_logits(n_samples, n_classes, seed, chunk=100_000):
    """Return overconfident float32 logits and labels drawn from the true softmax."""
    rng = np.random.default_rng(seed)
    logits = np.empty((n_samples, n_classes), dtype=np.float32)
    y = np.empty(n_samples, dtype=np.int64)
    for start in range(0, n_samples, chunk):
        rows = min(chunk, n_samples - start)
        true = rng.standard_normal((rows, n_classes), dtype=np.float32) * 2
        true[np.arange(rows), rng.integers(0, n_classes, rows)] += 3
        gumbel = -np.log(-np.log(rng.uniform(size=(rows, n_classes))))
        y[start : start + rows] = np.argmax(true + gumbel, axis=1)
        logits[start : start + rows] = 2.5 * true
    return logits, y


def nll_of(proba, y):
    """Mean negative log-likelihood of the true class, in float64."""
    true = np.asarray(proba[np.arange(len(y)), y], dtype=np.float64)
    return float(-np.mean(np.log(np.maximum(true, np.finfo(np.float64).tiny))))


def run_ours(logits, y):
    start = time.perf_counter()
    ts = TemperatureScaling().fit(logits, y)
    elapsed = time.perf_counter() - start
    return elapsed, ts.temperature_, nll_of(ts.predict_proba(logits), y)


def run_sklearn(logits, y):
    frozen = FrozenEstimator(_FixedScores().fit(None, np.arange(logits.shape[1])))
    start = time.perf_counter()
    cccv = CalibratedClassifierCV(frozen, method="temperature").fit(logits, y)
    elapsed = time.perf_counter() - start
    beta = float(cccv.calibrated_classifiers_[0].calibrators[0].beta_)
    return elapsed, 1.0 / beta, nll_of(cccv.predict_proba(logits), y)


def run_netcal(logits, y):
    from netcal.scaling import TemperatureScaling as NetcalTemperatureScaling

    proba = softmax(logits)
    start = time.perf_counter()
    ts = NetcalTemperatureScaling(method="mle").fit(proba, y)
    elapsed = time.perf_counter() - start
    temperature = 1.0 / float(np.ravel(ts.temperature)[0])
    return elapsed, temperature, nll_of(ts.transform(proba), y)


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="rows (default 10^6)")
    parser.add_argument("--k", type=int, default=100, help="classes (default 100)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--skip", nargs="*", default=[], choices=["sklearn", "netcal"], help="baselines to skip"
    )
    args = parser.parse_args()

    print(
        f"machine: {_cpu_model()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), numpy {np.__version__}"
    )
    logits, y = make_logits(args.n, args.k, args.seed)
    print(f"data: {args.n} x {args.k} float32 logits, seed {args.seed}")
    print(f"NLL at T = 1: {nll_of(softmax(logits), y):.8f}")
    runs = {"sklearn_calib": run_ours}
    if "sklearn" not in args.skip:
        runs["scikit-learn"] = run_sklearn
    if "netcal" not in args.skip:
        runs["netcal"] = run_netcal
    results = {name: run(logits, y) for name, run in runs.items()}
    ours_time = results["sklearn_calib"][0]
    print(f"{'method':<14}{'fit s':>10}{'ratio':>9}{'T':>14}{'NLL':>16}")
    for name, (elapsed, temperature, nll) in results.items():
        print(
            f"{name:<14}{elapsed:>10.2f}{elapsed / ours_time:>8.1f}x"
            f"{temperature:>14.6f}{nll:>16.10f}"
        )


if __name__ == "__main__":
    main()
