"""The reports' verdict rule: the joint bootstrap of seeds and test rows, intervals, shape
tests, and claims of the experiments on simulated runs (pure noise and planted effects)."""

import math

import numpy as np
import pytest
from scipy import stats

from benchmarks._methods import CE_B, FOCAL_3
from benchmarks._posthoc import resampled_metric
from benchmarks._presets import make_config
from benchmarks._report import Report
from benchmarks._uncertainty import (
    FAILS,
    FEW,
    HOLDS,
    OPEN,
    Check,
    Estimate,
    above,
    below,
    headline,
    holm,
    increasing,
    minimum,
    most_seeds,
    over_seeds,
    tally,
    u_shape,
)
from benchmarks.experiments import EXPERIMENTS
from benchmarks.experiments._base import Context, Run, mark

N_TEST = 1000
N_CLASSES = 10
GRID = "mukhoti2020"


class _Record:
    """A stored run's stand-in on a shared test set: a classifier right on 80 % of the
    samples that gives its prediction the probability ``confidence`` (plus noise): ECE
    about ``|confidence - 0.8|``."""

    def __init__(self, confidence, seed):
        rng = np.random.default_rng(seed)
        self.meta = {"wall_seconds": 1.0, "fit_seconds": 1.0, "device": "cpu"}
        self.history = {}
        self.arrays = {}
        self._splits = {}
        for split, split_seed in (("val", 1), ("test", 2)):
            y = np.random.default_rng(split_seed).integers(0, N_CLASSES, N_TEST)
            right = rng.random(N_TEST) < 0.8
            predicted = np.where(right, y, (y + rng.integers(1, N_CLASSES, N_TEST)) % N_CLASSES)
            proba = np.full((N_TEST, N_CLASSES), (1 - confidence) / (N_CLASSES - 1))
            proba[np.arange(N_TEST), predicted] = confidence
            logits = np.log(proba) + 0.3 * rng.normal(size=(N_TEST, N_CLASSES))
            self._splits[split] = (logits.astype(np.float32), y)

    def logits(self, split):
        return self._splits[split]


def _context(confidences, first_seed=0, n_seeds=3):
    """A context of the ``focal`` experiment whose methods' runs are simulated with the
    confidence of ``confidences`` (label to confidence; other methods get 0.8)."""
    config = make_config("quick", seeds=n_seeds)
    runs, records = [], {}
    for index, method in enumerate(EXPERIMENTS["focal"].methods(config)):
        for seed in range(n_seeds):
            run = Run(method, seed, {}, f"{method.label}-{first_seed}-{seed}")
            runs.append(run)
            confidence = confidences.get(method.label, 0.8)
            records[run.key] = _Record(confidence, [first_seed, index, seed])
    return Context(config, runs, records, None, "cmd", "cpu", n_resamples=200)


def _focal_claims(context):
    report = Report.__new__(Report)
    report.claims = []
    labels = [m.label for m in EXPERIMENTS["focal"].methods(context.config)]
    EXPERIMENTS["focal"]._claims(report, context, labels)
    return {claim.paper.split(" (")[0]: claim for claim in report.claims}


BETTER = "Focal loss is better calibrated than CE before temperature scaling"


def _outcome(check):
    """The outcome of a check alone (Holm over one check is the check itself)."""
    return holm([check])[0][0]


def _difference(context):
    """Focal's test ECE minus CE's."""
    return context.estimate(FOCAL_3.label, "test_ece", GRID) - context.estimate(
        CE_B.label, "test_ece", GRID
    )


@pytest.mark.slow
def test_pure_noise_difference_is_inconclusive_and_a_planted_one_agrees():
    # Focal and CE simulated alike: the ECE difference is noise, and the rule says so.
    claim = _focal_claims(_context({}))[BETTER]
    assert claim.verdict == "inconclusive" and claim.counts == "1 open"
    outcomes = [
        _outcome(below(_difference(_context({}, first_seed)))) for first_seed in range(1, 21)
    ]
    assert outcomes.count(OPEN) >= 17, outcomes  # 95 % intervals: about 19 of 20
    # CE far more confident than its accuracy: focal's ECE is far lower.
    claim = _focal_claims(_context({CE_B.label: 0.95}))[BETTER]
    assert claim.verdict == "agrees" and claim.counts == "1 holds"
    assert "*holds*" in claim.checks[0] and "claimed < 0" in claim.checks[0]
    for first_seed in range(1, 6):
        assert _outcome(below(_difference(_context({CE_B.label: 0.95}, first_seed)))) == HOLDS
    # The planted effect the other way round: focal far worse calibrated.
    claim = _focal_claims(_context({FOCAL_3.label: 0.95}))[BETTER]
    assert claim.verdict == "disagrees"


def test_the_old_rule_would_have_decided_the_noise():
    # The rule before intervals called the claim from the sign of the mean difference
    # alone: on pure noise it always decides.
    difference = _difference(_context({}))
    assert difference.point != 0.0 and _outcome(below(difference)) == OPEN


def test_rows_are_resampled_alike_for_every_run():
    # Two predictions whose every row's confidence sits in the top bin, with the same
    # correctness: their ECEs differ by 0.01 on every resample only if the resamples pair.
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 5000)
    wrong = rng.random(5000) < 0.3
    labels = np.where(wrong, (y + 1) % 4, y)  # the predicted class
    first = np.full((5000, 4), 0.05 / 3)
    first[np.arange(5000), labels] = 0.95
    second = np.full((5000, 4), 0.06 / 3)
    second[np.arange(5000), labels] = 0.94
    value_a, a = resampled_metric("ece", y, first, 15, 200)
    value_b, b = resampled_metric("ece", y, second, 15, 200)
    assert value_a - value_b == pytest.approx(0.01)
    assert value_a == pytest.approx(0.95 - np.mean(~wrong))
    np.testing.assert_allclose(a - b, 0.01, atol=1e-12)
    assert np.ptp(a) > 0.01  # the resamples do vary


def test_seed_resampling_gives_the_variance_of_the_mean_over_seeds():
    values = [1.0, 1.6, 1.1]
    estimate = over_seeds("m", values, n_resamples=20000)
    assert estimate.point == pytest.approx(np.mean(values))
    # stretched by sqrt(k / (k - 1)): the replicates' variance is s^2 / k, not (k-1)/k of it
    assert np.var(estimate.replicates) == pytest.approx(np.var(values, ddof=1) / 3, rel=0.05)
    assert np.ptp(estimate.rows) == 0.0  # no test rows behind these numbers
    # all seed variation: Satterthwaite's degrees of freedom are the seeds' (k - 1 = 2)
    assert estimate.df() == pytest.approx(2.0)
    low, high = estimate.interval()
    half = stats.t.ppf(0.975, 2) * np.std(estimate.replicates, ddof=1)
    assert (low, high) == pytest.approx((estimate.point - half, estimate.point + half))
    # the same label draws the same seeds for every number of the method (paired)
    again = over_seeds("m", [2.0, 2.6, 2.1], n_resamples=20000)
    np.testing.assert_allclose(again.replicates - estimate.replicates, 1.0)


def test_rows_only_noise_uses_the_normal_quantile_and_one_seed_alone_is_not_measured():
    rng = np.random.default_rng(1)
    replicates = 0.05 + 0.01 * rng.normal(size=(1, 1000))
    estimate = over_seeds("m", [0.05], replicates)
    assert math.isinf(estimate.df())
    low, high = estimate.interval()
    assert high - low == pytest.approx(2 * 1.959964 * np.std(replicates, ddof=1))
    alone = over_seeds("m", [0.05])  # one run, a number of no test rows: nothing varies
    assert not alone.measured and math.isnan(alone.interval()[0])
    assert alone.text(100.0) == "5.00 [n/a]" and _outcome(above(alone)) == OPEN


def test_checks_and_their_p_values_match_the_intervals():
    sure = over_seeds("a", [1.0, 1.1, 0.9])
    assert _outcome(above(sure)) == HOLDS and _outcome(below(sure)) == FAILS
    assert _outcome(below(sure, 2.0)) == HOLDS
    noise = over_seeds("b", [-1.0, 1.0, 0.1])
    assert _outcome(above(noise)) == OPEN and _outcome(below(noise)) == OPEN
    check = below(sure, 2.0, label="a", scale=100.0)
    assert check.claimed == "< 200" and check.value == sure.text(100.0) and check.side == 1
    # an interval that excludes the bound is a p-value below 0.05, on either side
    rng = np.random.default_rng(4)
    for index in range(50):
        estimate = over_seeds(f"m{index}", rng.normal(0.3, 0.5, size=4))
        low, high = estimate.interval()
        p_value, side = estimate.p_value(0.0)
        assert (p_value < 0.05) == (low > 0 or high < 0)
        assert side == np.sign(estimate.point)
    assert mark(sure) == "▲" and mark(-sure) == "▼" and mark(noise) in ("△", "▽")
    assert tally([HOLDS, HOLDS, FAILS, OPEN, OPEN]) == "2 hold, 1 fails, 2 open"
    assert tally([HOLDS, FAILS, FAILS]) == "1 holds, 2 fail"


def test_headline_reads_the_decided_checks():
    assert headline([HOLDS, HOLDS]) == "agrees"
    assert headline([HOLDS, OPEN, OPEN, OPEN]) == "agrees"  # all decided checks hold
    assert headline([FAILS, OPEN, OPEN, OPEN]) == "disagrees"  # all decided checks fail
    assert headline([FAILS, FAILS]) == "disagrees"
    # one holding check among three failing ones is not "agreement in part"
    assert headline([HOLDS, FAILS, FAILS, FAILS]) == "mixed"
    assert headline([HOLDS, OPEN, FAILS]) == "mixed"
    assert headline([OPEN, OPEN]) == "inconclusive"
    with pytest.raises(ValueError, match="at least one check"):
        headline([])


def _check(p_value, side=1):
    return Check("x", "v", "> 0", p_value, side)


def test_holm_corrects_the_checks_of_a_claim():
    # each below 0.05, and Holm decides all three: 0.01 < 0.05/3, 0.02 < 0.05/2, 0.04 < 0.05
    results = holm([_check(0.04), _check(0.01, -1), _check(0.02)])
    assert [outcome for outcome, _ in results] == [HOLDS, FAILS, HOLDS]
    assert [p for _, p in results] == pytest.approx([0.04, 0.03, 0.04])
    # two checks at 0.03: each alone would hold, together neither is decided
    assert [outcome for outcome, _ in holm([_check(0.03), _check(0.03)])] == [OPEN, OPEN]
    # Holm steps down: once one check is not decided, no larger p-value is
    results = holm([_check(0.001), _check(0.04), _check(0.03, -1)])
    assert [outcome for outcome, _ in results] == [HOLDS, OPEN, OPEN]
    # a check without a p-value stays open and counts among the claim's checks
    results = holm([_check(float("nan"), 0), _check(0.03)])
    assert [outcome for outcome, _ in results] == [OPEN, OPEN]
    # a decided check of no side (a rise with a step down) stays open
    assert holm([_check(0.001, 0)])[0][0] == OPEN


@pytest.mark.slow
def test_holm_keeps_a_claim_of_seven_noise_checks_at_five_percent():
    # Seven checks of pure noise: without a correction some check holds in about
    # 1 - 0.975 ** 7 = 16 % of the claims; with Holm in at most 5 %.
    rng = np.random.default_rng(5)
    trials, uncorrected, corrected = 300, 0, 0
    for trial in range(trials):
        checks = [
            below(over_seeds(f"n{trial}-{i}", rng.normal(size=5), n_resamples=200))
            for i in range(7)
        ]
        uncorrected += any(c.p_value < 0.05 and c.side > 0 for c in checks)
        corrected += any(outcome == HOLDS for outcome, _ in holm(checks))
    assert uncorrected / trials == pytest.approx(0.16, abs=0.06)
    assert corrected / trials <= 0.06


def test_best_of_n_degrees_of_freedom_come_from_the_methods_that_carry_it():
    rng = np.random.default_rng(6)
    n = 2000
    lowest = over_seeds("low", 1.0 + 0.1 * rng.normal(size=5), n_resamples=n)
    others = [
        over_seeds(f"high{i}", 5.0 + 0.1 * rng.normal(size=5), n_resamples=n) for i in range(6)
    ]
    best = minimum([lowest, *others])
    # only "low" is ever the minimum: its 4 degrees of freedom, not the 28 of all seven
    assert best.df() == pytest.approx(4.0, rel=0.01)
    np.testing.assert_allclose(best.replicates, lowest.replicates)
    # a difference of two methods of equal spread: Satterthwaite's 4 + 4
    a = over_seeds("a", [1.0, 1.2, 0.8, 1.1, 0.9], n_resamples=n)
    b = over_seeds("b", [2.0, 2.2, 1.8, 2.1, 1.9], n_resamples=n)
    assert (a - b).df() == pytest.approx(8.0, rel=0.15)
    # one method with a much larger spread carries the variance alone
    c = over_seeds("c", [1.0, 3.0, -1.0, 2.0, 0.0], n_resamples=n)
    assert (c - b).df() == pytest.approx(4.0, rel=0.1)


def test_grid_quantities_are_tested_on_the_seeds():
    # 5 of 5 seeds in the band: p = 1/32 (one-sided binomial against half the seeds)
    check = most_seeds([1.0, 1.1000000000000001, 0.9, 1.0, 1.0], 0.9, 1.1, label="T")
    assert check.p_value == pytest.approx(1 / 32) and check.side == 1
    assert _outcome(check) == HOLDS
    assert check.value == "5 of 5 seeds (1.00, 1.10, 0.90, 1.00, 1.00)"
    assert check.claimed == "in [0.9, 1.1] for most seeds"
    # 3 seeds at 1 and 2 at 0.9: the mean's t-interval holds 0.9 (a check of the mean was
    # open), while every seed lies in the band
    assert over_seeds("T", [1.0, 1.0, 1.0, 0.9, 0.9]).interval()[0] < 0.9
    assert _outcome(most_seeds([1.0, 1.0, 1.0, 0.9, 0.9], 0.9, 1.1)) == HOLDS
    # 4 of 5: p = 6/32, open; 0 of 5 fails; 3 of 3 cannot decide (p = 1/8)
    assert _outcome(most_seeds([1.0, 1.0, 1.0, 1.0, 1.5], 0.9, 1.1)) == OPEN
    assert _outcome(most_seeds([2.0, 2.1, 1.7, 2.4, 2.6], 0.9, 1.1)) == FAILS
    assert _outcome(most_seeds([1.0, 1.0, 1.0], 0.9, 1.1)) == OPEN
    # diverged seeds are left out; no seed at all cannot be decided
    assert most_seeds([1.0, float("nan")], 0.9, 1.1).value.startswith("1 of 1 seeds")
    assert _outcome(most_seeds([], 0.9, 1.1)) == OPEN


def test_intervals_are_clipped_and_marked_with_two_seeds():
    # a temperature from 2 seeds: t with about 1 degree of freedom reaches below 0
    temperature = over_seeds("ts", [0.5, 3.0], bounds=(0.0, math.inf))
    low, high = temperature.interval()
    assert low == 0.0 and high > 3.0
    assert temperature.text().startswith("1.75 [0.00, ") and temperature.text().endswith(FEW)
    # the check of the number is unchanged by the clipping
    assert temperature.p_value(0.0)[0] > 0.05
    # three seeds: no mark
    assert not over_seeds("t3", [1.0, 1.5, 2.0], bounds=(0.0, math.inf)).text().endswith(FEW)
    # an error of 1 - accuracy keeps the accuracy's range
    accuracy = over_seeds("acc", [0.99, 0.5], bounds=(0.0, 1.0))
    error = 1.0 - accuracy
    assert error.bounds == (0.0, 1.0) and error.interval()[0] >= 0.0
    assert (accuracy - accuracy).bounds == (-math.inf, math.inf)


def _noise_curve(rng, index, means, seed_sd=0.4, n_seeds=3):
    return [
        over_seeds(f"curve{index}-{i}", mean + seed_sd * rng.normal(size=n_seeds), n_resamples=400)
        for i, mean in enumerate(means)
    ]


@pytest.mark.slow
def test_shape_claims_on_pure_noise_are_rarely_called():
    # Seven points of one flat curve, 3 seeds each, the spread of the cpu reports' ECE with TS
    # (stds up to 0.6 points): "the lowest point lies inside" holds 5 times in 7 by chance;
    # the test of the shape against a flat curve holds about 5 % of the time.
    rng = np.random.default_rng(2)
    trials, interior, held = 200, 0, 0
    for index in range(trials):
        curve = _noise_curve(rng, index, [1.3] * 7)
        lowest = int(np.argmin([e.point for e in curve]))
        interior += 0 < lowest < 6
        held += _outcome(u_shape(curve)) == HOLDS
    assert interior / trials == pytest.approx(5 / 7, abs=0.08)
    assert held / trials <= 0.10
    rising = [
        _outcome(increasing(_noise_curve(rng, 1000 + i, [2.0] * 3), [1, 2, 3])[0])
        for i in range(200)
    ]
    assert rising.count(HOLDS) / 200 <= 0.10


def test_planted_shapes_are_found():
    rng = np.random.default_rng(3)
    curve = _noise_curve(rng, 0, [3.0, 2.0, 1.5, 1.0, 1.5, 2.0, 3.0], seed_sd=0.1)
    shape = u_shape(curve)
    assert _outcome(shape) == HOLDS and shape.p_value < 0.01
    assert _outcome(u_shape([-e for e in curve])) == FAILS  # the inverted curve
    check, slope = increasing(_noise_curve(rng, 1, [2.0, 2.5, 3.0], seed_sd=0.05), [1, 2, 3])
    assert _outcome(check) == HOLDS and slope.point == pytest.approx(0.5, abs=0.1)
    # a clear trend with one clear step down is not monotone
    check, _ = increasing(_noise_curve(rng, 2, [1.0, 3.0, 2.5, 5.0], seed_sd=0.02), [1, 2, 3, 4])
    assert _outcome(check) == OPEN and check.value.endswith("a step down")
    with pytest.raises(ValueError, match="at least 3 points"):
        u_shape(curve[:2])


def test_estimate_arithmetic_keeps_replicates_and_seeds():
    a = over_seeds("a", [1.0, 2.0, 3.0], n_resamples=50)
    b = over_seeds("b", [1.0, 1.0], n_resamples=50)
    total = 2.0 - a * 3 + b / 2
    assert total.point == pytest.approx(2.0 - 6.0 + 0.5)
    np.testing.assert_allclose(total.replicates, 2.0 - 3 * a.replicates + b.replicates / 2)
    assert dict(total.seeds) == {"a": 3, "b": 2}
    np.testing.assert_allclose(total.part("a"), 2.0 - 3 * a.replicates + b.rows / 2)
    constant = Estimate.constant(1.5, 50)
    assert constant.interval() == (1.5, 1.5) and not (constant - 1.5).point
