"""Experiments that reproduce the seeds' tables and figures with sklearn_calib.

Run ``python -m benchmarks list`` for the experiments and ``python -m benchmarks run NAME
--preset quick|full`` to train (resuming from the run store) and write the reports. The
``bench_*.py`` scripts beside this package are standalone speed benchmarks.
"""
