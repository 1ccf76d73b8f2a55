"""Calibration at scale: ECE, classwise ECE, smECE and a bootstrap interval through Dask.

Writes ``--rows`` x ``--classes`` float32 probabilities (and int8 labels) as a chunked
on-disk array (a stack of ``.npy`` files, one per chunk of ``--chunk-rows`` rows, read
back memory-mapped by ``dask.array.from_npy_stack``), then

1. through Dask on a ``distributed.LocalCluster`` of ``--workers`` worker processes (one
   thread each, ``--memory-limit`` each): one ``CalibrationAccumulator.update`` of the
   Dask arrays (map: accumulate each chunk; merge: a tree of merges) and ``compute``,
   giving the ECE, the classwise ECE, smECE and the ``--resamples``-replicate Poisson
   bootstrap interval of the ECE; each worker's peak resident memory (``ru_maxrss``,
   file pages of the memory-mapped chunks included) is printed against the limit;
2. in memory, on all rows loaded at once: ``expected_calibration_error``,
   ``classwise_calibration_error``, ``smooth_ece`` and ``calibration_error_ci`` (its
   grouped bootstrap), the baseline of the ratio;

and prints the relative differences (binned results: at most 1e-12; smECE: within the
bound the accumulator reports, plus rounding) and the timings. The data are deleted at
the end unless ``--keep``. Run from the repository root::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/speed/bench_scale.py --rows 100000000

(4 GB of probabilities; ``--rows 1000000`` for a quick check). The numba kernels (the
``fast`` extra) draw the bootstrap's Poisson counts several times faster than numpy.
"""

import argparse
import os
import pickle
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


def write_chunk(directory, index, rows, n_classes, seed):
    """Write chunk ``index``: softmax probabilities of scaled normal logits, and labels
    drawn from a flatter softmax (an overconfident model)."""
    rng = np.random.default_rng([seed, index])
    logits = rng.standard_normal((rows, n_classes), dtype=np.float32) * np.float32(2.5)
    shifted = logits - logits.max(axis=1, keepdims=True)
    proba = np.exp(shifted)
    proba /= proba.sum(axis=1, keepdims=True)
    uniform = np.clip(rng.random((rows, n_classes), dtype=np.float32), 1e-7, 1 - 1e-7)
    gumbel = -np.log(-np.log(uniform))
    labels = np.argmax(shifted / np.float32(1.6) + gumbel, axis=1).astype(np.int8)
    np.save(directory / "proba" / f"{index}.npy", proba)
    np.save(directory / "labels" / f"{index}.npy", labels)


def write_stacks(directory, n_rows, n_classes, chunk_rows, seed):
    """Write the probabilities and labels as ``dask.array.to_npy_stack`` lays them out."""
    sizes = [min(chunk_rows, n_rows - start) for start in range(0, n_rows, chunk_rows)]
    for name, dtype, shape in (
        ("proba", np.float32, ((n_classes,),)),
        ("labels", np.int8, ()),
    ):
        (directory / name).mkdir(parents=True)
        info = {"chunks": (tuple(sizes),) + shape, "dtype": np.dtype(dtype), "axis": 0}
        with open(directory / name / "info", "wb") as file:
            pickle.dump(info, file)
    for index, rows in enumerate(sizes):
        write_chunk(directory, index, rows, n_classes, seed)
    return len(sizes)


def peak_rss_mb():
    """This process's peak resident memory in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds():
    """This process's user and system CPU time so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def through_dask(directory, args):
    import dask.array as da
    from distributed import Client, LocalCluster

    from sklearn_calib.metrics import CalibrationAccumulator

    proba = da.from_npy_stack(str(directory / "proba"), mmap_mode="r")
    labels = da.from_npy_stack(str(directory / "labels"), mmap_mode="r")
    with (
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=args.memory_limit,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        client.run(lambda: __import__("sklearn_calib.metrics"))
        start_rss = client.run(peak_rss_mb)
        start_cpu = client.run(cpu_seconds)
        start = time.perf_counter()
        accumulator = CalibrationAccumulator(
            metrics=["ece", "classwise_ece", "smooth_ece"],
            n_resamples=args.resamples,
            interval_metrics=["ece"],
            random_state=0,
        )
        accumulator.update(labels, proba)
        result = accumulator.compute()
        seconds = time.perf_counter() - start
        peaks = client.run(peak_rss_mb)
        cpu = client.run(cpu_seconds)
    busy = {worker: cpu[worker] - start_cpu[worker] for worker in cpu}
    return result, seconds, start_rss, peaks, busy


def in_memory(directory, n_chunks, args):
    from sklearn_calib.metrics import (
        calibration_error_ci,
        classwise_calibration_error,
        expected_calibration_error,
        smooth_ece,
    )

    proba = np.concatenate([np.load(directory / "proba" / f"{i}.npy") for i in range(n_chunks)])
    labels = np.concatenate([np.load(directory / "labels" / f"{i}.npy") for i in range(n_chunks)])
    times, values = {}, {}
    for name, call in (
        ("ece", lambda: expected_calibration_error(labels, proba)),
        ("classwise_ece", lambda: classwise_calibration_error(labels, proba)),
        ("smooth_ece", lambda: smooth_ece(labels, proba, return_bandwidth=True)),
        (
            "interval",
            lambda: calibration_error_ci(
                expected_calibration_error,
                labels,
                proba,
                n_resamples=args.resamples,
                random_state=0,
            ),
        ),
    ):
        start = time.perf_counter()
        values[name] = call()
        times[name] = time.perf_counter() - start
    return values, times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**8)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--chunk-rows", type=int, default=10**6)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="1GiB")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", default=None, help="where to write the data (a new folder)")
    parser.add_argument("--keep", action="store_true", help="keep the data")
    args = parser.parse_args()
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")  # one thread per worker process
    parent = Path(args.dir) if args.dir else Path(tempfile.gettempdir())
    directory = Path(tempfile.mkdtemp(prefix="bench_scale_", dir=parent))
    try:
        start = time.perf_counter()
        n_chunks = write_stacks(directory, args.rows, args.classes, args.chunk_rows, args.seed)
        gigabytes = args.rows * args.classes * 4 / 1e9
        print(
            f"data: {args.rows:,} x {args.classes} float32 ({gigabytes:.2f} GB) in {n_chunks} "
            f"chunks of {args.chunk_rows:,} rows, written in {time.perf_counter() - start:.1f} s"
        )
        result, dask_seconds, start_rss, peaks, busy = through_dask(directory, args)
        print(
            f"Dask, {args.workers} workers x 1 thread, memory limit {args.memory_limit} each: "
            f"ECE + classwise ECE + smECE + {args.resamples}-replicate ECE interval in one "
            f"pass: {dask_seconds:.1f} s"
        )
        for worker, peak in peaks.items():
            before = start_rss[worker]
            print(
                f"  worker {worker}: peak RSS {peak:.0f} MiB (after start-up {before:.0f}), "
                f"CPU {busy[worker]:.0f} s"
            )
        values, times = in_memory(directory, n_chunks, args)
        memory_seconds = sum(times.values())
        print(
            "in memory (all rows loaded): "
            + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in times.items())
        )
        print(f"ratio Dask / in memory (same four results): {dask_seconds / memory_seconds:.2f}")
        smece, bandwidth = values["smooth_ece"]
        rows = [
            ("ECE", result.ece, values["ece"], 1e-12),
            ("classwise ECE", result.classwise_ece, values["classwise_ece"], 1e-12),
            ("smECE", result.smooth_ece, smece, result.smooth_ece_bound / smece + 1e-12),
        ]
        for name, dask_value, memory_value, tolerance in rows:
            relative = abs(dask_value - memory_value) / abs(memory_value)
            verdict = "ok" if relative <= tolerance else "FAILS"
            print(
                f"  {name:14s} Dask {dask_value:.15g}  memory {memory_value:.15g}  "
                f"relative difference {relative:.1e} (allowed {tolerance:.1e}) {verdict}"
            )
        print(
            f"  smECE bandwidth: Dask {result.smooth_ece_bandwidth:g}, memory {bandwidth:g}; "
            f"grid bound {result.smooth_ece_bound:.1e}"
        )
        interval, grouped = result.intervals["ece"], values["interval"]
        print(
            f"  ECE 95 % interval: Poisson bootstrap (Dask) [{interval.low:.6f}, "
            f"{interval.high:.6f}]; grouped bootstrap (memory) [{grouped.low:.6f}, "
            f"{grouped.high:.6f}]"
        )
        print(f"this process: peak RSS {peak_rss_mb():.0f} MiB")
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
