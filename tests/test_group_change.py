"""Groups a calibration made worse: paired changes, corrected tests, the audit's names."""

import numpy as np
import pytest
from scipy import stats

from sklearn_calib.metrics import (
    adjust_pvalues,
    calibration_audit,
    expected_calibration_error,
    negative_log_likelihood,
    paired_change_test,
)
from sklearn_calib.metrics._statistics._groups import format_audit


def calibrated_groups(n=4000, seed=0):
    """Calibrated positive-class scores in groups "x", "y" and "z"."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.1, 0.9, n)
    groups = rng.choice(np.array(["x", "y", "z"]), n, p=[0.4, 0.3, 0.3])
    y = (rng.random(n) < p).astype(int)
    return y, p, groups


def audit_against(y, after, groups, reference):
    """The audit of ``after`` against ``reference`` (positive class, 200 replicates)."""
    return calibration_audit(
        y,
        after,
        groups,
        convention="positive_class",
        n_resamples=200,
        random_state=0,
        y_prob_reference=reference,
    )


def test_paired_change_test_is_a_t_test_per_group_with_holm():
    changes = {
        "a": [0.02, 0.03, 0.025, 0.028, 0.022],
        "b": [0.01, -0.02, 0.0, 0.005, -0.004],
        "c": [-0.03, -0.02, -0.025, -0.028, -0.031],
    }
    result = paired_change_test(changes)
    raw = [stats.ttest_1samp(np.array(v), 0.0).pvalue for v in changes.values()]
    np.testing.assert_allclose(result.table["pvalue"], raw)
    np.testing.assert_allclose(result.table["pvalue_adjusted"], adjust_pvalues(raw, "holm"))
    np.testing.assert_allclose(result.table["change"], [np.mean(v) for v in changes.values()])
    # "c" got significantly better, not worse
    assert result.table["worse"].tolist() == [True, False, False]
    assert result.worse_groups == ["a"]


def test_paired_change_test_leaves_groups_without_variation_out_of_the_count():
    result = paired_change_test({"kept": [0.0, 0.0, 0.0], "one": [0.5], "a": [0.02, 0.03, 0.025]})
    assert result.table["pvalue"][:2].tolist() == [1.0, 1.0]
    assert result.table["pvalue_adjusted"][:2].tolist() == [1.0, 1.0]
    # one group tested: its adjusted p-value is its own
    assert result.table["pvalue_adjusted"][2] == pytest.approx(result.table["pvalue"][2])
    assert result.worse_groups == ["a"]


@pytest.mark.parametrize(
    ("changes", "options", "message"),
    [
        ({"a": [1.0, np.nan]}, {}, "Expected finite changes of group 'a'"),
        ({"a": [[1.0, 2.0]]}, {}, "Expected the changes of group 'a' to be 1-D"),
        ([0.1, 0.2], {}, "Expected `changes` to be a dict"),
        ({"a": [1.0, 2.0]}, {"alpha": 0.0}, "alpha"),
        ({"a": [1.0, 2.0]}, {"correction": "bonferroni"}, "correction"),
    ],
)
def test_paired_change_test_names_bad_input(changes, options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        paired_change_test(changes, **options)


@pytest.mark.slow
def test_the_audit_names_the_one_group_made_worse():
    y, p, groups = calibrated_groups()
    after = np.where(groups == "y", np.clip(p + 0.15, 0.0, 0.99), p)
    audit = audit_against(y, after, groups, p)
    assert audit.made_worse == ["y"]
    table = audit.table
    assert table["group"] == ["x", "y", "z"]
    assert table["ece_worse"].tolist() == [False, True, False]
    assert table["log_loss_worse"].tolist() == [False, True, False]
    # the unchanged groups have no change to test
    assert table["ece_change"][[0, 2]].tolist() == [0.0, 0.0]
    assert table["log_loss_change_pvalue_adjusted"][[0, 2]].tolist() == [1.0, 1.0]
    rows = groups == "y"
    assert table["ece_reference"][1] == pytest.approx(
        expected_calibration_error(y[rows], p[rows], convention="positive_class")
    )
    assert table["ece_change"][1] == pytest.approx(
        expected_calibration_error(y[rows], after[rows], convention="positive_class")
        - table["ece_reference"][1]
    )
    assert table["log_loss_change"][1] == pytest.approx(
        negative_log_likelihood(y[rows], after[rows]) - negative_log_likelihood(y[rows], p[rows])
    )
    assert "made worse than the reference (ECE or log loss): y" in format_audit(audit)


@pytest.mark.slow
def test_the_audit_names_no_group_when_the_calibration_helps_or_is_noise():
    y, p, groups = calibrated_groups(seed=1)
    rng = np.random.default_rng(2)
    given = np.clip(p - 0.1, 0.01, 0.99)  # every group's scores too low
    # the calibration puts them back, up to a little noise
    after = np.clip(p + rng.normal(0.0, 0.005, p.shape[0]), 0.01, 0.99)
    audit = audit_against(y, after, groups, given)
    assert audit.made_worse == []
    assert np.all(audit.table["ece_change"] < 0)
    assert np.all(audit.table["log_loss_change"] < 0)
    assert "made worse than the reference (ECE or log loss): none" in format_audit(audit)


def test_the_audit_without_a_reference_names_nothing():
    y, p, groups = calibrated_groups(n=600)
    audit = calibration_audit(y, p, groups, n_resamples=20, random_state=0)
    assert audit.made_worse is None
    assert "ece_change" not in audit.table
    assert "made worse" not in format_audit(audit)


@pytest.mark.slow
def test_weighted_log_loss_change_counts_weights_as_repeated_rows():
    y, p, groups = calibrated_groups(n=1200, seed=3)
    after = np.where(groups == "x", np.clip(p + 0.08, 0.0, 0.99), p)
    weight = np.random.default_rng(4).integers(1, 4, p.shape[0])
    options = {"convention": "positive_class", "n_resamples": 20, "random_state": 0}
    weighted = calibration_audit(
        y, after, groups, sample_weight=weight, y_prob_reference=p, **options
    )
    repeated = calibration_audit(
        np.repeat(y, weight),
        np.repeat(after, weight),
        np.repeat(groups, weight),
        y_prob_reference=np.repeat(p, weight),
        **options,
    )
    np.testing.assert_allclose(weighted.table["log_loss_change"], repeated.table["log_loss_change"])


def test_the_audit_refuses_a_reference_of_other_rows():
    y, p, groups = calibrated_groups(n=300)
    with pytest.raises(ValueError, match="Bad `y_prob_reference`.*has 299"):
        calibration_audit(y, p, groups, y_prob_reference=p[:-1])


@pytest.mark.slow
def test_the_audit_refuses_a_reference_of_other_classes():
    y, p, groups = calibrated_groups(n=300)
    three = np.column_stack([1 - p, p / 2, p / 2])
    with pytest.raises(
        ValueError, match="`y_prob_reference` with the 2 classes of `y_prob`, got 3"
    ):
        calibration_audit(y, p, groups, convention="top_label", y_prob_reference=three)
    # the same two classes as one positive-class column or two columns are one reference
    two = calibration_audit(
        y, p, groups, n_resamples=50, random_state=0, y_prob_reference=np.column_stack([1 - p, p])
    )
    one = calibration_audit(y, p, groups, n_resamples=50, random_state=0, y_prob_reference=p)
    np.testing.assert_allclose(
        two.table["log_loss_change"], one.table["log_loss_change"], atol=1e-12
    )
