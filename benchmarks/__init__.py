"""Experiments that reproduce the calibration papers' tables and figures with sklearn_calib.

Run ``python -m benchmarks list`` for the experiments and ``python -m benchmarks run NAME
--preset quick|cpu|full`` to train (resuming from the run store) and write the reports.
The plain scripts beside this package, ``speed/bench_*.py`` (speed benchmarks) and
``scripts/*.py`` (the calibrator arena and the sweeps behind defaults), run on their own.
"""
