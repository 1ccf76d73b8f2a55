"""The test suite's shared helpers: the registry of public estimators that the walks over
every estimator share, and the units of work of the tests under pytest-xdist."""

import inspect
from pathlib import Path

from sklearn.base import BaseEstimator

import sklearn_calib
from sklearn_calib import calibrators, estimators

import xdist_scopes
from estimator_registry import (
    CALIBRATORS,
    ESTIMATORS,
    LABEL_SHIFT,
    LABEL_SHIFT_ADAPTERS,
    LABEL_SHIFT_CLASSIFIERS,
    META_CLASSIFIERS,
    NET_CLASSIFIERS,
    TINY,
    tiny,
)


def test_every_public_estimator_is_registered_with_tiny_parameters():
    exported = {
        name
        for module in (sklearn_calib, calibrators, estimators)
        for name in module.__all__
        if inspect.isclass(getattr(module, name))
        and issubclass(getattr(module, name), BaseEstimator)
    }
    assert exported <= set(ESTIMATORS)
    assert sorted(TINY) == sorted(ESTIMATORS)


def test_every_estimator_is_in_exactly_one_walk():
    groups = [CALIBRATORS, META_CLASSIFIERS, NET_CLASSIFIERS, LABEL_SHIFT]
    assert sorted(name for group in groups for name in group) == sorted(ESTIMATORS)
    assert {"TemperatureScaling", "MulticalibrationBoosting", "CalibratorSelector"} <= set(
        CALIBRATORS
    )
    assert META_CLASSIFIERS == ["CalibratedClassifier"]
    assert NET_CLASSIFIERS == ["MetaNetClassifier", "NetClassifier"]
    assert LABEL_SHIFT == ["LabelShiftAdapter", "LabelShiftClassifier"]
    assert (LABEL_SHIFT_ADAPTERS, LABEL_SHIFT_CLASSIFIERS) == (
        ["LabelShiftAdapter"],
        ["LabelShiftClassifier"],
    )


def test_tiny_instances_are_new_and_take_overrides():
    first, second = tiny("CalibratedClassifier"), tiny("CalibratedClassifier")
    assert first.estimator is not second.estimator
    assert first.get_params()["random_state"] == 0
    net = tiny("NetClassifier", max_epochs=5)
    assert net.max_epochs == 5 and net.module__hidden_units == (8,)


def test_the_modules_of_one_costly_fixture_each_run_on_one_worker():
    assert xdist_scopes.scope("tests/test_docs.py::test_x[a]") == "tests/test_docs.py"
    assert xdist_scopes.scope("tests/test_dask_scale.py::test_y") == "tests/test_dask_scale.py"
    assert xdist_scopes.scope("tests/test_net.py::test_z") is None
    uses_cluster = {
        f"tests/{path.name}"
        for path in Path(__file__).parent.glob("test_*.py")
        if path != Path(__file__) and "dask_client" in path.read_text()
    }
    shared_builds = {"tests/test_docs.py", "tests/test_benchmarks_cpu.py"}
    assert uses_cluster | shared_builds == xdist_scopes.ONE_WORKER_MODULES
