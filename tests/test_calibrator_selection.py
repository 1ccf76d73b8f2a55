"""CalibratorSelector: cross-fitted choice among calibrators."""

import warnings

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.naive_bayes import GaussianNB

from sklearn_calib.calibrators import (
    CalibratedClassifier,
    CalibratorSelector,
    HistogramBinning,
    IsotonicCalibration,
    PlattScaling,
    StructuredMatrixScaling,
    TemperatureScaling,
)
from sklearn_calib.calibrators._repeated_fits import rank_scores
from sklearn_calib.scoring import brier_score, negative_log_likelihood


def overconfident(n_samples=600, n_classes=3, seed=0):
    rng = np.random.default_rng(seed)
    true = rng.normal(size=(n_samples, n_classes)) * 1.5
    y = np.argmax(true - np.log(-np.log(rng.uniform(size=true.shape))), axis=1)
    return 3.0 * true, y


CANDIDATES = [TemperatureScaling(), HistogramBinning(), IsotonicCalibration(), PlattScaling()]


def test_scores_are_the_held_out_scores_of_each_fold_and_the_best_is_refitted():
    logits, y = overconfident()
    weight = np.random.default_rng(1).uniform(0.5, 2.0, size=len(y))
    selector = CalibratorSelector(CANDIDATES, cv=3).fit(logits, y, sample_weight=weight)
    folds = list(StratifiedKFold(3).split(logits, y))
    for i, candidate in enumerate(CANDIDATES):
        expected = []
        for train, test in folds:
            fitted = clone(candidate).fit(
                logits[train], y[train], sample_weight=weight[train], classes=[0, 1, 2]
            )
            expected.append(
                -negative_log_likelihood(
                    y[test], fitted.predict_proba(logits[test]), sample_weight=weight[test]
                )
            )
        for j, value in enumerate(expected):
            assert selector.cv_results_[f"split{j}_test_score"][i] == pytest.approx(value)
        assert selector.cv_results_["mean_test_score"][i] == pytest.approx(np.mean(expected))
        assert selector.cv_results_["std_test_score"][i] == pytest.approx(np.std(expected))
    mean = selector.cv_results_["mean_test_score"]
    assert selector.best_index_ == int(np.argmax(mean))
    assert selector.best_score_ == mean.max()
    assert selector.cv_results_["rank_test_score"][selector.best_index_] == 1
    assert sorted(selector.cv_results_["rank_test_score"]) == [1, 2, 3, 4]
    assert (selector.cv_results_["mean_fit_time"] > 0).all()
    assert list(selector.cv_results_["calibrator"]) == [repr(c) for c in CANDIDATES]
    best = clone(CANDIDATES[selector.best_index_]).fit(logits, y, sample_weight=weight)
    np.testing.assert_allclose(selector.predict_proba(logits), best.predict_proba(logits))
    np.testing.assert_array_equal(selector.predict(logits), best.predict(logits))


def test_overconfident_logits_prefer_a_scaling_calibrator_by_log_loss():
    logits, y = overconfident(n_samples=1500, seed=2)
    selector = CalibratorSelector(
        [HistogramBinning(), TemperatureScaling(), StructuredMatrixScaling()], cv=5
    ).fit(logits, y)
    assert type(selector.best_calibrator_) in (TemperatureScaling, StructuredMatrixScaling)
    # histogram binning's held-out log loss is the worst (its empty-bin probabilities)
    assert selector.cv_results_["rank_test_score"][0] == 3


def test_any_scorer_by_name_or_callable():
    logits, y = overconfident(seed=3)
    by_name = CalibratorSelector(CANDIDATES, scoring="neg_brier", cv=3).fit(logits, y)
    folds = list(StratifiedKFold(3).split(logits, y))
    train, test = folds[0]
    fitted = clone(CANDIDATES[0]).fit(logits[train], y[train], classes=[0, 1, 2])
    assert by_name.cv_results_["split0_test_score"][0] == pytest.approx(
        -brier_score(y[test], fitted.predict_proba(logits[test]))
    )

    def top_accuracy(estimator, scores, y_true):
        return float(np.mean(estimator.predict(scores) == y_true))

    by_callable = CalibratorSelector(CANDIDATES, scoring=top_accuracy, cv=3).fit(logits, y)
    assert by_callable.cv_results_["split0_test_score"][0] == pytest.approx(
        np.mean(fitted.predict(logits[test]) == y[test])
    )


def test_folds_lacking_a_class_are_scored_against_every_class():
    # KFold on sorted labels: each held-out fold holds one class, each training part two.
    logits, y = overconfident(seed=4)
    order = np.argsort(y, kind="stable")
    selector = CalibratorSelector([TemperatureScaling(), PlattScaling()], cv=KFold(3))
    selector.fit(logits[order], y[order])
    assert np.isfinite(selector.cv_results_["mean_test_score"]).all()


def test_input_is_passed_to_every_candidate_and_works_inside_calibrated_classifier():
    X, y = make_classification(600, n_informative=4, n_classes=3, random_state=0)
    clf = CalibratedClassifier(
        GaussianNB(),
        calibrator=CalibratorSelector([TemperatureScaling(), PlattScaling()], cv=3),
        cv=0.4,
        random_state=0,
    ).fit(X, y)
    selector = clf.calibrators_[0]
    assert selector.input == "probabilities"
    assert selector.best_calibrator_.input == "probabilities"
    np.testing.assert_allclose(clf.predict_proba(X).sum(axis=1), 1.0)
    logits, y = overconfident(seed=5)
    on_proba = CalibratorSelector(CANDIDATES, cv=3, input="probabilities")
    on_proba.fit(softmax(logits, axis=1), y)
    assert on_proba.best_calibrator_.input == "probabilities"
    on_logits = CalibratorSelector(CANDIDATES, cv=3).fit(logits, y)
    np.testing.assert_allclose(
        on_proba.cv_results_["mean_test_score"],
        on_logits.cv_results_["mean_test_score"],
        atol=1e-6,
    )


def test_default_candidates_cover_binary_and_multiclass_problems():
    for n_classes in (2, 4):
        logits, y = overconfident(n_samples=500, n_classes=n_classes, seed=6)
        scores = logits[:, 1] - logits[:, 0] if n_classes == 2 else logits
        selector = CalibratorSelector(cv=3).fit(scores, y)
        assert len(selector.cv_results_["calibrator"]) == 6
        assert np.isfinite(selector.cv_results_["mean_test_score"]).all()
        assert selector.predict_proba(scores).shape == (len(y), n_classes)


@pytest.mark.slow
def test_parallel_fits_give_the_same_table():
    logits, y = overconfident(seed=7)
    serial = CalibratorSelector(CANDIDATES, cv=3).fit(logits, y)
    parallel = CalibratorSelector(CANDIDATES, cv=3, n_jobs=2).fit(logits, y)
    np.testing.assert_array_equal(
        serial.cv_results_["mean_test_score"], parallel.cv_results_["mean_test_score"]
    )


@pytest.mark.parametrize(
    "calibrators, match",
    [([], r"at least one calibrator, got \[\]"), ([TemperatureScaling(), "ts"], "got 'ts'")],
)
def test_bad_candidate_lists_are_rejected(calibrators, match):
    logits, y = overconfident(seed=8)
    with pytest.raises(ValueError, match=match):
        CalibratorSelector(calibrators, cv=3).fit(logits, y)


def test_ranks_follow_grid_search_ties_share_nan_last():
    np.testing.assert_array_equal(rank_scores(np.array([-0.5, -0.2, -0.5, -0.9])), [2, 1, 2, 4])
    np.testing.assert_array_equal(rank_scores(np.array([np.nan, -1.0, np.nan])), [2, 1, 2])
    np.testing.assert_array_equal(rank_scores(np.array([-np.inf, np.nan, 0.0])), [2, 3, 1])


def test_tied_candidates_share_a_rank_and_the_first_is_chosen():
    logits, y = overconfident(seed=10)
    selector = CalibratorSelector([TemperatureScaling(), TemperatureScaling()], cv=3)
    selector.fit(logits, y)
    np.testing.assert_array_equal(selector.cv_results_["rank_test_score"], [1, 1])
    assert selector.best_index_ == 0


def _nan_for_binning(estimator, scores, y_true):
    """Negated log loss, but NaN for histogram binning."""
    if isinstance(estimator.calibrator, HistogramBinning):
        return np.nan
    return -negative_log_likelihood(y_true, estimator.predict_proba(scores), labels=[0, 1, 2])


def test_a_nan_score_ranks_last_and_is_never_chosen():
    # HistogramBinning first and NaN: GridSearchCV would not choose it, nor does the selector.
    logits, y = overconfident(seed=11)
    selector = CalibratorSelector(
        [HistogramBinning(), TemperatureScaling()], scoring=_nan_for_binning, cv=3
    )
    with pytest.warns(UserWarning, match=r"HistogramBinning\(\) is NaN"):
        selector.fit(logits, y)
    np.testing.assert_array_equal(selector.cv_results_["rank_test_score"], [2, 1])
    assert selector.best_index_ == 1
    assert isinstance(selector.best_calibrator_, TemperatureScaling)
    assert np.isfinite(selector.best_score_)


def test_no_candidate_with_a_score_is_an_error():
    logits, y = overconfident(seed=12)
    with pytest.raises(ValueError, match="NaN for every candidate"):
        CalibratorSelector([HistogramBinning()], scoring=_nan_for_binning, cv=3).fit(logits, y)


def test_a_fold_without_weight_is_named():
    logits, y = overconfident(n_samples=60, seed=13)
    weight = np.zeros(60)
    weight[:5] = 1.0  # stratified folds in row order: fold 1 holds out all the weight
    with pytest.raises(ValueError, match="got 0 for the training part of fold 1 of 3"):
        CalibratorSelector(cv=3).fit(logits, y, sample_weight=weight)


@pytest.mark.parametrize("n_jobs", [None, 2])
@pytest.mark.slow
def test_each_distinct_warning_is_issued_once_per_fit(n_jobs):
    # Probabilities declared as logits: the selector and each of its 6 candidates on 5 folds
    # and the refit (31 fits) each detect it, and beta calibration hits the separation of
    # the absent classes of some folds; each distinct warning is issued once.
    logits, y = overconfident(seed=14)
    proba = softmax(logits, axis=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CalibratorSelector(cv=5, n_jobs=n_jobs).fit(proba, y)
    messages = [(w.category, str(w.message)) for w in caught]
    assert len(messages) == len(set(messages))
    declared = [m for _, m in messages if "declared as logits" in m]
    assert len(declared) == 1
    assert caught[0].filename == __file__
