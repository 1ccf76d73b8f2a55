"""Post-hoc calibrator fit times and held-out NLL against reference packages, in one run.

Two suites:

``--suite frontier`` (default): each calibrator of ours against its counterpart
in probmetrics (betacal for beta calibration) on the same input, as a user calls them:

- temperature scaling: ``TemperatureScaling()`` vs ``get_calibrator("temp-scaling")``;
- structured vector / matrix scaling: ``StructuredVectorScaling()``,
  ``StructuredMatrixScaling()`` vs ``get_calibrator("svs")``, ``get_calibrator("sms")``;
- vector / matrix scaling: ``VectorScaling()``,
  ``MatrixScaling(l2_regularization_off_diagonal=0)`` vs probmetrics'
  ``VectorScalingCalibrator()``, ``MatrixScalingCalibrator()`` (unpenalised);
- on a binary problem of the same size: quadratic scaling, ``QuadraticScaling()`` vs
  ``get_calibrator("quadratic-scaling")``, and beta calibration,
  ``BetaCalibration(input="probabilities")`` vs ``betacal.BetaCalibration()`` (which
  probmetrics' ``get_calibrator("beta")`` wraps).

Dirichlet calibration has no counterpart here (probmetrics' needs Python 3.12); its CV
over 25 penalty pairs is timed alone by ``--methods dirichlet`` (no ratio).

probmetrics takes probabilities: it gets ``softmax(logits)`` (float64) and ours the float32
logits; for vector and matrix scaling, whose models are not invariant to a shift of a row
of logits, ours gets the log-probabilities ``log_softmax(logits)`` so that both fit the same
model. Data: :func:`make_biased_logits` (overconfident float32 logits with a class-wise
bias); the first half fits, the NLL is measured on the second half (the same split for
all). Each fit is timed ``--repeat`` times (wall clock, best of) after one untimed warm-up
fit of every method on a small input; the ratio is their time over ours (> 1: ours is
faster). Both sides run with ``--threads`` threads (torch and BLAS). A smoke check:
``PYTHONPATH=. python benchmarks/speed/bench_calibrators.py --sizes 2000x10 --repeat 1``.

``--suite temperature``: temperature-scaling fit time against scikit-learn and
netcal on the same logits (``--n`` x ``--k``, the NLL measured on the fit data):

- ours: ``TemperatureScaling().fit(logits, y)``;
- scikit-learn: ``CalibratedClassifierCV(FrozenEstimator(s), method="temperature")``
  where ``s`` is a fitted classifier whose ``decision_function`` returns the logits;
- netcal: ``TemperatureScaling(method="mle").fit(softmax(logits), y)`` (netcal takes
  probabilities and takes their log itself). The probabilities are float64: given float32
  probabilities, netcal 1.4's optimiser stops at its start and returns weight 1 (T = 1)
  without a warning. Its ``temperature`` attribute holds the weight ``1/T``.
"""

import argparse
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from scipy.special import log_softmax, softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator
from threadpoolctl import threadpool_limits

from sklearn_calib.calibrators import (
    BetaCalibration,
    DirichletCalibration,
    MatrixScaling,
    QuadraticScaling,
    StructuredMatrixScaling,
    StructuredVectorScaling,
    TemperatureScaling,
    VectorScaling,
)


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
    """Return overconfident float32 logits and labels drawn from the true softmax.

    True logits ``t``: standard normal times 2, plus 3 on one random class per row; labels
    are drawn from ``softmax(t)`` (Gumbel-max); the logits are ``2.5 t``.
    """
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


def make_biased_logits(n_samples, n_classes, seed):
    """:func:`make_logits` plus a class-wise bias, N(0, 0.5^2) per class (seed + 1)."""
    logits, y = make_logits(n_samples, n_classes, seed)
    bias = np.random.default_rng(seed + 1).normal(size=n_classes) * 0.5
    return logits + bias.astype(np.float32), y


def nll_of(proba, y):
    """Mean negative log-likelihood of the true class, in float64."""
    true = np.asarray(proba[np.arange(len(y)), y], dtype=np.float64)
    return float(-np.mean(np.log(np.maximum(true, np.finfo(np.float64).tiny))))


# ----------------------------------------------------------------------------- frontier


def _probmetrics(name):
    """A probmetrics calibrator, by factory name or class name."""
    import probmetrics.calibrators as calibrators

    if hasattr(calibrators, name):
        return getattr(calibrators, name)()
    return calibrators.get_calibrator(name)


def _betacal():
    from betacal import BetaCalibration as Betacal

    return Betacal()


#: name -> (our calibrator, what ours is given, theirs or None, what theirs is given)
#: where the inputs are "logits", "log_proba", "proba" or "positive_proba" of the same scores.
FRONTIER = {
    "TS": (TemperatureScaling, "logits", lambda: _probmetrics("temp-scaling"), "proba"),
    "SVS": (StructuredVectorScaling, "logits", lambda: _probmetrics("svs"), "proba"),
    "SMS": (StructuredMatrixScaling, "logits", lambda: _probmetrics("sms"), "proba"),
    "vector": (
        VectorScaling,
        "log_proba",
        lambda: _probmetrics("VectorScalingCalibrator"),
        "proba",
    ),
    "matrix": (
        lambda: MatrixScaling(l2_regularization_off_diagonal=0.0),
        "log_proba",
        lambda: _probmetrics("MatrixScalingCalibrator"),
        "proba",
    ),
    "quadratic": (QuadraticScaling, "logits", lambda: _probmetrics("quadratic-scaling"), "proba"),
    "beta": (
        lambda: BetaCalibration(input="probabilities"),
        "positive_proba",
        _betacal,
        "positive_proba",
    ),
    "dirichlet": (DirichletCalibration, "logits", None, None),
}
#: Methods fitted on a binary problem of the same number of rows.
BINARY = {"quadratic", "beta"}


def _views(logits):
    """The inputs the methods take, computed once: logits, (log-)probabilities."""
    log_proba = log_softmax(logits.astype(np.float64), axis=1)
    proba = np.exp(log_proba)
    views = {"logits": logits, "log_proba": log_proba, "proba": proba}
    if logits.shape[1] == 2:
        views["positive_proba"] = proba[:, 1]
    return views


def _proba(calibrator, scores):
    """Probabilities of every class (betacal's ``predict`` gives the positive class's)."""
    if hasattr(calibrator, "predict_proba"):
        return calibrator.predict_proba(scores)
    positive = calibrator.predict(scores)
    return np.column_stack([1 - positive, positive])


def _time_fit(make, scores, y, repeat):
    """Best wall time of ``repeat`` fits and the last fitted calibrator."""
    best, fitted = np.inf, None
    for _ in range(repeat):
        fitted = make()
        start = time.perf_counter()
        fitted.fit(scores, y)
        best = min(best, time.perf_counter() - start)
    return best, fitted


def run_frontier(sizes, seed, repeat, methods):
    _warm_up(methods)
    print(
        f"{'data':<14}{'method':<10}{'ours s':>9}{'theirs s':>10}{'ratio':>8}"
        f"{'NLL ours':>12}{'NLL theirs':>12}{'difference':>12}"
    )
    for n_samples, n_classes in sizes:
        binary = BINARY & set(methods)
        for n_columns, names in ((n_classes, set(methods) - binary), (2, binary)):
            if not names:
                continue
            logits, y = make_biased_logits(n_samples, n_columns, seed)
            half = n_samples // 2
            fit_views, test_views = _views(logits[:half]), _views(logits[half:])
            label = f"{n_samples}x{n_columns}"
            uncalibrated = nll_of(softmax(logits[half:].astype(np.float64), axis=1), y[half:])
            print(f"{label:<14}{'none':<10}{'':>27}{uncalibrated:>12.6f}")
            for name in [m for m in methods if m in names]:
                ours, our_input, theirs, their_input = FRONTIER[name]
                our_time, our_fit = _time_fit(ours, fit_views[our_input], y[:half], repeat)
                our_nll = nll_of(our_fit.predict_proba(test_views[our_input]), y[half:])
                if theirs is None:
                    print(f"{label:<14}{name:<10}{our_time:>9.3f}{'':>18}{our_nll:>12.6f}")
                    continue
                their_time, their_fit = _time_fit(theirs, fit_views[their_input], y[:half], repeat)
                their_nll = nll_of(_proba(their_fit, test_views[their_input]), y[half:])
                print(
                    f"{label:<14}{name:<10}{our_time:>9.3f}{their_time:>10.3f}"
                    f"{their_time / our_time:>7.1f}x{our_nll:>12.6f}{their_nll:>12.6f}"
                    f"{our_nll - their_nll:>12.2e}",
                    flush=True,
                )


def _warm_up(methods):
    """Fit every method once on a small input (imports, first-call compilation)."""
    for name in methods:
        ours, our_input, theirs, their_input = FRONTIER[name]
        logits, y = make_biased_logits(600, 2 if name in BINARY else 4, 123)
        views = _views(logits)
        ours().fit(views[our_input], y)
        if theirs is not None:
            theirs().fit(views[their_input], y)


# -------------------------------------------------------------------------- temperature


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

    proba = softmax(logits.astype(np.float64), axis=1)
    start = time.perf_counter()
    ts = NetcalTemperatureScaling(method="mle").fit(proba, y)
    elapsed = time.perf_counter() - start
    temperature = 1.0 / float(np.ravel(ts.temperature)[0])
    return elapsed, temperature, nll_of(ts.transform(proba), y)


def run_temperature(n_samples, n_classes, seed, skip):
    logits, y = make_logits(n_samples, n_classes, seed)
    print(f"data: {n_samples} x {n_classes} float32 logits, seed {seed}")
    print(f"NLL at T = 1: {nll_of(softmax(logits.astype(np.float64), axis=1), y):.8f}")
    runs = {"sklearn_calib": run_ours}
    if "sklearn" not in skip:
        runs["scikit-learn"] = run_sklearn
    if "netcal" not in skip:
        runs["netcal"] = run_netcal
    results = {name: run(logits, y) for name, run in runs.items()}
    ours_time = results["sklearn_calib"][0]
    print(f"{'method':<14}{'fit s':>10}{'ratio':>9}{'T':>14}{'NLL':>16}")
    for name, (elapsed, temperature, nll) in results.items():
        print(
            f"{name:<14}{elapsed:>10.2f}{elapsed / ours_time:>8.1f}x"
            f"{temperature:>14.6f}{nll:>16.10f}"
        )


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def _sizes(text):
    """``"20000x10,50000x100"`` -> [(20000, 10), (50000, 100)]."""
    return [tuple(int(part) for part in size.split("x")) for size in text.split(",")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=["frontier", "temperature"], default="frontier")
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=_sizes("20000x10,50000x100,1000000x10"),
        help="frontier: rows x classes, comma-separated (default 20000x10,50000x100,1000000x10)",
    )
    parser.add_argument(
        "--methods",
        nargs="*",
        default=[name for name in FRONTIER if name != "dirichlet"],
        choices=list(FRONTIER),
        metavar="NAME",
        help=f"frontier: any of {', '.join(FRONTIER)} (default: all but dirichlet)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="frontier: fits per method")
    parser.add_argument("--threads", type=int, default=None, help="torch and BLAS threads")
    parser.add_argument("--n", type=int, default=1_000_000, help="temperature: rows")
    parser.add_argument("--k", type=int, default=100, help="temperature: classes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--skip", nargs="*", default=[], choices=["sklearn", "netcal"], help="baselines to skip"
    )
    args = parser.parse_args()

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(
        f"machine: {_cpu_model()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), numpy {np.__version__}"
    )
    with threadpool_limits(limits=args.threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if args.suite == "frontier":
            run_frontier(args.sizes, args.seed, args.repeat, args.methods)
        else:
            run_temperature(args.n, args.k, args.seed, args.skip)


if __name__ == "__main__":
    main()
