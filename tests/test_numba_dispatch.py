"""Which path the fused passes take: by default numba where its kernels save more than
their first call in a process costs (``NUMBA_LOAD_NS``: loaded from numba's cache, or
compiled), else numpy; either one when ``SKLEARN_CALIB_NUMBA`` says so. Both give the
same values."""

import numpy as np
import pytest

from sklearn_calib.metrics import CalibrationAccumulator, expected_calibration_error
from sklearn_calib.metrics._functions._predictions import check_predictions
from sklearn_calib.metrics._fused import _switch

numba = pytest.importorskip("numba")

SWITCH = _switch.NUMBA_SWITCH


def predictions(n_rows, n_classes, seed=0):
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.full(n_classes, 0.3), n_rows)
    return rng.integers(0, n_classes, n_rows), proba, rng.random(n_rows)


@pytest.mark.parametrize("mode", [None, "", "auto"])
def test_by_default_numba_takes_the_passes_where_it_saves_its_load(monkeypatch, mode):
    if mode is None:
        monkeypatch.delenv(SWITCH, raising=False)
    else:
        monkeypatch.setenv(SWITCH, mode)
    monkeypatch.setattr(_switch, "NUMBA_LOAD_NS", 1000 * _switch._SAVED_NS["classwise"])
    assert _switch.numba_kernels("classwise", 999) is None
    assert _switch.numba_kernels("classwise", 1000) is not None


def test_by_default_small_passes_take_numpy(monkeypatch, numba_at_every_size):
    # the library's NUMBA_LOAD_NS, not the suite's 0 (conftest)
    monkeypatch.setattr(_switch, "NUMBA_LOAD_NS", numba_at_every_size)
    monkeypatch.delenv(SWITCH, raising=False)
    # a pass that saves more per value takes numba on fewer values
    least = {kind: -(-_switch.NUMBA_LOAD_NS // saved) for kind, saved in _switch._SAVED_NS.items()}
    for kind, n_values in least.items():
        assert _switch.numba_kernels(kind, n_values - 1) is None, kind
        assert _switch.numba_kernels(kind, n_values) is not None, kind
    # ECE of 10^5 x 10 takes numpy (its first call costs no numba load), 10^8 x 10 numba
    assert 10**6 < least["top_label"] < 10**9


def test_the_switch_forces_either_path_and_refuses_other_values(monkeypatch):
    monkeypatch.setenv(SWITCH, "1")
    assert _switch.numba_kernels("top_label", 0) is not None
    monkeypatch.setenv(SWITCH, "0")
    assert _switch.numba_kernels("replicates", 10**12) is None
    monkeypatch.setenv(SWITCH, "fast")
    message = "Expected the environment variable SKLEARN_CALIB_NUMBA to be '0', '1' or 'auto', "
    with pytest.raises(ValueError, match=f"^{message}got 'fast'.$"):
        expected_calibration_error([0, 1], [[0.8, 0.2], [0.3, 0.7]])


def test_the_default_path_of_the_ece_follows_the_size_of_the_predictions(monkeypatch):
    monkeypatch.delenv(SWITCH, raising=False)
    y, proba, weight = predictions(30_000, 4)
    values = {}
    saved = _switch._SAVED_NS["top_label"]
    for entries, numba_check in [(proba.size + 1, False), (proba.size, True)]:
        monkeypatch.setattr(_switch, "NUMBA_LOAD_NS", entries * saved)
        # numba's check of the probabilities finds their top-label scores as it reads them
        assert check_predictions(y, proba).has_scores("top_label") is numba_check
        values[numba_check] = expected_calibration_error(y, proba, sample_weight=weight)
    assert values[True] == values[False]


@pytest.mark.slow
def test_the_bootstrap_of_a_batch_takes_one_path_for_all_its_blocks(monkeypatch):
    monkeypatch.delenv(SWITCH, raising=False)
    n_rows = 150_000  # three blocks of the replicate sums (2**16 entries, one a row)
    y, proba, _ = predictions(n_rows, 2)
    works = []

    def recorded(kind, n_values):
        if kind == "replicates":
            works.append(n_values)
        return choose(kind, n_values)

    choose = _switch.numba_kernels
    monkeypatch.setattr(_switch, "numba_kernels", recorded)
    # the ECE's resampled sums: one cell a row, three values, eight replicates
    batch_work = n_rows * 1 * 3 * 8
    replicates = {}
    for threshold in (batch_work, batch_work + 1):
        monkeypatch.setattr(_switch, "NUMBA_LOAD_NS", threshold * _switch._SAVED_NS["replicates"])
        works.clear()
        accumulator = CalibrationAccumulator(
            n_resamples=8, interval_metrics=["ece"], random_state=0
        )
        accumulator.update(y, proba, row_ids=0)
        replicates[threshold] = accumulator._state["replicates"]
        assert works == [batch_work] * 3
    assert np.array_equal(replicates[batch_work], replicates[batch_work + 1])
