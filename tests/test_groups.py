"""Calibration by group: per-group metrics, corrected tests, detectable shifts, scorers."""

import re

import numpy as np
import pandas as pd
import pytest
import sklearn
from scipy.stats import norm
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold, cross_validate

from sklearn_calib.datasets import make_miscalibrated_groups
from sklearn_calib.metrics import (
    adaptive_calibration_error,
    adjust_pvalues,
    calibration_audit,
    calibration_error_ci,
    calibration_report,
    calibration_test,
    classwise_calibration_error,
    debiased_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    reliability_diagram,
    smooth_calibration_error,
    smooth_ece,
    top_label_calibration_error,
    worst_group_calibration_error,
)
from sklearn_calib.metrics._core._group_rows import encode_groups, metric_by_group
from sklearn_calib.metrics._core._registry import KERNELS
from sklearn_calib.metrics._functions._predictions import check_predictions
from sklearn_calib.metrics._statistics._groups import (
    calibrated_ece_quantiles,
    detectable_shift,
    format_audit,
)
from sklearn_calib.scoring import get_scorer, make_worst_group_scorer


def shifted_groups(n=3000, seed=0):
    """Positive-class scores calibrated in groups "x" and "z", too low by 0.15 in "y"."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.8, n)
    groups = rng.choice(np.array(["x", "y", "z"]), n, p=[0.5, 0.3, 0.2])
    truth = p + np.where(groups == "y", 0.15, 0.0)
    y = (rng.random(n) < truth).astype(int)
    return y, p, groups


def three_classes(n=1500, seed=1):
    rng = np.random.default_rng(seed)
    logits = 2 * rng.normal(size=(n, 3))
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = (proba.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1)
    groups = rng.integers(0, 4, n)
    y[groups == 3] = np.where(y[groups == 3] == 2, 0, y[groups == 3])  # group 3 lacks class 2
    return y, proba, groups


# ---------------------------------------------------------------------- group encoding


def test_groups_are_the_sorted_labels_or_the_distinct_rows_of_columns():
    codes, names = encode_groups(np.array(["b", "a", "b", "c"]), 4)
    assert names == ["a", "b", "c"]
    np.testing.assert_array_equal(codes, [1, 0, 1, 2])
    columns = pd.DataFrame({"sex": ["F", "M", "F", "F"], "age": [30, 30, 50, 30]})
    codes, names = encode_groups(columns, 4)
    assert names == [("F", 30), ("F", 50), ("M", 30)]
    assert [names[c] for c in codes] == list(columns.itertuples(index=False, name=None))
    assert isinstance(names[0][1], int)  # a DataFrame keeps each column's type


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        (np.arange(3), r"one row per sample \(4\), got 3"),
        (np.array(["a", 1, "b", "a"], dtype=object), "cannot be compared"),
        (np.zeros((4, 1, 1)), r"shape \(n_samples,\) or \(n_samples, n_columns\)"),
    ],
)
def test_bad_groups_are_named(groups, message):
    with pytest.raises(ValueError, match=message):
        encode_groups(groups, 4)


MISSING = r"without missing values, got {} in {} of 4 rows of `groups` column {}"


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        (np.array([0.0, np.nan, 1.0, np.nan]), MISSING.format("nan", 2, 0)),
        (np.array([0.0, np.nan, 1.0, np.nan], dtype=object), MISSING.format("nan", 2, 0)),
        (np.array(["a", None, "b", "a"], dtype=object), MISSING.format("None", 1, 0)),
        (
            np.array(["a", None, np.nan, pd.NA], dtype=object),
            MISSING.format("<NA>, None, nan", 3, 0),
        ),
        (pd.Series(["a", "b", None, "a"], dtype="string"), MISSING.format("<NA>", 1, 0)),
        (pd.Series([1, None, 2, 2], dtype="Int64"), MISSING.format("nan", 1, 0)),
        (
            np.array(["2024-01-01", "NaT", "NaT", "NaT"], dtype="datetime64[D]"),
            MISSING.format("NaT", 3, 0),
        ),
        (
            pd.DataFrame({"a": ["x", "y", "x", "y"], "b": [1.0, 2.0, np.nan, 1.0]}),
            MISSING.format("nan", 1, 1),
        ),
    ],
)
def test_missing_group_labels_are_refused_and_named(groups, message):
    # a NaN is unequal to itself: read as labels, each NaN row would be its own group
    with pytest.raises(ValueError, match=message):
        encode_groups(groups, 4)


def test_metrics_refuse_missing_group_labels_instead_of_one_group_per_row():
    y, p, groups = shifted_groups(200)
    groups = groups.astype(object)
    groups[[3, 7]] = np.nan
    with pytest.raises(ValueError, match="got nan in 2 of 200 rows"):
        expected_calibration_error(y, p, groups=groups)
    with pytest.raises(ValueError, match="got nan in 2 of 200 rows"):
        calibration_audit(y, p, groups, n_resamples=20)
    groups[[3, 7]] = "missing"
    assert "missing" in expected_calibration_error(y, p, groups=groups)


# ---------------------------------------------------------------------- per-group metrics


@pytest.mark.parametrize(
    ("metric", "options"),
    [
        (expected_calibration_error, {"n_bins": 10}),
        (smooth_ece, {}),
        (debiased_calibration_error, {}),
        (negative_log_likelihood, {}),
        (classwise_calibration_error, {}),
    ],
)
@pytest.mark.parametrize("weighted", [False, True])
def test_per_group_values_are_the_metric_on_each_groups_rows(metric, options, weighted):
    y, proba, groups = three_classes()
    weight = np.linspace(0.2, 3.0, len(y)) if weighted else None
    data = check_predictions(y, proba, sample_weight=weight)
    values = metric_by_group(KERNELS[metric].compute, data, groups, **options)
    assert list(values) == [0, 1, 2, 3]
    for g, value in values.items():
        rows = groups == g
        kept = None if weight is None else weight[rows]
        # group 3 lacks class 2: its labels must be named
        expected = metric(y[rows], proba[rows], labels=[0, 1, 2], sample_weight=kept, **options)
        assert value == expected


@pytest.mark.parametrize(
    "metric",
    [
        expected_calibration_error,
        maximum_calibration_error,
        adaptive_calibration_error,
        classwise_calibration_error,
        smooth_calibration_error,
        smooth_ece,
        debiased_calibration_error,
        top_label_calibration_error,
    ],
)
def test_calibration_errors_take_groups(metric):
    y, proba, groups = three_classes()
    weight = np.linspace(0.5, 2.0, len(y))
    values = metric(y, proba, groups=groups, sample_weight=weight)
    assert list(values) == [0, 1, 2, 3]
    for g, value in values.items():
        rows = groups == g
        expected = metric(y[rows], proba[rows], labels=[0, 1, 2], sample_weight=weight[rows])
        assert value == expected


def test_metric_options_pass_through_to_each_group():
    y, p, groups = shifted_groups()
    values = expected_calibration_error(
        y, p, groups=groups, n_bins=7, strategy="quantile", convention="positive_class"
    )
    rows = groups == "y"
    assert values["y"] == expected_calibration_error(
        y[rows], p[rows], n_bins=7, strategy="quantile", convention="positive_class"
    )
    with_bandwidth = smooth_ece(y, p, groups=groups, return_bandwidth=True)
    assert with_bandwidth["x"] == smooth_ece(
        y[groups == "x"], p[groups == "x"], return_bandwidth=True, convention="positive_class"
    )


def test_worst_group_error_is_the_largest_group_error():
    y, p, groups = shifted_groups()
    per_group = expected_calibration_error(y, p, groups=groups, n_bins=10)
    worst = worst_group_calibration_error(y, p, groups=groups, n_bins=10)
    assert worst == max(per_group.values()) == per_group["y"]
    smooth = worst_group_calibration_error(y, p, groups=groups, metric=smooth_ece)
    positive = {"convention": "positive_class"}
    assert smooth == max(smooth_ece(y[groups == g], p[groups == g], **positive) for g in "xyz")
    with pytest.raises(ValueError, match="needs `groups`.*set_score_request"):
        worst_group_calibration_error(y, p)


def test_worst_group_error_of_a_metric_of_ones_own():
    y, p, groups = shifted_groups()

    def mean_gap(y_true, y_prob, *, labels=None, sample_weight=None):
        return abs(float(np.average(y_prob[:, 1] - (y_true == 1), weights=sample_weight)))

    weight = np.linspace(0.5, 2.0, len(y))
    worst = worst_group_calibration_error(
        y, p, groups=groups, metric=mean_gap, sample_weight=weight
    )
    gaps = [
        abs(np.average(p[groups == g] - y[groups == g], weights=weight[groups == g])) for g in "xyz"
    ]
    assert worst == pytest.approx(max(gaps), rel=1e-12)
    assert max(gaps) == gaps[1] > 0.1


def log_odds_shifted_group(seed=2):
    """A binary model calibrated in group 0 whose log-odds are 0.8 too low in group 1."""
    options = {"group_proportions": (0.5, 0.5), "shifts": (0.0, 0.8), "slopes": (1.0, 1.0)}
    p, groups, y, _ = make_miscalibrated_groups(4000, random_state=seed, **options)
    return y, p, groups


GROUPED_METRICS = [
    (expected_calibration_error, {}),
    (maximum_calibration_error, {}),
    (adaptive_calibration_error, {}),
    (smooth_calibration_error, {"bandwidth": 0.05}),
    (smooth_ece, {}),
    (debiased_calibration_error, {}),
]


@pytest.mark.parametrize(("metric", "options"), GROUPED_METRICS)
@pytest.mark.slow
def test_binary_values_by_group_are_of_the_positive_class_by_default(metric, options):
    y, p, groups = log_odds_shifted_group()
    by_group = metric(y, p, groups=groups, **options)
    for g, value in by_group.items():
        rows = groups == g
        assert value == metric(y[rows], p[rows], convention="positive_class", **options)
    # without groups the default stays the top label; with it, the convention given holds
    assert metric(y, p, **options) == metric(y, p, convention="top_label", **options)
    top = metric(y, p, groups=groups, convention="top_label", **options)
    assert top[1] == metric(y[groups == 1], p[groups == 1], convention="top_label", **options)
    # two columns are a binary problem too; beyond two classes the top label is judged
    assert metric(y, np.column_stack([1 - p, p]), groups=groups, **options) == by_group
    y3, proba, groups3 = three_classes()
    assert metric(y3, proba, groups=groups3, **options) == metric(
        y3, proba, groups=groups3, convention="top_label", **options
    )


@pytest.mark.slow
def test_the_positive_class_finds_the_shifted_group_the_top_label_hides():
    y, p, groups = log_odds_shifted_group()
    audit = calibration_audit(y, p, groups, n_resamples=100, random_state=0)
    assert audit.convention == "positive_class"
    np.testing.assert_array_equal(audit.table["miscalibrated"], [False, True])
    assert audit.worst_group == 1 and audit.worst_ece > 0.1 > audit.table["ece"][0]
    assert worst_group_calibration_error(y, p, groups=groups) == audit.worst_ece
    # folded onto [0.5, 1], the shift nearly cancels: both groups look alike
    folded = calibration_audit(
        y, p, groups, convention="top_label", n_resamples=100, random_state=0
    )
    assert not folded.table["miscalibrated"].any()
    assert abs(folded.table["ece"][1] - folded.table["ece"][0]) < 0.01
    # the report judges all rows by the top label and the groups by the positive class
    report = calibration_report(
        y, p, groups=groups, n_resamples=50, random_state=0, output_dict=True
    )
    assert report["convention"] == "top_label"
    assert report["errors"]["ece"]["estimate"] == expected_calibration_error(y, p)
    assert report["groups"]["convention"] == "positive_class"
    assert report["groups"]["table"]["ece"][1] == audit.table["ece"][1]
    ci = calibration_error_ci(
        expected_calibration_error, y, p, convention="auto", n_resamples=20, random_state=0
    )
    assert ci.estimate == expected_calibration_error(y, p, convention="top_label")
    with pytest.raises(ValueError, match="`convention` to be one of"):
        expected_calibration_error(y, p, groups=groups, convention="positive")


def test_calibration_error_ci_points_to_the_audit_for_groups():
    y, p, groups = shifted_groups()
    with pytest.raises(ValueError, match="takes no `groups`; calibration_audit"):
        calibration_error_ci(expected_calibration_error, y, p, groups=groups)


# -------------------------------------------------------------- multiple-testing corrections


def holm_by_hand(pvalues):
    """Holm's step-down procedure written out: the i-th smallest p-value times (m - i),
    never below the adjusted p-value before it, capped at 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * m, 0.0
    for step, i in enumerate(order):
        running = max(running, min(1.0, (m - step) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def benjamini_hochberg_by_hand(pvalues):
    """Benjamini-Hochberg's step-up procedure written out, from the largest p-value."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * m, 1.0
    for step in range(m - 1, -1, -1):
        i = order[step]
        running = min(running, m * pvalues[i] / (step + 1))
        adjusted[i] = running
    return adjusted


def test_holm_and_benjamini_hochberg_on_known_pvalues():
    pvalues = [0.01, 0.04, 0.03, 0.005]
    # Holm: 4 x 0.005, 3 x 0.01, 2 x 0.03 = 0.06, max(0.06, 1 x 0.04)
    np.testing.assert_allclose(adjust_pvalues(pvalues), [0.03, 0.06, 0.06, 0.02])
    # BH: 0.005 x 4/1, min(0.01 x 4/2, ...), 0.03 x 4/3, 0.04 x 4/4
    np.testing.assert_allclose(adjust_pvalues(pvalues, "fdr_bh"), [0.02, 0.04, 0.04, 0.02])
    rng = np.random.default_rng(0)
    many = np.concatenate([rng.random(20) ** 3, [0.5, 0.5, 1.0]])
    np.testing.assert_allclose(adjust_pvalues(many), holm_by_hand(many.tolist()))
    np.testing.assert_allclose(
        adjust_pvalues(many, "fdr_bh"), benjamini_hochberg_by_hand(many.tolist())
    )
    with pytest.raises(ValueError, match="`correction` to be one of"):
        adjust_pvalues(pvalues, "bonferroni")


@pytest.mark.parametrize(
    ("pvalues", "message"),
    [
        ([-0.1, 0.5], r"Expected `pvalues` in \[0, 1\], got -0.1 \(1 of 2\)"),
        ([0.2, 1.5, np.nan], r"in \[0, 1\], got 1.5, nan \(2 of 3\)"),
        ([0.2, np.inf], r"in \[0, 1\], got inf"),
        (0.3, r"Expected `pvalues` of shape \(m,\), got shape \(\)"),
        ([[0.1, 0.2], [0.3, 0.4]], r"of shape \(m,\), got shape \(2, 2\)"),
        (["0.1", "0.2"], "Expected `pvalues` to hold numbers"),
    ],
)
def test_adjust_pvalues_refuses_what_is_not_pvalues(pvalues, message):
    for method in ("holm", "fdr_bh"):
        with pytest.raises(ValueError, match=message):
            adjust_pvalues(pvalues, method)


def test_adjust_pvalues_of_no_and_of_boundary_pvalues():
    assert adjust_pvalues([]).shape == (0,)
    np.testing.assert_array_equal(adjust_pvalues([0.0, 1.0, 0.5]), [0.0, 1.0, 1.0])
    np.testing.assert_array_equal(adjust_pvalues([True, False], "fdr_bh"), [1.0, 0.0])


# ------------------------------------------------------------------------------- the audit


@pytest.mark.parametrize("correction", ["holm", "fdr_bh"])
@pytest.mark.parametrize("test", ["ks", "kuiper", "spiegelhalter"])
@pytest.mark.slow
def test_audit_rows_are_each_groups_metrics_and_corrected_tests(correction, test):
    y, p, groups = shifted_groups()
    audit = calibration_audit(
        y,
        p,
        groups,
        convention="positive_class",
        test=test,
        correction=correction,
        n_bins=10,
        n_resamples=100,
        random_state=0,
    )
    table = audit.table
    assert table["group"] == ["x", "y", "z"]
    for i, g in enumerate(table["group"]):
        rows = groups == g
        assert table["n_samples"][i] == rows.sum()
        common = {"convention": "positive_class"}
        assert table["ece"][i] == expected_calibration_error(y[rows], p[rows], n_bins=10, **common)
        assert table["smooth_ece"][i] == smooth_ece(y[rows], p[rows], **common)
        assert table["debiased_ce"][i] == debiased_calibration_error(
            y[rows], p[rows], n_bins=10, **common
        )
        statistic, pvalue = calibration_test(y[rows], p[rows], method=test, **common)
        assert (table["statistic"][i], table["pvalue"][i]) == (statistic, pvalue)
        for key in ("ece", "smooth_ece", "debiased_ce"):
            assert table[f"{key}_low"][i] <= table[f"{key}_high"][i]
    by_hand = holm_by_hand if correction == "holm" else benjamini_hochberg_by_hand
    np.testing.assert_allclose(table["pvalue_adjusted"], by_hand(table["pvalue"].tolist()))
    np.testing.assert_array_equal(table["miscalibrated"], table["pvalue_adjusted"] <= 0.05)


@pytest.mark.slow
def test_audit_finds_the_shifted_group_and_only_it():
    y, p, groups = shifted_groups(6000)
    audit = calibration_audit(
        y, p, groups, convention="positive_class", n_resamples=200, random_state=0
    )
    np.testing.assert_array_equal(audit.table["miscalibrated"], [False, True, False])
    assert audit.worst_group == "y" and audit.n_miscalibrated == 1
    assert audit.worst_ece == audit.table["ece"][1] > audit.worst_ece_null_high
    # the calibrated groups' errors are within their noise floor, the shifted one's is not
    ece, null = audit.table["ece"], audit.table["ece_null_high"]
    np.testing.assert_array_equal(ece <= null, [True, False, True])


@pytest.mark.parametrize("correction", ["holm", "fdr_bh"])
@pytest.mark.slow
def test_calibration_report_ends_with_the_audit_of_the_groups(correction):
    y, p, groups = shifted_groups()
    options = {"convention": "positive_class", "n_resamples": 50, "random_state": 0}
    report = calibration_report(
        y, p, groups=groups, correction=correction, output_dict=True, **options
    )
    table = report["groups"]["table"]
    assert table["group"] == ["x", "y", "z"]
    for i, g in enumerate(table["group"]):
        rows = groups == g
        assert table["ece"][i] == expected_calibration_error(
            y[rows], p[rows], convention="positive_class"
        )
    by_hand = holm_by_hand if correction == "holm" else benjamini_hochberg_by_hand
    np.testing.assert_allclose(table["pvalue_adjusted"], by_hand(table["pvalue"].tolist()))
    assert report["groups"]["worst_group"] == "y"
    text = calibration_report(y, p, groups=groups, correction=correction, **options)
    assert "Calibration by group: 3 groups, positive-class convention, Kolmogorov" in text
    assert "worst group by ECE: y (" in text
    assert "groups" not in calibration_report(y, p, output_dict=True, **options)


@pytest.mark.slow
def test_audit_flags_intervals_that_exclude_their_estimate():
    # group "exact": scores 0.3 and 0.7 with exactly 30 % and 70 % positives, an ECE of 0;
    # almost every resample is off balance, so the interval lies above the estimate
    p_exact = np.repeat([0.3, 0.7], 100)
    y_exact = np.concatenate([np.arange(100) < 30, np.arange(100) < 70]).astype(int)
    y, p, groups = shifted_groups(1000)
    y, p = np.concatenate([y, y_exact]), np.concatenate([p, p_exact])
    groups = np.concatenate([groups, np.full(200, "exact")])
    audit = calibration_audit(
        y, p, groups, convention="positive_class", n_resamples=200, random_state=0
    )
    table = audit.table
    exact = table["group"].index("exact")
    assert table["ece"][exact] == pytest.approx(0.0, abs=1e-12)
    assert table["ece_low"][exact] > 0.005
    assert "lies above the estimate" in table["ece_flags"][exact]["excludes_estimate"]
    for key in ("ece", "smooth_ece", "debiased_ce"):
        outside = (table[key] < table[f"{key}_low"]) | (table[key] > table[f"{key}_high"])
        suspect = outside | (table[f"{key}_low"] >= table[f"{key}_high"])
        np.testing.assert_array_equal([bool(f) for f in table[f"{key}_flags"]], suspect)
    text = format_audit(audit)
    assert re.search(r"\nexact .* \(1\)\n", text)
    assert re.search(r"\n\(1\) exact ECE, exact smECE(, \w+ ECE)*: the interval lies above", text)
    report = calibration_report(
        y, p, groups=groups, convention="positive_class", n_resamples=200, random_state=0
    )
    assert "(1) exact ECE, exact smECE, " in report


@pytest.mark.slow
def test_audit_of_intersections_of_several_columns():
    y, p, groups = shifted_groups()
    band = np.where(p > 0.5, "high", "low")
    audit = calibration_audit(
        y,
        p,
        pd.DataFrame({"group": groups, "band": band}),
        convention="positive_class",
        n_resamples=50,
        random_state=0,
    )
    assert audit.table["group"][:2] == [("x", "high"), ("x", "low")]
    rows = (groups == "x") & (band == "low")
    assert audit.table["ece"][1] == expected_calibration_error(
        y[rows], p[rows], convention="positive_class"
    )


def test_audit_of_a_multiclass_problem_with_a_group_lacking_a_class():
    y, proba, groups = three_classes()
    audit = calibration_audit(y, proba, groups, n_resamples=50, random_state=0)
    rows = groups == 3
    assert audit.table["ece"][3] == expected_calibration_error(
        y[rows], proba[rows], labels=[0, 1, 2]
    )


def test_audit_skips_small_groups_and_names_them():
    y, p, groups = shifted_groups(600)
    groups = groups.astype(object)
    groups[:5] = "tiny"
    with pytest.warns(UserWarning, match=r"1 group\(s\) with fewer than 10 samples.*'tiny': 5"):
        audit = calibration_audit(y, p, groups, n_resamples=20, random_state=0)
    assert "tiny" not in audit.table["group"] and audit.skipped == {"tiny": 5}
    with pytest.raises(ValueError, match="at least one group with 1000 samples"):
        with pytest.warns(UserWarning):
            calibration_audit(y, p, groups, min_group_size=1000, n_resamples=20)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"correction": "bonferroni"}, "`correction` to be one of"),
        ({"test": "chi2"}, "`test` to be one of"),
        ({"alpha": 1.5}, r"`alpha` to be a number in \(0, 1\)"),
        ({"power": 0}, r"`power` to be a number in \(0, 1\)"),
        ({"min_group_size": 0}, "`min_group_size` to be an integer >= 1"),
    ],
)
def test_audit_rejects_bad_options(options, message):
    y, p, groups = shifted_groups(200)
    with pytest.raises(ValueError, match=message):
        calibration_audit(y, p, groups, **options)


# ------------------------------------------------------------------- detectable shift


def ks_critical_value_by_hand(level):
    """Solve P(max_[0,1] |B| > c) = level with the theta series of the maximum's law."""
    k = np.arange(50)

    def survival(x):
        return 1 - 4 / np.pi * np.sum(
            (-1.0) ** k / (2 * k + 1) * np.exp(-((2 * k + 1) ** 2) * np.pi**2 / (8 * x * x))
        )

    low, high = 0.5, 10.0
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if survival(middle) > level else (low, middle)
    return (low + high) / 2


def test_detectable_shift_formula_by_hand():
    rng = np.random.default_rng(0)
    score = rng.uniform(0.6, 0.95, 500)
    level, power = 0.05 / 3, 0.8
    sigma = np.sqrt(np.sum(score * (1 - score)))
    expected = (ks_critical_value_by_hand(level) + norm.ppf(power)) * sigma / 500
    assert detectable_shift(score, None, "ks", level, power) == pytest.approx(expected, rel=1e-6)
    a = 1 - 2 * score
    spiegelhalter = (
        (norm.isf(level / 2) + norm.ppf(power))
        * np.sqrt(np.sum(a**2 * score * (1 - score)))
        / abs(a.sum())
    )
    assert detectable_shift(score, None, "spiegelhalter", level, power) == pytest.approx(
        spiegelhalter
    )
    weight = rng.uniform(0.5, 2.0, 500)
    weighted = (
        (ks_critical_value_by_hand(level) + norm.ppf(power))
        * np.sqrt(np.sum(weight**2 * score * (1 - score)))
        / weight.sum()
    )
    assert detectable_shift(score, weight, "ks", level, power) == pytest.approx(weighted, rel=1e-6)
    symmetric = np.array([0.3, 0.7] * 50)
    assert detectable_shift(symmetric, None, "spiegelhalter", level, power) == np.inf


def test_a_shift_of_the_detectable_size_is_detected_with_the_stated_power():
    rng = np.random.default_rng(0)
    n = 400
    score = rng.uniform(0.2, 0.8, n)
    delta = detectable_shift(score, None, "ks", 0.05, 0.8)
    detected = [
        calibration_test(
            rng.random(n) < score + delta, score, method="ks", convention="positive_class"
        ).pvalue
        <= 0.05
        for _ in range(400)
    ]
    # at least the stated power (the bound is conservative for KS), up to simulation noise
    assert np.mean(detected) >= 0.8 - 3 * np.sqrt(0.8 * 0.2 / 400)


def test_noise_floor_is_the_quantile_of_resampled_ece():
    rng = np.random.default_rng(0)
    scores = [rng.uniform(0.1, 0.9, 60), rng.uniform(0.3, 0.7, 40)]
    per_group, worst = calibrated_ece_quantiles(
        scores, [None, None], 5, 200, 0.9, np.random.RandomState(0)
    )
    draws = np.random.RandomState(0).random_sample((200, 100)) < np.concatenate(scores)
    errors = np.array(
        [
            [
                expected_calibration_error(draw[rows], score, n_bins=5, convention="positive_class")
                for rows, score in ((slice(0, 60), scores[0]), (slice(60, 100), scores[1]))
            ]
            for draw in draws
        ]
    )
    np.testing.assert_allclose(per_group, np.quantile(errors, 0.9, axis=0))
    assert worst == pytest.approx(np.quantile(errors.max(axis=1), 0.9))


# ------------------------------------------------------------------------------ scorers


def grouped_problem(n=900, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(size=n), rng.integers(0, 3, n)])
    y = (X[:, 0] + 0.8 * (X[:, 1] == 2) + rng.normal(size=n) > 0.3).astype(int)
    return X, y


def test_worst_group_scorer_reads_groups_from_columns_of_X():
    X, y = grouped_problem()
    scorer = make_worst_group_scorer(group_features=[1], n_bins=10)
    fitted = LogisticRegression().fit(X[::2], y[::2])
    expected = worst_group_calibration_error(
        y[1::2], fitted.predict_proba(X[1::2]), groups=X[1::2, [1]], n_bins=10
    )
    assert scorer(fitted, X[1::2], y[1::2]) == -expected
    search = GridSearchCV(
        LogisticRegression(), {"C": [1e-3, 1.0]}, scoring=scorer, cv=StratifiedKFold(3)
    ).fit(X, y)
    assert search.best_params_ == {"C": 1.0}
    assert "group_features=[1]" in repr(scorer)
    with pytest.raises(ValueError, match="takes no argument"):
        make_worst_group_scorer(n_bin=10)


def test_worst_group_scorer_takes_groups_as_routed_metadata():
    X, y = grouped_problem()
    groups = X[:, 1].astype(int)
    cv = KFold(3)
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = get_scorer("neg_worst_group_ece").set_score_request(groups=True)
        result = cross_validate(
            LogisticRegression(), X, y, scoring=scorer, cv=cv, params={"groups": groups}
        )
    for score, (train, test) in zip(result["test_score"], cv.split(X), strict=True):
        fitted = LogisticRegression().fit(X[train], y[train])
        expected = worst_group_calibration_error(
            y[test], fitted.predict_proba(X[test]), groups=groups[test]
        )
        assert score == pytest.approx(-expected)


# ------------------------------------------------------------------- reliability diagrams


def test_reliability_diagram_of_each_group():
    y, p, groups = shifted_groups()
    diagrams = reliability_diagram(y, p, groups=groups, n_bins=8, confidence_level=0.9)
    rows = groups == "z"
    expected = reliability_diagram(
        y[rows], p[rows], n_bins=8, confidence_level=0.9, convention="positive_class"
    )
    for key in ("edges", "count", "mean_confidence", "accuracy", "accuracy_low"):
        np.testing.assert_array_equal(diagrams["z"][key], expected[key])


def test_display_draws_one_line_per_group_over_the_overall_diagram():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from sklearn_calib.plotting import ReliabilityDisplay

    y, p, groups = shifted_groups()
    display = ReliabilityDisplay.from_predictions(y, p, groups=groups, pos_label=1, n_bins=10)
    assert list(display.group_lines_) == ["x", "y", "z"]
    labels = [text.get_text() for text in display.ax_.get_legend().get_texts()]
    for g, line in display.group_lines_.items():
        rows = groups == g
        diagram = reliability_diagram(y[rows], p[rows], n_bins=10, convention="positive_class")
        filled = diagram.count > 0
        np.testing.assert_array_equal(line.get_xdata(), diagram.mean_confidence[filled])
        np.testing.assert_array_equal(line.get_ydata(), diagram.accuracy[filled])
        ece = expected_calibration_error(y[rows], p[rows], n_bins=10, convention="positive_class")
        assert f"{g} (ECE = {100 * ece:.2f} %)" in labels
    fitted = LogisticRegression().fit(p[:, None], y)
    from_estimator = ReliabilityDisplay.from_estimator(fitted, p[:, None], y, groups=groups)
    assert list(from_estimator.group_lines_) == ["x", "y", "z"]
    assert ReliabilityDisplay.from_predictions(y, p).group_lines_ == {}
