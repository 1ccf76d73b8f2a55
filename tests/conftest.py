"""Fixtures shared by the test modules; torch's threads and the units of work under pytest-xdist."""

import importlib
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from sklearn_calib.datasets import load_fashion_mnist
from sklearn_calib.metrics._fused import _switch

import xdist_scopes


@pytest.fixture(autouse=True, scope="session")
def numba_at_every_size():
    """The fused passes take numba (where installed and not switched off) at every size, as
    ``SKLEARN_CALIB_NUMBA=1`` makes them, so that small test inputs run the kernels: for the
    whole session, so that a module's fixtures take the path its tests take. Yields the
    library's own ``NUMBA_LOAD_NS``, which the tests of the default choice by size set."""
    default = _switch.NUMBA_LOAD_NS
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_switch, "NUMBA_LOAD_NS", 0)
        yield default


def pytest_configure(config):
    """Give each pytest-xdist worker its share of the cores for the threads of torch, numba,
    BLAS and OpenMP.

    Without it, every worker would run as many threads as there are cores, and ``-n 2``
    on two cores would run four: OpenBLAS's threads wait for work by spinning, so two
    workers' matrix products at once took about twice as long. numba's share is set before
    numba is imported (at the first kernel call), which reads it then; the BLAS libraries
    loaded later read theirs from ``OPENBLAS_NUM_THREADS``.
    """
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        share = max(1, (os.cpu_count() or 1) // int(workers))
        os.environ.setdefault("NUMBA_NUM_THREADS", str(share))
        os.environ.setdefault("OPENBLAS_NUM_THREADS", str(share))
        threadpool_limits(share)
        torch.set_num_threads(share)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadgroup``, keep the tests of each module of
    :data:`xdist_scopes.ONE_WORKER_MODULES` on one worker (see :mod:`xdist_scopes`)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleScopes(LoadGroupScheduling):
        def _split_scope(self, nodeid):
            return xdist_scopes.scope(nodeid) or super()._split_scope(nodeid)

    return ModuleScopes(config, log)


@pytest.fixture(scope="module")
def digits():
    """scikit-learn's digits scaled to [0, 1] in float32, split 75/25 (stratified, seed 0).

    Returns ``X_train, X_test, y_train, y_test``.
    """
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)


@pytest.fixture(scope="session")
def fashion_mnist():
    """Fashion-MNIST as :func:`~sklearn_calib.datasets.load_fashion_mnist` returns it.

    Tests that need the real data set take this fixture. Without the installed files they
    are skipped with the loader's message (how to install them), except under CI
    (``CI`` set in the environment), where the data set must be there and they fail.
    """
    try:
        return load_fashion_mnist()
    except FileNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs the Fashion-MNIST files: {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def dask_client():
    """A Dask client of two worker processes with one thread each, importing this checkout."""
    distributed = pytest.importorskip("distributed")
    repo = str(Path(__file__).resolve().parents[1])
    with pytest.MonkeyPatch.context() as patch:
        path = os.environ.get("PYTHONPATH", "")
        patch.setenv("PYTHONPATH", os.pathsep.join([repo, path]) if path else repo)
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            client.run(importlib.import_module, "sklearn_calib")
            yield client
