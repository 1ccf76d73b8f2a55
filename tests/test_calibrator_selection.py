"""CalibratorSelector: cross-fitted choice among calibrators."""

import re
from pathlib import Path

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
        CalibratorSelector([TemperatureScaling(), PlattScaling()], cv=3),
        calibration_size=0.4,
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


def test_readme_recipe_for_logits_and_labels_runs(capsys):
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    text = readme.split("### I have logits and labels\n", 1)[1]
    recipe = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    namespace = {}
    exec(recipe, namespace)  # the recipe makes its own overconfident logits
    selector, y = namespace["selector"], namespace["test_labels"]
    assert namespace["test_proba"].shape == (2000, 10)
    assert capsys.readouterr().out.splitlines()[0] == repr(selector.best_calibrator_)
    held_out = negative_log_likelihood(y, namespace["test_proba"])
    uncalibrated = softmax(namespace["test_logits"], axis=1)
    assert held_out < negative_log_likelihood(y, uncalibrated) - 0.1
