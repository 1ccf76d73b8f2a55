"""Which tests share a pytest-xdist worker under ``--dist loadgroup`` (``make test``).

The tests of a module in :data:`ONE_WORKER_MODULES` share one costly fixture: the
documentation build (a session fixture of ``tests/test_docs.py``), a Dask cluster (the
module fixture ``dask_client``) or the cpu preset's sweep (the module fixture ``cpu_sweep``
of ``tests/test_benchmarks_cpu.py``, about a minute). They run on one worker, which builds
or starts it once;
every other test goes to whichever worker is free. ``tests/conftest.py`` gives xdist a
scheduler that reads this rule from the test ids: xdist's own grouping by ``xdist_group``
marks does not group under pytest 9.2, whose test ids it can no longer extend.
"""

#: Test modules whose tests run on one worker.
ONE_WORKER_MODULES = frozenset(
    {
        "tests/test_benchmarks_cpu.py",
        "tests/test_docs.py",
        "tests/test_dask.py",
        "tests/test_dask_dataframe.py",
        "tests/test_dask_scale.py",
    }
)


def scope(nodeid):
    """Return the unit of work of the test ``nodeid``: its module in
    :data:`ONE_WORKER_MODULES`, else None (the scheduler's own rule)."""
    module = nodeid.split("::", 1)[0]
    return module if module in ONE_WORKER_MODULES else None
