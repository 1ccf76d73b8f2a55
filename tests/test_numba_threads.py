"""Metrics called from several threads at once under numba's workqueue threading layer
(numba's fallback without TBB or OpenMP), which aborts the process when two threads run
parallel kernels together: the library runs its parallel kernels one at a time there."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import threading

    import dask
    import dask.array as da
    import numba
    import numpy as np

    from sklearn_calib.metrics import (
        CalibrationAccumulator,
        calibration_report,
        expected_calibration_error,
    )

    rng = np.random.default_rng(0)
    n_rows, n_classes = 40_000, 4  # 160,000 entries: the one-read check's kernel too
    proba = rng.dirichlet(np.full(n_classes, 0.5), n_rows)
    y = rng.integers(0, n_classes, n_rows)


    def ece():
        return expected_calibration_error(y, proba)


    def report():
        return calibration_report(
            y[:3000], proba[:3000], n_resamples=20, random_state=0, output_dict=True
        )


    def accumulated():
        accumulator = CalibrationAccumulator(n_resamples=50, random_state=0)
        return accumulator.update(y, proba, row_ids=0).compute()


    def dask_accumulated():
        accumulator = CalibrationAccumulator(n_resamples=50, random_state=0)
        chunks = da.from_array(proba, chunks=(5_000, n_classes))
        labels = da.from_array(y, chunks=5_000)
        return accumulator.update(labels, chunks).compute()


    expected = {"ece": ece(), "report": report(), "accumulated": accumulated()}
    assert numba.threading_layer() == "workqueue", numba.threading_layer()
    with dask.config.set(scheduler="synchronous"):
        expected["dask"] = dask_accumulated()

    found = {name: [] for name in expected}
    functions = {"ece": ece, "report": report, "accumulated": accumulated}


    def work():
        for name, function in functions.items():
            found[name].append(function())


    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with dask.config.set(scheduler="threads", num_workers=4):
        found["dask"] = [dask_accumulated() for _ in range(2)]

    for name, values in found.items():
        assert len(values) == (2 if name == "dask" else 4), (name, len(values))
        for value in values:
            assert repr(value) == repr(expected[name]), name
    print("ece", expected["ece"])
    """
)


@pytest.mark.slow
def test_metrics_from_threads_under_the_workqueue_layer_complete_with_the_serial_values():
    pytest.importorskip("dask")
    env = dict(os.environ)
    env.pop("NUMBA_NUM_THREADS", None)  # numba's threads as many as the cores, as outside tests
    env.update(
        NUMBA_THREADING_LAYER="workqueue",
        SKLEARN_CALIB_NUMBA="1",  # the kernels at every size, as on large input
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
    )
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    # an abort (numba's "Concurrent access has been detected") ends with returncode -6
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("ece 0.")


TORCH_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import torch

    from sklearn_calib.metrics import expected_calibration_error

    torch.set_num_threads(1)
    assert torch.get_num_threads() == 1
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(4), 40_000)
    expected_calibration_error(rng.integers(0, 4, 40_000), proba)
    import numba

    print(numba.threading_layer(), torch.get_num_threads())
    """
)


@pytest.mark.slow
def test_a_first_parallel_kernel_leaves_torch_its_number_of_threads():
    """numba's OpenMP layer, started by the first parallel kernel, sets OpenMP's thread
    count, which torch shares: a process that had set torch to one thread kept one."""
    pytest.importorskip("torch")
    env = dict(os.environ)
    env.update(
        SKLEARN_CALIB_NUMBA="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
    )
    env.pop("NUMBA_THREADING_LAYER", None)
    env.pop("NUMBA_NUM_THREADS", None)
    result = subprocess.run(
        [sys.executable, "-c", TORCH_SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    layer, threads = result.stdout.split()
    assert threads == "1", f"torch runs {threads} threads after a kernel of numba's {layer} layer"
