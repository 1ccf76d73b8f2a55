"""Which path the fused passes take: numpy below ``NUMBA_WORK`` values by default (where
numba's first call, which loads or compiles its kernels, costs more than numpy's pass),
numba above it, either one when ``SKLEARN_CALIB_NUMBA`` says so; both give the same
values."""

import numpy as np
import pytest

from sklearn_calib.metrics import CalibrationAccumulator, _fused, expected_calibration_error
from sklearn_calib.metrics._predictions import check_predictions

numba = pytest.importorskip("numba")

SWITCH = _fused.NUMBA_SWITCH


def predictions(n_rows, n_classes, seed=0):
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.full(n_classes, 0.3), n_rows)
    return rng.integers(0, n_classes, n_rows), proba, rng.random(n_rows)


@pytest.mark.parametrize("mode", [None, "", "auto"])
def test_by_default_numba_takes_the_passes_of_at_least_numba_work_values(monkeypatch, mode):
    if mode is None:
        monkeypatch.delenv(SWITCH, raising=False)
    else:
        monkeypatch.setenv(SWITCH, mode)
    monkeypatch.setattr(_fused, "NUMBA_WORK", 1000)
    assert _fused.numba_kernels(999) is None
    assert _fused.numba_kernels(1000) is not None


def test_the_switch_forces_either_path_and_refuses_other_values(monkeypatch):
    monkeypatch.setattr(_fused, "NUMBA_WORK", 1000)
    monkeypatch.setenv(SWITCH, "1")
    assert _fused.numba_kernels(0) is not None
    monkeypatch.setenv(SWITCH, "0")
    assert _fused.numba_kernels(10**12) is None
    monkeypatch.setenv(SWITCH, "fast")
    message = "Expected the environment variable SKLEARN_CALIB_NUMBA to be '0', '1' or 'auto', "
    with pytest.raises(ValueError, match=f"^{message}got 'fast'.$"):
        expected_calibration_error([0, 1], [[0.8, 0.2], [0.3, 0.7]])


def test_the_default_path_of_the_ece_follows_the_size_of_the_predictions(monkeypatch):
    monkeypatch.delenv(SWITCH, raising=False)
    y, proba, weight = predictions(30_000, 4)
    values = {}
    for work, numba_check in [(proba.size + 1, False), (proba.size, True)]:
        monkeypatch.setattr(_fused, "NUMBA_WORK", work)
        # numba's check of the probabilities finds their top-label scores as it reads them
        assert check_predictions(y, proba).has_scores("top_label") is numba_check
        values[numba_check] = expected_calibration_error(y, proba, sample_weight=weight)
    assert values[True] == values[False]


def test_the_bootstrap_of_a_batch_takes_one_path_for_all_its_blocks(monkeypatch):
    monkeypatch.delenv(SWITCH, raising=False)
    n_rows = 150_000  # three blocks of the replicate sums (2**16 entries, one a row)
    y, proba, _ = predictions(n_rows, 2)
    works = []

    def recorded(work):
        works.append(work)
        return choose(work)

    choose = _fused.numba_kernels
    monkeypatch.setattr(_fused, "numba_kernels", recorded)
    # the ECE's resampled sums: one cell a row, three values, eight replicates
    batch_work = n_rows * 1 * 3 * 8
    replicates = {}
    for threshold in (batch_work, batch_work + 1):
        monkeypatch.setattr(_fused, "NUMBA_WORK", threshold)
        works.clear()
        accumulator = CalibrationAccumulator(
            n_resamples=8, interval_metrics=["ece"], random_state=0
        )
        accumulator.update(y, proba, row_ids=0)
        replicates[threshold] = accumulator._state["replicates"]
        assert works == [batch_work] * 3
    assert np.array_equal(replicates[batch_work], replicates[batch_work + 1])
