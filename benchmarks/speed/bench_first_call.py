"""First calls: importing the package, and a process's first metric call, in fresh processes.

Each case runs in ``--repeat`` fresh Python processes (numpy imported first in each, as
any use of the package needs it) and keeps the best time:

- the import of ``sklearn_calib`` and of ``sklearn_calib.metrics``, against the import
  of ``sklearn.calibration`` (the baseline), with the heavy modules each one loaded;
- the first and second call of ``expected_calibration_error``, ``calibration_report``
  and ``smooth_ece`` on ``--rows`` x ``--classes`` probabilities, with the default path
  (``SKLEARN_CALIB_NUMBA`` unset) on a warm numba cache (filled by one process before)
  and on a cold one (``NUMBA_CACHE_DIR`` an empty folder per process), against the
  numpy path (``SKLEARN_CALIB_NUMBA=0``, the baseline); and, for comparison, numba
  forced at every size (``SKLEARN_CALIB_NUMBA=1``) on a warm cache.

The targets printed: ``import sklearn_calib`` at most 1.5 x ``import sklearn.calibration``;
the first ECE call at most 2 x the numpy path's with a warm cache and at most 1.5 s with
a cold one. Run from the repository root::

    PYTHONPATH=. python benchmarks/speed/bench_first_call.py [--rows 100000] [--repeat 3]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

IMPORT_CHILD = """
import json, sys, time
import numpy
start = time.perf_counter()
import {module}
seconds = time.perf_counter() - start
loaded = [name for name in ("torch", "skorch", "numba", "scipy") if name in sys.modules]
print(json.dumps({{"seconds": seconds, "loaded": loaded}}))
"""

CALL_CHILD = """
import json, sys, time
import numpy as np
rng = np.random.default_rng(0)
proba = rng.dirichlet(np.full({classes}, 0.5), {rows})
y = rng.integers(0, {classes}, {rows})
from sklearn_calib import {function}
calls = []
for _ in range(2):
    start = time.perf_counter()
    {function}(y, proba{options})
    calls.append(time.perf_counter() - start)
loaded = [name for name in ("torch", "skorch", "numba") if name in sys.modules]
print(json.dumps({{"first": calls[0], "second": calls[1], "loaded": loaded}}))
"""

METRICS = {
    "expected_calibration_error": "",
    "calibration_report": ", random_state=0",
    "smooth_ece": "",
}


def run_child(code, env):
    """Run ``code`` in a fresh interpreter with ``env`` and return its JSON line."""
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.splitlines()[-1])


def environment(numba=None, cache=None):
    """This process's environment, with ``SKLEARN_CALIB_NUMBA`` and ``NUMBA_CACHE_DIR`` set
    (None: unset)."""
    env = dict(os.environ)
    for name, value in (("SKLEARN_CALIB_NUMBA", numba), ("NUMBA_CACHE_DIR", cache)):
        env.pop(name, None)
        if value is not None:
            env[name] = value
    return env


def best_run(code, repeat, numba=None, cold=False, key="seconds"):
    """The run of ``code`` with the smallest ``key`` over ``repeat`` fresh processes (each
    with an empty numba cache when ``cold``)."""
    runs = []
    for _ in range(repeat):
        if cold:
            with tempfile.TemporaryDirectory() as cache:
                runs.append(run_child(code, environment(numba, cache)))
        else:
            runs.append(run_child(code, environment(numba)))
    return min(runs, key=lambda run: run[key])


def verdict(met):
    return "met" if met else "NOT met"


def imports(repeat):
    """Print the imports' times against ``import sklearn.calibration``."""
    times = {
        module: best_run(IMPORT_CHILD.format(module=module), repeat)
        for module in ("sklearn.calibration", "sklearn_calib", "sklearn_calib.metrics")
    }
    baseline = times["sklearn.calibration"]["seconds"]
    print(f"imports (best of {repeat} fresh processes, numpy imported before)")
    for module, run in times.items():
        ratio = run["seconds"] / baseline
        loaded = ", ".join(run["loaded"]) or "none"
        print(f"  import {module:22s} {run['seconds']:7.3f} s  {ratio:6.2f} x   loads: {loaded}")
    ratio = times["sklearn_calib"]["seconds"] / baseline
    target = "import sklearn_calib <= 1.5 x import sklearn.calibration"
    print(f"  target {target}: {verdict(ratio <= 1.5)}")


def first_calls(args):
    """Print each metric's first and second call per path, against the numpy path's."""
    print(
        f"\nfirst calls on {args.rows:,} x {args.classes} float64 probabilities (best first "
        f"call of {args.repeat} fresh processes; the package's import not counted)"
    )
    modes = {
        "numpy path (=0)": {"numba": "0"},
        "default, warm cache": {},
        "default, cold cache": {"cold": True},
        "numba forced (=1), warm": {"numba": "1"},
    }
    for function, options in METRICS.items():
        code = CALL_CHILD.format(
            rows=args.rows, classes=args.classes, function=function, options=options
        )
        for warm_up in (None, "1"):  # fill numba's cache for the warm runs
            run_child(code, environment(warm_up))
        runs = {
            name: best_run(code, args.repeat, key="first", **mode) for name, mode in modes.items()
        }
        baseline = runs["numpy path (=0)"]["first"]
        print(f"  {function}")
        for name, run in runs.items():
            loaded = ", ".join(run["loaded"]) or "none"
            print(
                f"    {name:24s} first {run['first']:7.3f} s ({run['first'] / baseline:5.2f} x)"
                f"  second {run['second']:7.3f} s   loads: {loaded}"
            )
        if function == "expected_calibration_error":
            warm = runs["default, warm cache"]["first"] / baseline
            cold = runs["default, cold cache"]["first"]
            print(f"    target first call, warm cache <= 2 x numpy path's: {verdict(warm <= 2)}")
            print(f"    target first call, cold cache <= 1.5 s: {verdict(cold <= 1.5)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    imports(args.repeat)
    first_calls(args)


if __name__ == "__main__":
    main()
