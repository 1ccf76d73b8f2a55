"""The numba isotonic fits of the CORP decomposition against its numpy path (pooled ties,
scikit-learn's ``isotonic_regression``) and against a fit computed by hand."""

import math

import numpy as np
import pytest

from sklearn_calib.metrics._functions._predictions import check_predictions
from sklearn_calib.metrics._functions._scores import log_loss_clip
from sklearn_calib.metrics._fused import _isotonic
from sklearn_calib.scoring import calibration_decomposition

pytest.importorskip("numba")

NUMBA_SWITCH = "SKLEARN_CALIB_NUMBA"


def tied_multiclass(n, k, seed, dtype):
    """Softmax probabilities, half of the rows from a few integer logits (tied values),
    labels drawn from them; weights in [0, 1), a fifth of them 0, and 0 on every row
    where the first column takes its most frequent value."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 2
    logits[: n // 2] = rng.integers(0, 4, size=(n // 2, k))
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = (proba.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1).clip(0, k - 1)
    proba = proba.astype(dtype)
    weight = rng.random(n) * (rng.random(n) > 0.2)
    values, counts = np.unique(proba[:, 0], return_counts=True)
    weight[proba[:, 0] == values[counts.argmax()]] = 0.0
    return y, proba, weight


def tied_binary(n, seed, dtype):
    """Positive-class probabilities with two decimals, weights as :func:`tied_multiclass`
    (0 on every row of 0.37)."""
    rng = np.random.default_rng(seed)
    p = np.round(rng.random(n), 2)
    y = (rng.random(n) < p**1.5).astype(int)
    weight = rng.random(n) * (rng.random(n) > 0.2)
    weight[p == 0.37] = 0.0
    return y, p.astype(dtype), weight


def numpy_column_scores(data, classes, clip):
    keys = _isotonic._indicator_keys(data.proba, data.y_index, classes)
    return [_isotonic._isotonic_score(key, data.sample_weight, clip) for key in keys]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n_classes", [2, 10])
@pytest.mark.slow
def test_numba_column_scores_equal_the_numpy_path(monkeypatch, dtype, weighted, n_classes):
    if n_classes == 2:
        y, proba, weight = tied_binary(3000, 1, dtype)
    else:
        # 3 * 10**5 entries: the columns go to the threads
        y, proba, weight = tied_multiclass(30000, n_classes, 2, dtype)
        assert proba.size >= _isotonic._THREADED_ENTRIES
    data = check_predictions(y, proba, sample_weight=weight if weighted else None)
    classes = [1] if n_classes == 2 else list(range(n_classes))
    scores = ["brier", "log_loss"] if n_classes == 2 else ["brier"]
    for clip in [None, log_loss_clip(np.float64)][: len(scores)]:
        found = _isotonic.isotonic_scores(
            data.proba, data.y_index, classes, data.sample_weight, clip
        )
        expected = numpy_column_scores(data, classes, clip)
        np.testing.assert_allclose(found, expected, rtol=1e-13, atol=0)
    for score in scores:
        fast = calibration_decomposition(y, proba, score=score, sample_weight=data.sample_weight)
        monkeypatch.setenv(NUMBA_SWITCH, "0")
        numpy_scores = _isotonic.isotonic_scores(data.proba, data.y_index, classes, None, None)
        assert numpy_scores == numpy_column_scores(data.reweighted(None), classes, None)
        slow = calibration_decomposition(y, proba, score=score, sample_weight=data.sample_weight)
        monkeypatch.delenv(NUMBA_SWITCH)
        assert fast.refinement == pytest.approx(slow.refinement, rel=1e-13, abs=0)
        # differences of the refinement and larger scores: rounding of those scores
        for part in ("miscalibration", "discrimination"):
            assert fast[part] == pytest.approx(slow[part], rel=0, abs=1e-13 * slow.score)
        assert fast.score == slow.score and fast.uncertainty == slow.uncertainty


def test_numba_column_scores_read_any_layout_of_the_probabilities():
    y, proba, weight = tied_multiclass(2000, 4, 5, np.float64)
    data = check_predictions(y, proba, sample_weight=weight)
    expected = _isotonic.isotonic_scores(data.proba, data.y_index, [0, 1, 2, 3], weight, None)
    read_only = proba.copy()
    read_only.setflags(write=False)
    for layout in (np.asfortranarray(proba), read_only):
        assert (
            _isotonic.isotonic_scores(layout, data.y_index, [0, 1, 2, 3], weight, None) == expected
        )
    strided = np.repeat(proba, 2, axis=1)[:, ::2]
    assert _isotonic.isotonic_scores(strided, data.y_index, [0, 1, 2, 3], weight, None) == expected


@pytest.mark.parametrize("numba", ["1", "0"])
def test_isotonic_refinement_of_a_hand_computed_fit(monkeypatch, numba):
    monkeypatch.setenv(NUMBA_SWITCH, numba)
    # values 0.1 | 0.2 0.2 0.3 | 0.4 0.5 (and 0.25 of weight 0, left out): the indicator
    # 0 | 1 0 0 | 1 1 pools to blocks of means 0, 1/3 (0.3 violates 0.2's mean 1/2) and 1
    p = np.array([0.1, 0.2, 0.2, 0.3, 0.4, 0.5, 0.25])
    y = np.array([0, 1, 0, 0, 1, 1, 1])
    weight = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    brier = calibration_decomposition(y, p, sample_weight=weight)
    # squared errors of the positive column: 4/9 + 1/9 + 1/9, twice for both columns
    assert brier.refinement == pytest.approx(2 * (6 / 9) / 6, rel=1e-15)
    log_loss = calibration_decomposition(y, p, score="log_loss", sample_weight=weight)
    # -log(1/3) - 2 log(2/3), and the clipped fits of 0 and 1 lose eps each on 3 rows
    eps = np.finfo(np.float64).eps
    expected = (math.log(3) - 2 * math.log(2 / 3) - 3 * math.log1p(-eps)) / 6
    assert log_loss.refinement == pytest.approx(expected, rel=1e-15)
    # a weight of 0.5 on the positive row at 0.2 makes its block 0.2 0.2 0.3 (mean 1/5)
    weight[1] = 0.5
    halved = calibration_decomposition(y, p, sample_weight=weight)
    squared = 0.5 * (4 / 5) ** 2 + 2 * (1 / 5) ** 2
    assert halved.refinement == pytest.approx(2 * squared / 5.5, rel=1e-15)
