"""The numba group sums of the bootstrap (classwise ECE bins, smECE grids) equal the numpy
path's bit for bit, and so do the estimates and intervals computed from them."""

import numpy as np
import pytest

from sklearn_calib.metrics import calibration_error_ci, classwise_calibration_error, smooth_ece
from sklearn_calib.metrics._core._rows import block_rows
from sklearn_calib.metrics._functions._binned import _classwise_sums, classwise_plan
from sklearn_calib.metrics._functions._predictions import check_predictions
from sklearn_calib.metrics._functions._smece import smooth_ece_plan
from sklearn_calib.metrics._fused import _bins, _switch

pytest.importorskip("numba")

SWITCH = _switch.NUMBA_SWITCH


def awkward_predictions(n, n_classes, dtype, seed=0):
    """Random probabilities with entries exactly on the 15 bins' edges, at 0 and at 1,
    and weights of which some are 0."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, n_classes)) * 2.0
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    proba = proba.astype(dtype)
    edge = np.asarray(np.arange(1, 15) / 15, dtype=dtype)
    proba[: n // 10, 0] = edge[np.arange(n // 10) % 14]
    proba[: n // 10, 1] = 1 - proba[: n // 10, 0]
    proba[: n // 10, 2:] = 0
    proba[n // 10 : n // 5] = 0
    proba[n // 10 : n // 5, 1] = 1
    y = rng.integers(0, n_classes, n)
    weight = rng.exponential(size=n)
    weight[::7] = 0
    return y, proba, weight


def both_paths(monkeypatch, compute):
    """``compute()`` with numba, then with the numpy path."""
    monkeypatch.delenv(SWITCH, raising=False)
    fast = compute()
    monkeypatch.setenv(SWITCH, "0")
    slow = compute()
    monkeypatch.delenv(SWITCH)
    return fast, slow


def test_the_numba_classwise_sums_put_edges_0_and_1_in_their_bins():
    proba = np.array([[0.2, 0.8], [0.4, 0.6], [0.0, 1.0], [1 / 3, 2 / 3]])
    data = check_predictions([1, 0, 1, 0], proba, sample_weight=[1.0, 2.0, 0.5, 4.0])
    sums = _bins.classwise_sums(data, 5, 1000, None, 1)[0].reshape(3, 2, 5)
    # (lower, upper] bins of width 0.2: 0.2 -> 0, 0.4 -> 1, 0.6 -> 2, 0.8 -> 3, 0 -> 0,
    # 1 -> 4, 1/3 -> 1, 2/3 -> 3
    assert sums[0].tolist() == [[1.5, 6.0, 0, 0, 0], [0, 0, 2.0, 5.0, 0.5]]
    np.testing.assert_allclose(
        sums[1], [[0.2, 0.8 + 4 / 3, 0, 0, 0], [0, 0, 1.2, 0.8 + 8 / 3, 0.5]], rtol=1e-15
    )
    # the indicator of the true class: rows 1 and 3 are class 0, rows 0 and 2 class 1
    assert sums[2].tolist() == [[0, 6.0, 0, 0, 0], [0, 0, 0, 1.0, 0.5]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.slow
def test_the_classwise_group_sums_equal_the_numpy_path(monkeypatch, dtype, weighted):
    y, proba, weight = awkward_predictions(200_000, 16, dtype)
    assert len(y) > 3 * block_rows(16)  # the sums follow the numpy path's blocks of rows
    sample_weight = weight if weighted else None
    group = np.random.default_rng(1).permutation(len(y)) % 1000
    assert _bins.classwise_sums(check_predictions(y, proba), 15, 100, None, 1) is not None

    def compute():
        data = check_predictions(y, proba, sample_weight=sample_weight)
        plan = classwise_plan(data, n_bins=15)
        return plan.accumulate(group, 1000), _classwise_sums(data, 15, None, 1)

    (grouped, total), (expected_grouped, expected_total) = both_paths(monkeypatch, compute)
    assert grouped.shape == (1000, 3 * 16 * 15)
    assert np.array_equal(grouped, expected_grouped)
    assert np.array_equal(total, expected_total)
    np.testing.assert_allclose(grouped.sum(axis=0), total[0], rtol=1e-12)
    estimate = both_paths(
        monkeypatch, lambda: classwise_calibration_error(y, proba, sample_weight=sample_weight)
    )
    assert estimate[0] == estimate[1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_smece_group_grids_equal_the_numpy_path(monkeypatch, dtype):
    y, proba, weight = awkward_predictions(60_000, 3, dtype, seed=2)
    group = np.random.default_rng(3).permutation(len(y)) % 512

    def compute():
        data = check_predictions(y, proba, sample_weight=weight)
        return smooth_ece_plan(data).accumulate(group, 512)

    fast, slow = both_paths(monkeypatch, compute)
    assert fast.shape == slow.shape and np.array_equal(fast, slow)
    index = np.array([0, 3, 3, 9])
    frac = np.array([0.0, 0.25, 1.0, 0.5])
    columns = [np.array([1.0, 2.0, 4.0, 8.0]), np.array([-1.0, 0.5, 0.5, 2.0])]
    grids = _bins.grid_sums(index, frac, columns, 11, np.array([1, 0, 1, 1]), 2)
    expected = np.zeros((2, 2, 11))
    expected[0, 0, 3:5] = [1.5, 0.5]
    expected[0, 1, [0, 3, 4, 9, 10]] = [1.0, 0.0, 4.0, 4.0, 4.0]
    expected[1, 0, 3:5] = [0.375, 0.125]
    expected[1, 1, [0, 3, 4, 9, 10]] = [-1.0, 0.0, 0.5, 1.0, 1.0]
    assert np.array_equal(grids, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "metric, options",
    [(classwise_calibration_error, {"n_bins": 15}), (smooth_ece, {})],
)
@pytest.mark.slow
def test_bootstrap_intervals_and_estimates_equal_the_numpy_path(
    monkeypatch, dtype, metric, options
):
    y, proba, weight = awkward_predictions(40_000, 3, dtype, seed=4)

    def compute():
        result = calibration_error_ci(
            metric,
            y,
            proba,
            n_resamples=60,
            random_state=0,
            sample_weight=weight,
            ci_method="bca",
            **options,
        )
        return result.estimate, result.low, result.high

    fast, slow = both_paths(monkeypatch, compute)
    assert fast == slow
    assert fast[1] < fast[2]


@pytest.mark.parametrize("weighted", [False, True])
def test_the_automatic_bandwidth_search_equals_the_numpy_path(monkeypatch, weighted):
    # the search's grid sums are the numba grid kernel's, over one group
    y, proba, weight = awkward_predictions(30_000, 4, np.float32, seed=5)
    weight = weight if weighted else None

    def compute():
        return smooth_ece(y, proba, sample_weight=weight, return_bandwidth=True)

    fast, slow = both_paths(monkeypatch, compute)
    assert fast == slow
    assert 0.001 <= fast[1] < 1.0
