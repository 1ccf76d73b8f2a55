"""The simultaneous reliability band and its equivalence test: the runs' bounds against a
brute force, the band's coverage by simulation, and the test's decisions."""

import numpy as np
import pytest
from scipy.special import betaincinv

from sklearn_calib.metrics import (
    calibration_equivalence_test,
    reliability_band,
    reliability_diagram,
)
from sklearn_calib.metrics._statistics._reliability_band import lower_band


def _brute_lower(successes, trials, alpha):
    """Largest Clopper-Pearson lower bound over every run ending at or before each block."""
    n = len(trials)
    level = alpha / (n * (n + 1))
    band, current = [], 0.0
    for end in range(n):
        for start in range(end + 1):
            hits, size = successes[start : end + 1].sum(), trials[start : end + 1].sum()
            if hits > 0:
                current = max(current, betaincinv(hits, size - hits + 1, level))
        band.append(current)
    return np.array(band)


def test_lower_band_is_the_largest_bound_of_the_runs():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(1, 25))
        trials = rng.integers(1, 6, n).astype(float)
        successes = np.floor(rng.random(n) * (trials + 1))
        ours = lower_band(successes[None], trials[None], np.array([n]), 0.1)[0]
        np.testing.assert_allclose(ours, _brute_lower(successes, trials, 0.1), atol=1e-12)


def test_exact_band_brackets_the_isotonic_fit_and_steps_at_the_scores():
    rng = np.random.default_rng(1)
    p = np.round(rng.random(300), 3)
    y = rng.random(300) < p
    band = reliability_band(y, p, pos_label=True, decimals=None)
    assert band.scores[0] == 0.0 and band.scores[-1] == 1.0
    assert set(np.unique(p)) <= set(band.scores)
    assert np.all(np.diff(band.lower) >= 0) and np.all(np.diff(band.upper) >= 0)
    assert np.all(band.lower <= band.upper)
    # the upper band is the lower band of the other class, reflected
    other = reliability_band(~y, 1 - p, pos_label=True, decimals=None)
    np.testing.assert_allclose(band.upper[::-1], 1 - other.lower, atol=1e-12)


def _coverage(n, replicates, rng, confidence_level=0.95, decimals=2):
    """Share of replicates of a calibrated model (``P(y | p) = p``, ``p`` uniform) whose
    whole curve the band covers, computed for all replicates at once by the band's runs
    on the rounded grid of :func:`reliability_band`."""
    p = rng.random((replicates, n))
    y = (rng.random((replicates, n)) < p).astype(float)
    rows = np.repeat(np.arange(replicates), n)
    grid = 10**decimals + 1
    covered = np.ones(replicates, bool)
    for side, keys in (("lower", np.ceil(p * 10**decimals)), ("upper", np.floor(p * 10**decimals))):
        block = keys.astype(int).ravel()
        outcome = (y if side == "lower" else 1 - y).ravel()
        trials = np.zeros((replicates, grid))
        successes = np.zeros((replicates, grid))
        np.add.at(trials, (rows, block), 1.0)
        np.add.at(successes, (rows, block), outcome)
        anchor = np.full((replicates, grid), -np.inf if side == "lower" else np.inf)
        (np.maximum if side == "lower" else np.minimum).at(anchor, (rows, block), p.ravel())
        n_blocks = (trials > 0).sum(axis=1)
        alpha = 1 - confidence_level
        if side == "lower":
            bound = lower_band(successes, trials, n_blocks, alpha)
            ok = (bound <= anchor) | (trials == 0)
        else:
            bound = 1 - lower_band(successes[:, ::-1], trials[:, ::-1], n_blocks, alpha)[:, ::-1]
            ok = (bound >= anchor) | (trials == 0)
        covered &= ok.all(axis=1)
    return covered.mean()


def test_vectorised_coverage_uses_the_public_band():
    """The simulation's runs are those of reliability_band on each replicate."""
    rng = np.random.default_rng(2)
    p = rng.random(400)
    y = rng.random(400) < p
    band = reliability_band(y, p, pos_label=True)
    block = np.ceil(p * 100).astype(int)
    trials = np.bincount(block, minlength=101).astype(float)
    successes = np.bincount(block, weights=y, minlength=101)
    lower = lower_band(successes[None], trials[None], np.array([(trials > 0).sum()]), 0.05)[0]
    anchors = np.array([p[block == b].max() for b in np.flatnonzero(trials)])
    at = np.searchsorted(band.scores, anchors)
    np.testing.assert_allclose(band.lower[at], lower[trials > 0], atol=1e-12)


@pytest.mark.parametrize("n", [500, 5000])
@pytest.mark.slow
def test_band_covers_a_calibrated_curve_at_its_level(n):
    coverage = _coverage(n, replicates=500, rng=np.random.default_rng(n))
    assert coverage >= 0.94


def test_pointwise_intervals_cover_less_than_the_band():
    """All fifteen per-bin 95 % Clopper-Pearson intervals cover together far less often."""
    rng = np.random.default_rng(3)
    together = []
    for _ in range(200):
        p = rng.random(1000)
        y = rng.random(1000) < p
        diagram = reliability_diagram(
            y, p, convention="positive_class", confidence_level=0.95, labels=[False, True]
        )
        filled = diagram.count > 0
        centre = (diagram.edges[:-1] + diagram.edges[1:])[filled] / 2
        truth = np.asarray(diagram.mean_confidence)[filled]
        covered = (diagram.accuracy_low[filled] <= truth) & (truth <= diagram.accuracy_high[filled])
        together.append(covered.all() and centre.size == 15)
    assert np.mean(together) < 0.8


def test_top_label_band_of_a_multiclass_model():
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(3000, 4)) * 2
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = (proba.cumsum(axis=1) < rng.random((3000, 1))).sum(axis=1)
    band = reliability_band(y, proba)
    low, high = band.score_range
    assert low >= 0.25 and high <= 1.0
    inside = (band.scores >= low) & (band.scores <= high)
    assert np.all(band.lower[inside] <= band.scores[inside] + 0.05)


def test_equivalence_test_certifies_a_calibrated_model_only():
    rng = np.random.default_rng(5)
    p = rng.random(20000)
    calibrated = rng.random(20000) < p
    overconfident = rng.random(20000) < 0.5 + 0.6 * (p - 0.5)
    good = calibration_equivalence_test(calibrated, p, pos_label=True, tolerance=0.15)
    bad = calibration_equivalence_test(overconfident, p, pos_label=True, tolerance=0.15)
    assert good.certified and good.deviation < 0.15
    assert not bad.certified and bad.deviation > 0.2  # the curve strays 0.2 at the ends
    band = good.band
    inside = (band.scores >= band.score_range[0]) & (band.scores <= band.score_range[1])
    assert np.all(np.abs(band.lower[inside] - band.scores[inside]) <= good.deviation)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"decimals": -1}, "Expected `decimals` to be None or an integer >= 0, got -1"),
        ({"decimals": 1.5}, "Expected `decimals` to be None or an integer >= 0, got 1.5"),
        ({"pos_label": 3}, r"Expected `pos_label` to be one of the classes \[0, 1\], got 3"),
        ({"confidence_level": 1.0}, "Expected `confidence_level` to be a number in"),
    ],
)
def test_bad_options_raise(options, message):
    with pytest.raises(ValueError, match=message):
        reliability_band([0, 1, 1], [0.2, 0.6, 0.7], **options)


def test_bad_tolerance_raises():
    with pytest.raises(ValueError, match=r"Expected `tolerance` to be a number in \(0, 1\], got 0"):
        calibration_equivalence_test([0, 1, 1], [0.2, 0.6, 0.7], tolerance=0)
