import warnings

import numpy as np
import pytest
import torch
from sklearn.metrics import brier_score_loss, log_loss
from torchmetrics.functional.classification import multiclass_calibration_error

from sklearn_calib.metrics._core import _rows
from sklearn_calib.metrics._functions import _binned, _sece
from sklearn_calib.scoring import (
    adaptive_calibration_error,
    brier_score,
    classwise_calibration_error,
    differentiable_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    reliability_diagram,
    smooth_calibration_error,
    top_label_accuracy,
)

# Hand-computed batch oracle of the metrics
Z = np.array([[2, 1, 0], [0.5, 1.5, 0], [3, 0, 0], [0, 0, 0.2]])
Y = np.array([0, 0, 0, 2])


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


P = softmax(Z)


def random_proba(n, k, seed, dtype=np.float64, concentration=0.5):
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.full(k, concentration), n).astype(dtype)
    return proba, rng.integers(0, k, n)


def reference_ece(y, proba, n_bins, norm="l1"):
    """Plain float64 ECE with the (lower, upper] rule, for comparison on large inputs."""
    conf = proba.max(axis=1)
    correct = proba.argmax(axis=1) == y
    edges = np.linspace(0, 1, n_bins + 1).astype(proba.dtype)
    index = np.searchsorted(edges[1:-1], conf, side="left")
    gaps, shares = [], []
    for b in range(n_bins):
        member = index == b
        if member.any():
            gaps.append(abs(correct[member].mean() - conf[member].astype(np.float64).mean()))
            shares.append(member.mean())
    gaps, shares = np.array(gaps), np.array(shares)
    return {"l1": shares @ gaps, "l2": np.sqrt(shares @ gaps**2), "max": gaps.max()}[norm]


def test_spec_oracles():
    assert expected_calibration_error(Y, P) == pytest.approx(0.251294, abs=1e-5)
    assert classwise_calibration_error(Y, P) == pytest.approx(0.302490, abs=1e-5)
    assert smooth_calibration_error(Y, P) == pytest.approx(0.418082, abs=1e-5)
    assert smooth_calibration_error(Y, P, include_self=False) == pytest.approx(0.581326, abs=1e-5)
    assert differentiable_calibration_error(Y, P) == pytest.approx(0.322067, abs=1e-5)
    assert top_label_accuracy(Y, P) == 0.75


def test_brier_and_nll_match_spec_losses_and_scikit_learn():
    proba = softmax(np.tile([2.0, 1.0, 0.0], (3, 1)))
    y = np.array([0, 1, 2])
    assert brier_score(y, proba) == pytest.approx(np.mean([0.180061, 1.021086, 1.330482]), abs=1e-5)
    assert negative_log_likelihood(y, proba) == pytest.approx(1.407606, abs=1e-5)
    proba, y = random_proba(300, 4, 0)
    weight = np.random.default_rng(1).random(300)
    assert negative_log_likelihood(y, proba, sample_weight=weight) == pytest.approx(
        log_loss(y, proba, sample_weight=weight), rel=1e-10
    )
    assert brier_score(y, proba) == pytest.approx(
        brier_score_loss(y, proba, scale_by_half=False), rel=1e-10
    )
    binary = proba[:, 0]
    assert brier_score(y == 0, binary) == pytest.approx(
        brier_score_loss(y == 0, binary, scale_by_half=False), rel=1e-10
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nll_clips_at_the_dtype_epsilon_as_scikit_learn(dtype):
    # a zero probability costs -log(eps) of the input's dtype; a certain one costs eps
    eps = float(np.finfo(dtype).eps)
    loss = negative_log_likelihood([1, 0], np.array([[1.0, 0.0], [1.0, 0.0]], dtype=dtype))
    assert loss == pytest.approx((-np.log(eps) - np.log1p(-eps)) / 2, rel=1e-12)
    # float32 softmax output whose true class underflowed to 0 (network output): the
    # clip decides the loss, and it matches scikit-learn's log_loss
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(2000, 10)) * 12
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba = (proba / proba.sum(axis=1, keepdims=True)).astype(dtype)
    y = rng.integers(0, 10, 2000)
    assert (proba[np.arange(2000), y] < eps).any()
    weight = rng.random(2000)
    for kwargs in ({}, {"sample_weight": weight}):
        ours = negative_log_likelihood(y, proba, **kwargs)
        theirs = log_loss(y, proba, labels=np.arange(10), **kwargs)
        assert ours == pytest.approx(theirs, rel=1e-6 if dtype == np.float32 else 1e-12)


def test_nll_constant_is_deprecated():
    from sklearn_calib import metrics, scoring

    for module in (metrics, scoring):
        with pytest.warns(FutureWarning, match="NLL_EPS"):
            assert module.NLL_EPS == 1e-15


def edge_free_inputs(n, k, n_bins, seed):
    """float32 probabilities whose top confidence is at least 1e-4 away from every edge."""
    proba, y = random_proba(4 * n, k, seed, dtype=np.float32)
    conf = proba.max(axis=1).astype(np.float64)
    edges = np.linspace(0, 1, n_bins + 1)
    keep = np.abs(conf[:, None] - edges).min(axis=1) > 1e-4
    return proba[keep][:n], y[keep][:n]


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
@pytest.mark.parametrize("n_bins, k", [(15, 10), (10, 3), (7, 2)])
def test_agrees_with_torchmetrics_away_from_bin_edges(norm, n_bins, k):
    proba, y = edge_free_inputs(3000, k, n_bins, seed=n_bins + k)
    ours = expected_calibration_error(y, proba, n_bins=n_bins, norm=norm)
    theirs = multiclass_calibration_error(
        torch.from_numpy(proba), torch.from_numpy(y), num_classes=k, n_bins=n_bins, norm=norm
    ).item()
    assert ours == pytest.approx(theirs, abs=1e-6)
    assert ours == pytest.approx(reference_ece(y, proba, n_bins, norm), abs=1e-12)


def test_documented_difference_from_torchmetrics_at_exact_edges():
    # torchmetrics bins with bucketize(right=True): [lower, upper), and 1.0 goes to an
    # extra (n_bins + 1)-th bin; our rule is (lower, upper] with 1.0 in the last bin.
    def both(proba, y, n_bins):
        proba = np.asarray(proba, dtype=np.float32)
        ours = expected_calibration_error(y, proba, n_bins=n_bins)
        theirs = multiclass_calibration_error(
            torch.from_numpy(proba), torch.tensor(y), num_classes=2, n_bins=n_bins
        ).item()
        return ours, theirs

    # 0.6 is an edge of 5 bins: ours puts it in (0.4, 0.6] alone (gap 0.4) and 0.7 in
    # (0.6, 0.8] (gap 0.7); torchmetrics puts both in [0.6, 0.8): mean 0.65, accuracy 0.5.
    ours, theirs = both([[0.6, 0.4], [0.7, 0.3]], [0, 1], 5)
    assert ours == pytest.approx(0.5 * 0.4 + 0.5 * 0.7)
    assert theirs == pytest.approx(0.15)
    # A wrong prediction at confidence 1.0 and a right one at 0.95 share our last bin
    # (mean 0.975, accuracy 0.5); torchmetrics keeps 1.0 apart: 0.5 * 1 + 0.5 * 0.05.
    ours, theirs = both([[1.0, 0.0], [0.95, 0.05]], [1, 0], 15)
    assert ours == pytest.approx(0.475)
    assert theirs == pytest.approx(0.525)


def test_exact_edges_zero_and_one_follow_the_bin_rule():
    edges = np.linspace(0, 1, 6)
    conf = np.array([0.5, edges[3], edges[4], 1.0, np.nextafter(edges[3], 1.0)])
    proba = np.column_stack([conf, 1 - conf])
    diagram = reliability_diagram(np.zeros(5, dtype=int), proba, n_bins=5)
    # (0.4, 0.6] holds 0.5 and 0.6; (0.6, 0.8] holds 0.8 and the float just above 0.6.
    np.testing.assert_array_equal(diagram.count, [0, 0, 2, 2, 1])
    np.testing.assert_allclose(diagram.mean_confidence[2:], [0.55, 0.7, 1.0])
    # Zeros land in the first bin: class 1 has p = 0 twice, one of them its own class.
    proba = np.array([[1.0, 0.0], [1.0, 0.0]])
    assert classwise_calibration_error([0, 1], proba) == pytest.approx(0.5)
    assert expected_calibration_error([0, 1], proba) == pytest.approx(0.5)


def test_large_float32_input_matches_the_plain_reference():
    proba, y = random_proba(50_000, 10, 3, dtype=np.float32)
    for norm in ("l1", "l2", "max"):
        assert expected_calibration_error(y, proba, norm=norm) == pytest.approx(
            reference_ece(y, proba, 15, norm), abs=1e-12
        )
    # a layout that takes the numpy path gives the same value
    fortran = np.asfortranarray(proba)
    assert expected_calibration_error(y, fortran) == expected_calibration_error(y, proba)


def test_ties_go_to_the_first_column_like_argmax():
    proba = np.tile([[0.4, 0.4, 0.2], [0.25, 0.25, 0.5], [1 / 3, 1 / 3, 1 / 3]], (20_000, 1))
    y = np.tile([1, 2, 0], 20_000)
    assert top_label_accuracy(y, proba) == pytest.approx(2 / 3)
    assert top_label_accuracy(y, np.asfortranarray(proba)) == pytest.approx(2 / 3)


def test_read_only_input_gives_no_warning():
    proba, y = random_proba(100, 3, 4)
    proba.setflags(write=False)
    y.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert expected_calibration_error(y, proba) == pytest.approx(reference_ece(y, proba, 15))


def test_binary_positive_column_equals_two_columns_and_any_label_type():
    rng = np.random.default_rng(5)
    p = rng.random(200)
    y = rng.random(200) < p
    two = np.column_stack([1 - p, p])
    labels = np.where(y, "yes", "no")
    for metric in (expected_calibration_error, classwise_calibration_error, brier_score):
        expected = metric(y.astype(int), two)
        assert metric(y, p) == pytest.approx(expected)
        assert metric(labels, p) == pytest.approx(expected)
    assert smooth_calibration_error(labels, p) == pytest.approx(
        smooth_calibration_error(y.astype(int), two)
    )


def per_class_ece(y_index, proba, n_bins=15):
    """Equal-width ECE of each column against its one-vs-rest labels, with a loop."""
    edges = np.linspace(0, 1, n_bins + 1)
    result = []
    for k in range(proba.shape[1]):
        index = np.searchsorted(edges[1:-1], proba[:, k], side="left")
        is_k = y_index == k
        total = 0.0
        for b in np.unique(index):
            member = index == b
            total += member.mean() * abs(is_k[member].mean() - proba[member, k].mean())
        result.append(total)
    return np.array(result)


def test_classwise_matches_per_class_ece():
    proba, y = random_proba(500, 4, 7)
    assert classwise_calibration_error(y, proba) == pytest.approx(
        per_class_ece(y, proba).mean(), abs=1e-12
    )


def test_labels_fix_the_classes_when_a_fold_lacks_one():
    proba, _ = random_proba(60, 3, 6)
    y_index = np.tile([1, 2], 30)
    expected = per_class_ece(y_index, proba).mean()
    # the absent class 0 still counts in the mean over the three columns
    got = classwise_calibration_error(y_index, proba, labels=[0, 1, 2])
    assert got == pytest.approx(expected, abs=1e-12)
    y = np.array(["a", "b", "c"])[y_index]
    got = classwise_calibration_error(y, proba, labels=["a", "b", "c"])
    assert got == pytest.approx(expected, abs=1e-12)
    assert expected_calibration_error(y, proba, labels=["a", "b", "c"]) == pytest.approx(
        expected_calibration_error(y_index, proba, labels=[0, 1, 2])
    )
    # [1, 2] for three columns may be 1-based labels lacking class 3: ambiguous, so it raises
    for labels in (y, y_index):
        with pytest.raises(ValueError, match="pass `labels=`.*only when they include 0"):
            classwise_calibration_error(labels, proba)
    # with 0 among them, integer labels are the column indices
    y_with_zero = np.tile([0, 2], 30)
    assert classwise_calibration_error(y_with_zero, proba) == pytest.approx(
        classwise_calibration_error(y_with_zero, proba, labels=[0, 1, 2]), abs=1e-12
    )
    assert expected_calibration_error([1, 2, 3], proba[:3]) == pytest.approx(
        expected_calibration_error([0, 1, 2], proba[:3])
    )


def test_adaptive_bins_hold_equal_counts_and_keep_ties_together():
    conf = np.array([0.55, 0.6, 0.65, 0.7, 0.8, 0.9])
    proba = np.column_stack([conf, 1 - conf])
    y = np.array([0, 1, 0, 0, 1, 0])
    # groups {0.55, 0.6}, {0.65, 0.7}, {0.8, 0.9}: accuracies 0.5, 1, 0.5
    expected = (abs(0.5 - 0.575) + abs(1 - 0.675) + abs(0.5 - 0.85)) / 3
    assert adaptive_calibration_error(y, proba, n_bins=3) == pytest.approx(expected)
    diagram = reliability_diagram(y, proba, n_bins=3, strategy="quantile")
    np.testing.assert_array_equal(diagram.count, [2, 2, 2])
    tied = np.array([0.6, 0.6, 0.6, 0.9])
    diagram = reliability_diagram(
        [0, 0, 1, 0], np.column_stack([tied, 1 - tied]), n_bins=2, strategy="quantile"
    )
    np.testing.assert_array_equal(diagram.count, [3, 1])
    assert adaptive_calibration_error(y, proba, n_bins=3, norm="max") == pytest.approx(0.35)


def test_mce_is_the_largest_gap():
    diagram = reliability_diagram(Y, P)
    gaps = np.abs(diagram.accuracy - diagram.mean_confidence)
    assert maximum_calibration_error(Y, P) == pytest.approx(np.nanmax(gaps))
    assert maximum_calibration_error(Y, P) == expected_calibration_error(Y, P, norm="max")


def test_reliability_diagram_keeps_empty_bins():
    diagram = reliability_diagram(Y, P, n_bins=10)
    assert diagram.edges.shape == (11,)
    # confidences 0.665, 0.629, 0.909, 0.379
    np.testing.assert_array_equal(diagram.count, [0, 0, 0, 1, 0, 0, 2, 0, 0, 1])
    np.testing.assert_allclose(diagram.accuracy[[3, 6, 9]], [1.0, 0.5, 1.0])
    empty = diagram.count == 0
    assert np.isnan(diagram.mean_confidence[empty]).all()
    assert np.isnan(diagram.accuracy[empty]).all()
    full = ~empty
    ece = np.sum(diagram.count[full] / 4 * np.abs(diagram.accuracy - diagram.mean_confidence)[full])
    assert ece == pytest.approx(expected_calibration_error(Y, P, n_bins=10))


def brute_sece(y, proba, h, include_self, weight):
    r = proba.max(axis=1)
    c = (proba.argmax(axis=1) == y).astype(float)
    kernel = np.exp(-((r[:, None] - r[None, :]) ** 2) / (2 * h * h)) * weight
    if not include_self:
        np.fill_diagonal(kernel, 0.0)
    sacc = kernel @ c / (kernel.sum(axis=1) + 1e-12 * weight.mean())
    return np.sum(weight * np.abs(sacc - r)) / weight.sum()


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("bandwidth", [0.001, 0.01, 0.2])
@pytest.mark.slow
def test_sece_matches_the_all_pairs_formula_in_small_blocks(monkeypatch, include_self, bandwidth):
    proba, y = random_proba(700, 4, 8)
    weight = np.random.default_rng(9).random(700)
    expected = brute_sece(y, proba, bandwidth, include_self, weight)
    options = {"bandwidth": bandwidth, "include_self": include_self, "sample_weight": weight}
    got = smooth_calibration_error(y, proba, method="exact", **options)
    assert got == pytest.approx(expected, abs=1e-12)
    monkeypatch.setattr(_sece, "_BLOCK_ELEMENTS", 500)
    got = smooth_calibration_error(y, proba, method="exact", **options)
    assert got == pytest.approx(expected, abs=1e-12)
    # the binned sums stay within their guaranteed 1e-6 of the exact ones
    binned = smooth_calibration_error(y, proba, method="binned", **options)
    assert binned == pytest.approx(expected, abs=1e-6)


def brute_dece(y, proba, n_bins=15, t_a=100.0, t_b=0.01):
    r = proba.max(axis=1)
    cut = np.linspace(0, 1, n_bins + 1)[:-1]
    logits = (r[:, None] * np.arange(1, n_bins + 1) + np.cumsum(-cut)) / t_b
    o = np.exp(logits - logits.max(axis=1, keepdims=True))
    o = o / o.sum(axis=1, keepdims=True)
    o = (o + 1e-6) / (1 + (n_bins + 1) * 1e-6)
    pairwise = 1 / (1 + np.exp(-t_a * (proba[:, None, :] - proba[:, :, None])))
    rank = 0.5 + pairwise.sum(axis=2)[np.arange(len(y)), y]
    acc = np.maximum(2 - rank, 0)
    conf_k = (o * r[:, None]).sum(0) / o.sum(0)
    acc_k = (o * acc[:, None]).sum(0) / o.sum(0)
    return np.sum(o.sum(0) / len(y) * np.abs(acc_k - conf_k))


def test_dece_matches_the_formula_in_small_blocks(monkeypatch):
    proba, y = random_proba(300, 5, 10)
    expected = brute_dece(y, proba)
    assert differentiable_calibration_error(y, proba) == pytest.approx(expected, abs=1e-12)
    monkeypatch.setattr(_rows, "_BLOCK_ELEMENTS", 64)
    assert differentiable_calibration_error(y, proba) == pytest.approx(expected, abs=1e-12)
    assert differentiable_calibration_error(y, proba, n_bins=5, t_a=10.0, t_b=0.1) == (
        pytest.approx(brute_dece(y, proba, 5, 10.0, 0.1), abs=1e-12)
    )


def test_blocked_computations_match_one_block(monkeypatch):
    proba, y = random_proba(500, 6, 11)
    weight = np.random.default_rng(12).random(500)

    def values():
        return [
            classwise_calibration_error(y, proba, sample_weight=weight),
            brier_score(y, proba, sample_weight=weight),
            expected_calibration_error(y, proba, sample_weight=weight),
            expected_calibration_error(y, proba, norm="max"),
            *reliability_diagram(y, proba, sample_weight=weight).count,
        ]

    expected = values()
    monkeypatch.setattr(_rows, "_BLOCK_ELEMENTS", 50)
    monkeypatch.setattr(_binned, "_TOP_LABEL_ROWS", 37)
    got = values()
    np.testing.assert_allclose(got, expected, rtol=1e-12)


WEIGHTED = [
    lambda y, p, **kw: expected_calibration_error(y, p, **kw),
    lambda y, p, **kw: adaptive_calibration_error(y, p, **kw),
    lambda y, p, **kw: reliability_diagram(y, p, strategy="quantile", n_bins=5, **kw).count,
    lambda y, p, **kw: expected_calibration_error(y, p, norm="l2", **kw),
    lambda y, p, **kw: maximum_calibration_error(y, p, **kw),
    lambda y, p, **kw: classwise_calibration_error(y, p, **kw),
    lambda y, p, **kw: smooth_calibration_error(y, p, **kw),
    lambda y, p, **kw: differentiable_calibration_error(y, p, **kw),
    lambda y, p, **kw: brier_score(y, p, **kw),
    lambda y, p, **kw: negative_log_likelihood(y, p, **kw),
    lambda y, p, **kw: top_label_accuracy(y, p, **kw),
    lambda y, p, **kw: reliability_diagram(y, p, **kw).count,
    lambda y, p, **kw: reliability_diagram(y, p, **kw).accuracy,
]


@pytest.mark.parametrize("metric", WEIGHTED)
def test_integer_weights_equal_repeated_rows(metric):
    proba, y = random_proba(80, 3, 13)
    weight = np.random.default_rng(14).integers(0, 4, 80)
    repeated = np.repeat(np.arange(80), weight)
    np.testing.assert_allclose(
        metric(y, proba, sample_weight=weight), metric(y[repeated], proba[repeated]), rtol=1e-10
    )


ALL_METRICS = [
    expected_calibration_error,
    maximum_calibration_error,
    adaptive_calibration_error,
    classwise_calibration_error,
    smooth_calibration_error,
    differentiable_calibration_error,
    brier_score,
    negative_log_likelihood,
    top_label_accuracy,
    reliability_diagram,
]
BINNED = [
    expected_calibration_error,
    maximum_calibration_error,
    adaptive_calibration_error,
    classwise_calibration_error,
    differentiable_calibration_error,
    reliability_diagram,
]
GOOD = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])


@pytest.mark.parametrize("metric", ALL_METRICS)
@pytest.mark.parametrize(
    "y_true, y_prob, kwargs, message",
    [
        ([0, 1, 2], [[0.7, 0.4, -0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]], {}, "negative"),
        ([0, 1, 2], [[np.nan, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]], {}, "NaN"),
        ([0, 1, 2], [[np.inf, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]], {}, "infinite"),
        ([0, 1, 2], [[0.7, 0.2, 0.2], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]], {}, "sum to 1"),
        ([0, 1], GOOD, {}, "same length"),
        ([0, 1, 2], GOOD[:, :2], {}, "sum to 1"),
        ([0, 1, 5], GOOD, {"labels": [0, 1, 2]}, "not in `labels`"),
        ([0, 1, 2], GOOD, {"labels": [0, 1]}, "names 2 classes"),
        ([], np.zeros((0, 3)), {}, "empty"),
        ([0, 1, 2], GOOD, {"sample_weight": [1, -1, 1]}, "negative"),
        ([0, 1, 2], GOOD, {"sample_weight": [1, 1]}, "shape"),
        ([0, 1], [0.5, 1.5], {}, r"\[0, 1\]"),
    ],
)
def test_bad_inputs_raise(metric, y_true, y_prob, kwargs, message):
    with pytest.raises(ValueError, match=message):
        metric(y_true, y_prob, **kwargs)


@pytest.mark.parametrize("metric", BINNED)
@pytest.mark.parametrize("n_bins", [0, -1, 2.5, "15", None, True])
def test_invalid_n_bins_raise(metric, n_bins):
    with pytest.raises(ValueError, match="`n_bins` to be an integer >= 1"):
        metric(Y, P, n_bins=n_bins)


@pytest.mark.parametrize(
    "metric, kwargs, message",
    [
        (expected_calibration_error, {"strategy": "width"}, "`strategy` to be one of"),
        (reliability_diagram, {"strategy": None}, "`strategy` to be one of"),
        (expected_calibration_error, {"norm": "l3"}, "`norm` to be one of"),
        (adaptive_calibration_error, {"norm": 1}, "`norm` to be one of"),
        (classwise_calibration_error, {"norm": "L1"}, "`norm` to be one of"),
        (smooth_calibration_error, {"bandwidth": 0.0}, "`bandwidth` to be a finite number > 0"),
        (smooth_calibration_error, {"bandwidth": np.nan}, "`bandwidth` to be a finite number > 0"),
        (smooth_calibration_error, {"include_self": "yes"}, "`include_self` to be a bool"),
        (differentiable_calibration_error, {"t_a": -1.0}, "`t_a` to be a finite number > 0"),
        (differentiable_calibration_error, {"t_b": "0.1"}, "`t_b` to be a finite number > 0"),
    ],
)
def test_invalid_options_raise(metric, kwargs, message):
    with pytest.raises(ValueError, match=message):
        metric(Y, P, **kwargs)


@pytest.mark.parametrize("n", [200, 40_000])
def test_correctness_with_many_ties_matches_argmax(n):
    # entries on a grid of 1/8 so that rows often tie at their maximum
    rng = np.random.default_rng(15)
    counts = rng.multinomial(8, np.full(4, 0.25), size=n)
    proba = (counts / 8).astype(np.float32)
    y = rng.integers(0, 4, n)
    correct = proba.argmax(axis=1) == y
    assert top_label_accuracy(y, proba) == pytest.approx(correct.mean())
    conf = proba.max(axis=1).astype(np.float64)
    index = np.searchsorted(np.linspace(0, 1, 16)[1:-1].astype(np.float32), proba.max(axis=1))
    expected = sum(
        (index == b).mean() * abs(correct[index == b].mean() - conf[index == b].mean())
        for b in np.unique(index)
    )
    assert expected_calibration_error(y, proba) == pytest.approx(expected, abs=1e-12)


def test_sece_limits_of_the_bandwidth():
    proba, y = random_proba(300, 3, 16)
    r = proba.max(axis=1)
    c = proba.argmax(axis=1) == y
    # a vanishing bandwidth leaves each sample alone: |c_i - r_i|, or SACC = 0 without self
    assert smooth_calibration_error(y, proba, bandwidth=1e-200) == pytest.approx(
        np.mean(np.abs(c - r)), abs=1e-12
    )
    assert smooth_calibration_error(
        y, proba, bandwidth=1e-200, include_self=False
    ) == pytest.approx(r.mean(), abs=1e-12)
    # a huge bandwidth gives every sample the overall accuracy
    assert smooth_calibration_error(y, proba, bandwidth=1e6) == pytest.approx(
        np.mean(np.abs(c.mean() - r)), abs=1e-9
    )


def test_positive_class_convention_bins_the_positive_column():
    rng = np.random.default_rng(17)
    p = rng.random(1000)
    y = np.where(rng.random(1000) < p**1.5, "spam", "ham")
    index = np.searchsorted(np.linspace(0, 1, 11)[1:-1], p)
    positive = y == "spam"
    gaps = [
        (index == b).mean() * abs(positive[index == b].mean() - p[index == b].mean())
        for b in np.unique(index)
    ]
    options = {"n_bins": 10, "convention": "positive_class"}
    assert expected_calibration_error(y, p, **options) == pytest.approx(sum(gaps), abs=1e-12)
    assert maximum_calibration_error(y, p, **options) == pytest.approx(
        max(gaps / np.bincount(index)[np.unique(index)] * 1000), abs=1e-12
    )
    # two columns: the second is the positive class, whatever the label type
    two = np.column_stack([1 - p, p])
    assert expected_calibration_error(y, two, **options) == expected_calibration_error(
        y, p, **options
    )
    diagram = reliability_diagram(y, p, **options)
    np.testing.assert_allclose(
        diagram.accuracy[diagram.count > 0],
        [positive[index == b].mean() for b in np.unique(index)],
    )
    # top-label folds both tails onto [0.5, 1]: a different number
    assert expected_calibration_error(y, p, n_bins=10) != pytest.approx(sum(gaps))
    assert adaptive_calibration_error(y, p, convention="positive_class") == (
        expected_calibration_error(y, p, strategy="quantile", convention="positive_class")
    )


def test_positive_class_convention_needs_two_classes():
    with pytest.raises(ValueError, match="binary problem .* got 3 classes"):
        expected_calibration_error(Y, P, convention="positive_class")
    with pytest.raises(ValueError, match="`convention` to be one of"):
        reliability_diagram(Y, P, convention="binary")


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, "0.9", np.nan])
def test_reliability_intervals_reject_a_bad_confidence_level(level):
    with pytest.raises(ValueError, match=r"`confidence_level` to be a number in \(0, 1\)"):
        reliability_diagram(Y, P, confidence_level=level)


def _binary_scores():
    rng = np.random.default_rng(23)
    p = rng.random(3000)
    return p, (rng.random(3000) < p**1.5).astype(int)


def test_positive_class_convention_equals_torchmetrics_binary_ece():
    from torchmetrics.functional.classification import binary_calibration_error

    p, y = _binary_scores()
    ours = expected_calibration_error(y, p, n_bins=10, convention="positive_class")
    theirs = binary_calibration_error(torch.as_tensor(p), torch.as_tensor(y), n_bins=10)
    assert ours == pytest.approx(float(theirs), abs=1e-12)
    worst = binary_calibration_error(torch.as_tensor(p), torch.as_tensor(y), n_bins=10, norm="max")
    assert maximum_calibration_error(y, p, n_bins=10, convention="positive_class") == pytest.approx(
        float(worst), abs=1e-12
    )


def test_positive_class_convention_equals_netcal_binary_ece():
    # netcal is a bench extra (it pulls gpytorch, pyro and tensorboard), not a test one
    netcal_metrics = pytest.importorskip("netcal.metrics")
    p, y = _binary_scores()
    ours = expected_calibration_error(y, p, n_bins=10, convention="positive_class")
    assert ours == pytest.approx(netcal_metrics.ECE(bins=10).measure(p, y), abs=1e-12)
