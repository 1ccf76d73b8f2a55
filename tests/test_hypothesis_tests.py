"""Calibration tests against MAPIE, and their p-values under calibration."""

import numpy as np
import pytest
from mapie.metrics import calibration as mapie
from scipy.stats import kstest

from sklearn_calib.metrics._statistics import _hypothesis_tests
from sklearn_calib.scoring import calibration_test

MAPIE = {
    "spiegelhalter": (mapie.spiegelhalter_statistic, mapie.spiegelhalter_p_value),
    "ks": (mapie.kolmogorov_smirnov_statistic, mapie.kolmogorov_smirnov_p_value),
    "kuiper": (mapie.kuiper_statistic, mapie.kuiper_p_value),
}


@pytest.mark.parametrize("method", sorted(MAPIE))
@pytest.mark.parametrize("power", [1.0, 1.1, 1.5])
def test_binary_tests_equal_mapie(method, power):
    rng = np.random.default_rng(int(power * 10))
    p = rng.random(2000)
    y = (rng.random(2000) < p**power).astype(int)
    # MAPIE's Spiegelhalter p-value is the upper tail
    alternative = "greater" if method == "spiegelhalter" else "two-sided"
    result = calibration_test(
        y, p, method=method, alternative=alternative, convention="positive_class"
    )
    statistic, pvalue = MAPIE[method]
    # MAPIE jitters the scores by a relative 1e-8 before sorting them
    assert result.statistic == pytest.approx(statistic(y, p), rel=1e-6)
    if pvalue(y, p) > 1e-9:
        assert result.pvalue == pytest.approx(pvalue(y, p), rel=1e-5)
    else:  # MAPIE's 1 - CDF is all rounding there (even negative); ours is the tail series
        assert 0 < result.pvalue < 1e-9


def test_top_label_tests_use_confidence_and_correctness():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(1500, 4)) * 2
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = rng.integers(0, 4, 1500)
    confidence = proba.max(axis=1)
    correct = (proba.argmax(axis=1) == y).astype(int)
    for method, (statistic, _) in MAPIE.items():
        got = calibration_test(y, proba, method=method).statistic
        assert got == pytest.approx(statistic(correct, confidence), rel=1e-6)


@pytest.mark.parametrize("method", sorted(MAPIE))
@pytest.mark.slow
def test_p_values_are_uniform_under_calibration(method):
    rng = np.random.default_rng(7)
    pvalues = []
    for _ in range(300):
        p = rng.random(400)
        y = rng.random(400) < p
        pvalues.append(calibration_test(y, p, method=method, convention="positive_class").pvalue)
    # asymptotic p-values on 400 samples: roughly uniform, and a 5 % test holds its level
    assert kstest(pvalues, "uniform").pvalue > 0.01
    assert 0.01 <= np.mean(np.array(pvalues) < 0.05) <= 0.1


def test_the_tests_detect_miscalibration():
    rng = np.random.default_rng(8)
    p = rng.random(5000)
    y = rng.random(5000) < 0.5 + 0.6 * (p - 0.5)  # overconfident
    for method in MAPIE:
        assert calibration_test(y, p, method=method, convention="positive_class").pvalue < 1e-6
    two_sided = calibration_test(y, p, convention="positive_class")
    less = calibration_test(y, p, convention="positive_class", alternative="less")
    greater = calibration_test(y, p, convention="positive_class", alternative="greater")
    assert two_sided.statistic == less.statistic == greater.statistic
    assert two_sided.pvalue == pytest.approx(2 * min(less.pvalue, greater.pvalue))


def test_survival_series_agree_at_the_switch_and_with_mapie():
    for x in (0.4, 0.9, 1.0, 1.2, 2.0, 3.0):
        assert _hypothesis_tests._brownian_max_sf(x) == pytest.approx(
            1 - mapie.kolmogorov_smirnov_cdf(x), rel=1e-9
        )
        assert _hypothesis_tests._brownian_range_sf(x) == pytest.approx(
            1 - mapie.kuiper_cdf(x), rel=1e-9
        )
    # beyond the switch tiny p-values stay exact (1 - CDF would round them to 0)
    assert 0 < _hypothesis_tests._brownian_max_sf(12.0) < 1e-30
    assert 0 < _hypothesis_tests._brownian_range_sf(12.0) < 1e-30


def test_ties_weights_and_unpacking():
    p = np.repeat([0.2, 0.5, 0.8], 100)
    y = np.tile(np.arange(100) < 50, 3)
    shuffled = np.random.default_rng(9).permutation(300)
    # tied scores enter the partial sums together, so their order does not matter
    for method in ("ks", "kuiper"):
        options = {"method": method, "convention": "positive_class"}
        first = calibration_test(y, p, **options)
        second = calibration_test(y[shuffled], p[shuffled], **options)
        assert second == pytest.approx(first, rel=1e-12)
    weight = np.random.default_rng(10).random(300)
    for method in MAPIE:
        options = {"method": method, "convention": "positive_class"}
        statistic, pvalue = calibration_test(y, p, sample_weight=weight, **options)
        scaled = calibration_test(y, p, sample_weight=weight * 1e-9, **options)
        assert scaled.statistic == pytest.approx(statistic, rel=1e-10)
        assert scaled.pvalue == pytest.approx(pvalue, rel=1e-8)


def test_bad_options_and_degenerate_scores():
    y, p = [0, 1, 1], [0.2, 0.6, 0.7]
    with pytest.raises(ValueError, match="`method` to be one of"):
        calibration_test(y, p, method="hosmer")
    with pytest.raises(ValueError, match="`alternative='two-sided'` for method='ks'"):
        calibration_test(y, p, method="ks", alternative="less")
    with pytest.raises(ValueError, match="`alternative` to be one of"):
        calibration_test(y, p, alternative="both")
    with pytest.raises(ValueError, match="every weighted score is 0, 1/2 or 1"):
        calibration_test([0, 1], [0.5, 0.5], convention="positive_class")
    with pytest.raises(ValueError, match="every weighted score is 0 or 1"):
        calibration_test([0, 1], [0.0, 1.0], method="kuiper", convention="positive_class")


def test_undefined_statistics_say_why_and_suggest_only_a_defined_test():
    y = np.array([0, 1, 1, 0, 1, 0])
    with pytest.raises(ValueError, match="0, 1/2 or 1.*method='ks' or method='kuiper'"):
        calibration_test(y, [0.5, 1.0, 0.5, 0.0, 1.0, 0.5], convention="positive_class")
    statistic, _ = calibration_test(
        y, [0.5, 1.0, 0.5, 0.0, 1.0, 0.5], method="ks", convention="positive_class"
    )
    assert statistic > 0
    for method in ("spiegelhalter", "ks", "kuiper"):
        with pytest.raises(ValueError, match="every weighted score is 0 or 1") as error:
            calibration_test(y, [0.0, 1.0, 1.0, 0.0, 1.0, 0.0], method=method)
        assert "is defined" not in str(error.value)
    # only rows of positive weight count
    with pytest.raises(ValueError, match="every weighted score is 0 or 1"):
        calibration_test(
            y,
            [0.0, 1.0, 0.3, 0.0, 1.0, 0.0],
            sample_weight=[1, 1, 0, 1, 1, 1],
            method="ks",
            convention="positive_class",
        )
