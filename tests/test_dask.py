"""Searches on a Dask cluster (joblib's dask backend) equal the sequential ones."""

import joblib
import numpy as np
import pytest
import torch
from scipy.stats import loguniform
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, RandomizedSearchCV

from sklearn_calib import CalibratedClassifier, HistogramBinning, TemperatureScaling, get_scorer
from sklearn_calib.estimators import NetClassifier

distributed = pytest.importorskip("distributed")

#: The tests share a cluster of worker processes, minutes of the suite.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(dask_client):
    return dask_client


@pytest.fixture(scope="module")
def digits_500():
    X, y = load_digits(return_X_y=True)
    return (X[:500] / 16.0).astype(np.float32), y[:500]


def tiny_net(**params):
    return NetClassifier(
        module__hidden_units=(16,), max_epochs=3, batch_size=64, random_state=0, **params
    )


def sequential_and_dask(search, X, y):
    """Fit clones of ``search`` here, then on the cluster; return both.

    torch runs on one thread here, as on the workers (and for both refits, which run
    here): CPU matrix products sum in an order that depends on the thread count, so the
    last bits of the weights do.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        here = clone(search).fit(X, y)
        with joblib.parallel_backend("dask"):
            remote = clone(search).fit(X, y)
    finally:
        torch.set_num_threads(threads)
    return here, remote


def assert_same_results(here, remote):
    assert remote.best_params_.keys() == here.best_params_.keys()
    for key, value in here.best_params_.items():
        assert repr(remote.best_params_[key]) == repr(value), key
    for key, value in here.cv_results_.items():
        if key.startswith(("split", "mean_test", "std_test", "rank_test")):
            np.testing.assert_array_equal(remote.cv_results_[key], value, err_msg=key)
        if key.startswith("param_"):
            assert [repr(v) for v in remote.cv_results_[key]] == [repr(v) for v in value]


def test_grid_search_over_net_on_dask_equals_sequential(client, digits_500):
    X, y = digits_500
    search = GridSearchCV(
        tiny_net(),
        {"lr": [0.003, 0.03], "criterion": ["ce", "focal"]},
        cv=2,
        scoring={"acc": "accuracy", "ece": get_scorer("neg_ece")},
        refit="ece",
    )
    here, remote = sequential_and_dask(search, X, y)
    assert_same_results(here, remote)
    assert len(set(here.cv_results_["mean_test_ece"])) == 4  # the candidates differ
    np.testing.assert_array_equal(remote.predict_proba(X), here.predict_proba(X))


def test_randomized_search_over_calibrated_net_on_dask_equals_sequential(client, digits_500):
    X, y = digits_500
    search = RandomizedSearchCV(
        CalibratedClassifier(tiny_net(), cv=0.25, random_state=0),
        {
            "estimator__lr": loguniform(1e-3, 1e-1),
            "calibrator": [TemperatureScaling(), HistogramBinning(n_bins=5)],
        },
        n_iter=3,
        cv=2,
        scoring=get_scorer("neg_nll"),
        random_state=0,
    )
    here, remote = sequential_and_dask(search, X, y)
    assert_same_results(here, remote)
    assert np.isfinite(here.cv_results_["mean_test_score"]).all()
