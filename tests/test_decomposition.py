"""CORP against model-diagnostics, the refinement split against probmetrics, and the
refinement scorers in GridSearchCV and skorch."""

import warnings

import numpy as np
import pytest
import torch
from model_diagnostics.scoring import LogLoss, SquaredError, decompose
from probmetrics.metrics import Metrics
from sklearn.isotonic import isotonic_regression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from skorch.callbacks import EarlyStopping, EpochScoring

from sklearn_calib.estimators import NetClassifier
from sklearn_calib.metrics._statistics import _tempered
from sklearn_calib.scoring import (
    brier_score,
    calibration_decomposition,
    get_scorer,
    negative_log_likelihood,
    refinement_loss,
)


def binary_data(n, seed, power):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    return (rng.random(n) < p**power).astype(int), p


def multiclass_data(n, k, seed, sharpen):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 2
    truth = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    proba = np.exp(logits * sharpen) / np.exp(logits * sharpen).sum(axis=1, keepdims=True)
    return (truth.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1).clip(0, k - 1), proba


PARTS = ("score", "miscalibration", "discrimination", "uncertainty")


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("power", [0.7, 1.0, 1.6])
def test_corp_equals_model_diagnostics(weighted, power):
    y, p = binary_data(1500, int(power * 10), power)
    # ties in the forecast are pooled by both
    p = np.round(p, 2)
    weight = np.random.default_rng(1).random(1500) if weighted else None
    for score, function, factor in (("brier", SquaredError(), 2.0), ("log_loss", LogLoss(), 1.0)):
        expected = decompose(y, p, weight, scoring_function=function).to_dicts()[0]
        got = calibration_decomposition(y, p, score=score, sample_weight=weight)
        # our Brier score sums both columns of a binary problem: twice the positive one
        for part in PARTS:
            assert got[part] == pytest.approx(factor * expected[part], abs=1e-12)


def test_decomposition_identity_and_scores_match_the_metrics():
    y, proba = multiclass_data(2000, 4, 2, 1.8)
    for score, metric in (("brier", brier_score), ("log_loss", negative_log_likelihood)):
        for method in ("isotonic", "temperature"):
            if score == "log_loss" and method == "isotonic":
                continue
            parts = calibration_decomposition(y, proba, score=score, method=method)
            assert parts.score == metric(y, proba)
            identity = parts.miscalibration - parts.discrimination + parts.uncertainty
            assert identity == pytest.approx(parts.score, abs=1e-13)
            assert parts.refinement == pytest.approx(parts.score - parts.miscalibration, abs=1e-13)
            assert parts.miscalibration > 0 and parts.discrimination > 0
    # multiclass CORP Brier: the sum of the classes' one-vs-rest decompositions
    total = {part: 0.0 for part in PARTS}
    for k in range(4):
        one = decompose((y == k).astype(int), proba[:, k], scoring_function=SquaredError())
        for part in PARTS:
            total[part] += one.to_dicts()[0][part]
    parts = calibration_decomposition(y, proba, score="brier")
    for part in PARTS:
        assert parts[part] == pytest.approx(total[part], abs=1e-12)


@pytest.mark.parametrize("sharpen", [0.6, 1.0, 2.0])
def test_temperature_split_equals_probmetrics(sharpen):
    y, proba = multiclass_data(3000, 5, int(sharpen * 10), sharpen)
    names = [
        "refinement_logloss_ts-mix_all",
        "calib-err_logloss_ts-mix_all",
        "refinement_brier_ts-mix_all",
    ]
    results = Metrics.from_names(names).compute_all_from_labels_probs(
        torch.as_tensor(y), torch.as_tensor(proba, dtype=torch.float64)
    )
    log_loss = calibration_decomposition(y, proba, score="log_loss", method="temperature")
    brier = calibration_decomposition(y, proba, score="brier", method="temperature")
    assert log_loss.refinement == pytest.approx(float(results[names[0]]), abs=1e-9)
    assert log_loss.miscalibration == pytest.approx(float(results[names[1]]), abs=1e-9)
    assert brier.refinement == pytest.approx(float(results[names[2]]), abs=1e-9)
    assert log_loss.temperature == pytest.approx(sharpen, rel=0.1)
    assert refinement_loss(y, proba) == log_loss.refinement


def test_refinement_ignores_the_temperature_of_the_logits():
    y, proba = multiclass_data(2000, 3, 5, 1.0)
    logits = np.log(proba)
    for temperature in (0.5, 3.0):
        scaled = np.exp(logits / temperature)
        scaled /= scaled.sum(axis=1, keepdims=True)
        assert refinement_loss(y, scaled) == pytest.approx(refinement_loss(y, proba), abs=1e-9)
        assert negative_log_likelihood(y, scaled) > negative_log_likelihood(y, proba) + 0.01


def test_decomposition_bad_options():
    y, proba = multiclass_data(50, 3, 6, 1.0)
    with pytest.raises(ValueError, match="binary problem for score='log_loss'"):
        calibration_decomposition(y, proba, score="log_loss")
    with pytest.raises(ValueError, match="`score` to be one of"):
        calibration_decomposition(y, proba, score="nll")
    with pytest.raises(ValueError, match="`method` to be one of"):
        calibration_decomposition(y, proba, method="platt")


def test_refinement_scorer_in_grid_search_is_the_cross_validated_refinement():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(600, 5))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=600) > 0, "yes", "no")
    cv = StratifiedKFold(3)
    grid = [1e-2, 1.0]
    search = GridSearchCV(
        LogisticRegression(), {"C": grid}, scoring=get_scorer("neg_refinement_log_loss"), cv=cv
    ).fit(X, y)
    for C, score in zip(grid, search.cv_results_["mean_test_score"], strict=True):
        folds = []
        for train, test in cv.split(X, y):
            fitted = LogisticRegression(C=C).fit(X[train], y[train])
            folds.append(-refinement_loss(y[test], fitted.predict_proba(X[test])))
        assert score == pytest.approx(np.mean(folds), abs=1e-12)


def test_refinement_scorer_in_skorch_epoch_scoring_and_early_stopping(digits):
    X_train, _, y_train, _ = digits
    scoring = EpochScoring(
        get_scorer("neg_refinement_log_loss"),
        lower_is_better=False,
        name="valid_refinement",
        use_caching=False,
    )
    stop = EarlyStopping(monitor="valid_refinement", lower_is_better=False, patience=2)
    net = NetClassifier(
        module__hidden_units=(32,),
        lr=0.01,
        max_epochs=4,
        batch_size=64,
        random_state=0,
        train_split=0.25,
        callbacks=[scoring, stop],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net.fit(X_train, y_train)
    recorded = net.history[:, "valid_refinement"]
    assert len(recorded) == len(net.history) and all(value < 0 for value in recorded)
    assert any(net.history[:, "valid_refinement_best"])


def test_temperature_split_at_the_bounds_of_the_search():
    # scores that separate the classes: the NLL falls as the temperature does, down to the
    # bound, where the refinement is (to rounding) the infimum, the mixing's cost
    y = np.array([0, 0, 1, 1])
    p = np.array([0.3, 0.4, 0.6, 0.7])
    parts = calibration_decomposition(y, p, score="log_loss", method="temperature")
    assert parts.temperature == pytest.approx(1e-4)
    assert parts.refinement == pytest.approx(-np.log(1 - 1 / 5 + 1 / 10), abs=1e-9)
    # scores that favour the wrong class: the best temperature is the largest
    flipped = calibration_decomposition(y, 1 - p, score="log_loss", method="temperature")
    assert flipped.temperature == pytest.approx(1e4)
    assert flipped.refinement == pytest.approx(np.log(2), abs=1e-3)


def test_temperature_search_stops_once_newton_steps_fall_below_rounding(monkeypatch):
    # a Newton step below rounding lands on beta, the bracket's new end; it used to be
    # taken for a step outside the bracket and start a bisection of some 40 more passes
    evaluate = _tempered._TemperedNLL.__call__
    passes = []

    def counted(self, beta):
        passes.append(beta)
        return evaluate(self, beta)

    monkeypatch.setattr(_tempered._TemperedNLL, "__call__", counted)
    for seed in range(10):
        rng = np.random.default_rng(seed)
        logits = rng.normal(size=(500, 4)) * 3
        proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        truth = np.exp(logits / 2) / np.exp(logits / 2).sum(axis=1, keepdims=True)
        y = (truth.cumsum(axis=1) < rng.random((500, 1))).sum(axis=1).clip(0, 3)
        passes.clear()
        parts = calibration_decomposition(
            y, proba, score="log_loss", method="temperature", sample_weight=rng.random(500)
        )
        assert len(passes) <= 10
        assert parts.temperature == pytest.approx(2.0, rel=0.2)


@pytest.mark.parametrize("weighted", [False, True])
def test_corp_pools_tied_scores_alike_in_float32_and_float64(weighted):
    # ties (two decimals) and a -0.0 are pooled by value, whatever the precision (the
    # scores differ: 1 - p of 1-D input is taken in the input's precision)
    rng = np.random.default_rng(3)
    p = np.round(rng.random(500), 2).astype(np.float32)
    p[:5] = -0.0
    y = (rng.random(500) < p).astype(int)
    weight = rng.random(500) if weighted else None
    single = calibration_decomposition(y, p, sample_weight=weight)
    double = calibration_decomposition(y, p.astype(np.float64), sample_weight=weight)
    for part in ("discrimination", "refinement"):
        assert single[part] == pytest.approx(double[part], rel=1e-12)
    distinct = np.unique(p)
    fitted = isotonic_regression(
        [
            np.average(y[p == v], weights=None if weight is None else weight[p == v])
            for v in distinct
        ],
        sample_weight=[
            (p == v).sum() if weight is None else weight[p == v].sum() for v in distinct
        ],
    )
    refined = np.average(2 * (fitted[np.searchsorted(distinct, p)] - y) ** 2, weights=weight)
    assert single.refinement == pytest.approx(refined, rel=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_temperature_split_alike_with_and_without_numba(monkeypatch, weighted):
    pytest.importorskip("numba")
    rng = np.random.default_rng(11)
    logits = rng.normal(size=(70_000, 6)) * 3  # beyond the warm start's subsample
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    truth = np.exp(logits / 2) / np.exp(logits / 2).sum(axis=1, keepdims=True)
    y = (truth.cumsum(axis=1) < rng.random((70_000, 1))).sum(axis=1).clip(0, 5)
    weight = rng.random(70_000) if weighted else None
    found = {}
    for switch in ("1", "0"):
        monkeypatch.setenv("SKLEARN_CALIB_NUMBA", switch)
        found[switch] = calibration_decomposition(
            y, proba, score="log_loss", method="temperature", sample_weight=weight
        )
    assert found["1"].temperature == pytest.approx(2.0, rel=0.1)
    for part in ("refinement", "miscalibration", "temperature"):
        assert found["1"][part] == pytest.approx(found["0"][part], rel=1e-12), part
