"""Scale-out: a GridSearchCV over NetClassifier, sequential and on Dask with 1 and 2 workers.

Every search is the same (candidates x folds whole fits of a small MLP on scikit-learn's
digits, one torch thread per fit); it runs sequentially in this process, then through
joblib's dask backend on a ``distributed.LocalCluster`` of 1 and of 2 worker processes
with one thread each, and, as the machine's own parallel baseline without Dask, with
joblib's loky backend on as many processes. Every process first runs one tiny warm-up
fit. Printed: the start-up times (not counted in the search times), each search's wall
time, the speed-up of 2 workers over 1, the Dask overhead of 1 worker over the sequential
run, Dask against loky, the per-fit times (``mean_fit_time`` of each candidate), the
share of the wall time the workers spent fitting, and whether the cross-validation
scores equal the sequential ones. Run from the repository root::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_dask.py [--epochs 30] [--cv 3]

On a machine whose cores are busy with other work the speed-up falls short of 2.
"""

import argparse
import os
import time

import joblib
import numpy as np
import torch
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV

from sklearn_calib import NetClassifier


def make_search(args):
    net = NetClassifier(
        module__hidden_units=(args.hidden,),
        max_epochs=args.epochs,
        batch_size=64,
        random_state=0,
    )
    grid = {"lr": [1e-3, 3e-3], "criterion": ["ce", "focal"]}
    return GridSearchCV(net, grid, cv=args.cv, refit=False)


def warm_up():
    """Run one tiny fit, so that no timed fit pays torch's first-call costs.

    Returns
    -------
    threads : int
        torch's number of threads in this process.
    """
    X, y = load_digits(return_X_y=True)
    NetClassifier(max_epochs=1, random_state=0).fit((X[:128] / 16.0).astype(np.float32), y[:128])
    return torch.get_num_threads()


def timed_fit(search, X, y):
    start = time.perf_counter()
    search.fit(X, y)
    return time.perf_counter() - start, search


def describe_fits(search):
    times = search.cv_results_["mean_fit_time"]
    stds = search.cv_results_["std_fit_time"]
    n_fits = len(times) * search.n_splits_
    per_fit = ", ".join(f"{t:.2f}±{s:.2f}" for t, s in zip(times, stds, strict=True))
    return n_fits, float(np.sum(times) * search.n_splits_), per_fit


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--cv", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()

    from distributed import Client, LocalCluster

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    torch.set_num_threads(1)
    search = make_search(args)
    n_candidates = len(search.param_grid["lr"]) * len(search.param_grid["criterion"])
    print(
        f"GridSearchCV: {n_candidates} candidates x {args.cv} folds, MLP({args.hidden}) "
        f"{args.epochs} epochs on digits {X.shape}, one torch thread per fit, "
        f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )

    warm_up()
    sequential_time, sequential = timed_fit(clone(search), X, y)
    n_fits, fit_sum, per_fit = describe_fits(sequential)
    print(
        f"sequential: {sequential_time:.2f} s wall, {n_fits} fits, sum of fit times "
        f"{fit_sum:.2f} s; per-fit mean±std by candidate [s]: {per_fit}",
        flush=True,
    )

    start = time.perf_counter()
    with joblib.parallel_backend("loky", n_jobs=max(args.workers)):
        threads = joblib.Parallel()(joblib.delayed(warm_up)() for _ in range(max(args.workers)))
        loky_startup = time.perf_counter() - start
        loky_time, loky = timed_fit(clone(search), X, y)
    _, fit_sum, per_fit = describe_fits(loky)
    print(
        f"joblib loky, {max(args.workers)} processes (no Dask, the machine's own parallel "
        f"baseline, torch threads {threads}): {loky_time:.2f} s wall (start-up "
        f"{loky_startup:.1f} s, not counted), sum of fit times {fit_sum:.2f} s; per-fit [s]: "
        f"{per_fit}",
        flush=True,
    )

    walls = {}
    for n_workers in args.workers:
        start = time.perf_counter()
        with (
            LocalCluster(
                n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            startup = time.perf_counter() - start
            threads = list(client.run(warm_up).values())
            with joblib.parallel_backend("dask"):
                walls[n_workers], remote = timed_fit(clone(search), X, y)
        _, fit_sum, per_fit = describe_fits(remote)
        same = all(
            np.array_equal(remote.cv_results_[k], sequential.cv_results_[k])
            for k in sequential.cv_results_
            if k.startswith("split")
        )
        busy = fit_sum / (n_workers * walls[n_workers])
        print(
            f"dask, {n_workers} worker(s) (torch threads {threads}): {walls[n_workers]:.2f} s "
            f"wall (cluster start-up "
            f"{startup:.1f} s, not counted), sum of fit times {fit_sum:.2f} s, workers busy "
            f"{busy:.0%} of the wall time, scores equal to sequential: {same}; per-fit [s]: "
            f"{per_fit}",
            flush=True,
        )

    if 1 in walls:
        print(f"dask 1 worker / sequential: {walls[1] / sequential_time:.2f}")
        for n_workers, wall in walls.items():
            if n_workers > 1:
                print(f"speed-up of {n_workers} workers over 1: {walls[1] / wall:.2f}")
    print(
        f"speed-up of loky {max(args.workers)} processes over sequential: "
        f"{sequential_time / loky_time:.2f}; dask {max(args.workers)} workers / loky: "
        f"{walls[max(args.workers)] / loky_time:.2f}"
    )


if __name__ == "__main__":
    main()
