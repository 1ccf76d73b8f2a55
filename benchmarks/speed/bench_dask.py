"""Scale-out: a GridSearchCV over NetClassifier, sequential and on Dask with 1 and 2 workers.

Every search is the same (candidates x folds whole fits of a small MLP on scikit-learn's
digits, one torch thread per fit). Each round runs it sequentially in this process, with
joblib's loky backend on 2 processes (the machine's own parallel baseline, without Dask),
and through joblib's dask backend on a ``distributed.LocalCluster`` of 1 and of 2 worker
processes with one thread each; the clusters are started once (start-up printed, not
counted) and every process runs one warm-up fit first. Printed: each round's wall times,
then per mode the best wall time over the rounds, the sum of fit times and the share of
the wall time the processes spent fitting, the per-fit times (``mean_fit_time`` of each
candidate), whether the cross-validation scores equal the sequential ones, and the
ratios: Dask 1 worker over sequential, 2 workers over 1, loky over sequential and Dask
over loky. Run from the repository root::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/speed/bench_dask.py [--repeat 3] [--epochs 30]

On a machine whose cores are busy with other work the speed-ups fall short of 2.
"""

import argparse
import contextlib
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


def run_round(search, X, y, clients, n_loky):
    """Time the search once in each mode; return {mode: (wall, fitted search)}."""
    results = {"sequential": timed_fit(clone(search), X, y)}
    with joblib.parallel_backend("loky", n_jobs=n_loky):
        results[f"loky, {n_loky} processes"] = timed_fit(clone(search), X, y)
    for n_workers, client in clients.items():
        with joblib.parallel_backend("dask", client=client):
            results[f"dask, {n_workers} worker(s)"] = timed_fit(clone(search), X, y)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--cv", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from distributed import Client, LocalCluster

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    torch.set_num_threads(1)
    search = make_search(args)
    n_candidates = len(search.param_grid["lr"]) * len(search.param_grid["criterion"])
    n_loky = max(args.workers)
    print(
        f"GridSearchCV: {n_candidates} candidates x {args.cv} folds, MLP({args.hidden}) "
        f"{args.epochs} epochs on digits {X.shape}, one torch thread per fit, "
        f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    warm_up()
    with contextlib.ExitStack() as stack:
        clients = {}
        for n_workers in args.workers:
            start = time.perf_counter()
            cluster = stack.enter_context(
                LocalCluster(
                    n_workers=n_workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",
                )
            )
            clients[n_workers] = stack.enter_context(Client(cluster, set_as_default=False))
            startup = time.perf_counter() - start
            threads = list(clients[n_workers].run(warm_up).values())
            print(
                f"dask cluster of {n_workers} worker(s): start-up {startup:.1f} s (not "
                f"counted), torch threads {threads}",
                flush=True,
            )
        with joblib.parallel_backend("loky", n_jobs=n_loky):
            threads = joblib.Parallel()(joblib.delayed(warm_up)() for _ in range(n_loky))
        print(f"loky, {n_loky} processes: torch threads {threads}", flush=True)

        rounds = []
        for index in range(args.repeat):
            rounds.append(run_round(search, X, y, clients, n_loky))
            walls = ", ".join(f"{mode} {wall:.2f} s" for mode, (wall, _) in rounds[-1].items())
            print(f"round {index + 1} (load {os.getloadavg()[0]:.1f}): {walls}", flush=True)

    sequential = rounds[0]["sequential"][1]
    best = {}
    for mode in rounds[0]:
        wall, fitted = min((r[mode] for r in rounds), key=lambda pair: pair[0])
        best[mode] = wall
        n_workers = 1 if mode == "sequential" else int(mode.split(", ")[1].split()[0])
        n_fits, fit_sum, per_fit = describe_fits(fitted)
        same = all(
            np.array_equal(fitted.cv_results_[key], sequential.cv_results_[key])
            for key in sequential.cv_results_
            if key.startswith("split")
        )
        print(
            f"{mode}: best wall {wall:.2f} s, {n_fits} fits, sum of fit times {fit_sum:.2f} s, "
            f"busy {fit_sum / (n_workers * wall):.0%}, scores equal to sequential: {same}; "
            f"per-fit mean±std by candidate [s]: {per_fit}",
            flush=True,
        )
    dask = {int(m.split(", ")[1].split()[0]): w for m, w in best.items() if m.startswith("dask")}
    loky_wall = best[f"loky, {n_loky} processes"]
    if 1 in dask:
        print(f"dask 1 worker / sequential: {dask[1] / best['sequential']:.2f}")
    for n_workers, wall in dask.items():
        if n_workers > 1 and 1 in dask:
            print(f"speed-up of dask {n_workers} workers over 1: {dask[1] / wall:.2f}")
    speed_up = best["sequential"] / loky_wall
    print(f"speed-up of loky {n_loky} processes over sequential: {speed_up:.2f}")
    if n_loky in dask:
        print(f"dask {n_loky} workers / loky {n_loky} processes: {dask[n_loky] / loky_wall:.2f}")


if __name__ == "__main__":
    main()
