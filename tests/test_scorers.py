import functools

import numpy as np
import pytest
import sklearn
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import UnsetMetadataPassedError
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import make_scorer
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    StratifiedKFold,
    cross_val_score,
    cross_validate,
)
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_calib.scoring import (
    adaptive_calibration_error,
    brier_score,
    classwise_calibration_error,
    debiased_calibration_error,
    expected_calibration_error,
    get_scorer,
    get_scorer_names,
    make_calibration_scorer,
    maximum_calibration_error,
    negative_log_likelihood,
    refinement_loss,
    smooth_calibration_error,
    smooth_ece,
    top_label_calibration_error,
)

METRICS = {
    "neg_ece": expected_calibration_error,
    "neg_mce": maximum_calibration_error,
    "neg_adaptive_ece": adaptive_calibration_error,
    "neg_classwise_ece": classwise_calibration_error,
    "neg_sece": smooth_calibration_error,
    "neg_brier": brier_score,
    "neg_nll": negative_log_likelihood,
    "neg_smooth_ece": smooth_ece,
    "neg_top_label_ece": top_label_calibration_error,
    "neg_debiased_ce": debiased_calibration_error,
    "neg_refinement_log_loss": functools.partial(refinement_loss, score="log_loss"),
    "neg_refinement_brier": functools.partial(refinement_loss, score="brier"),
}


@pytest.fixture(scope="module")
def digits_450():
    X, y = load_digits(return_X_y=True)
    return X[:450], y[:450]


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return X[:300], y[:300]


def logistic(C=1.0):
    return make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=300))


def manual_cv(estimator, X, y, cv, metric):
    scores = []
    for train, test in cv.split(X, y):
        fitted = clone(estimator).fit(X[train], y[train])
        proba = fitted.predict_proba(X[test])
        scores.append(-metric(y[test], proba, labels=fitted.classes_))
    return np.array(scores)


@pytest.mark.parametrize("name", sorted(METRICS))
@pytest.mark.parametrize("problem", ["digits_450", "cancer"])
def test_scorer_is_the_negated_metric(request, name, problem):
    X, y = request.getfixturevalue(problem)
    estimator = GaussianNB().fit(X[::2], y[::2])
    proba = estimator.predict_proba(X[1::2])
    scorer = get_scorer(name)
    assert scorer(estimator, X[1::2], y[1::2]) == pytest.approx(-METRICS[name](y[1::2], proba))
    # the same as the plain make_scorer scorer when every class is present
    plain = make_scorer(METRICS[name], response_method="predict_proba", greater_is_better=False)
    assert scorer(estimator, X[1::2], y[1::2]) == pytest.approx(plain(estimator, X[1::2], y[1::2]))
    weight = np.linspace(0.5, 2.0, len(y[1::2]))
    assert scorer(estimator, X[1::2], y[1::2], sample_weight=weight) == pytest.approx(
        -METRICS[name](y[1::2], proba, sample_weight=weight)
    )


@pytest.mark.slow
def test_grid_search_over_C_scored_by_neg_ece(digits_450):
    X, y = digits_450
    cv = StratifiedKFold(3)
    search = GridSearchCV(
        logistic(), {"logisticregression__C": [0.01, 1.0]}, scoring=get_scorer("neg_ece"), cv=cv
    ).fit(X, y)
    for C, score in zip([0.01, 1.0], search.cv_results_["mean_test_score"], strict=True):
        expected = manual_cv(logistic(C), X, y, cv, expected_calibration_error).mean()
        assert score == pytest.approx(expected, abs=1e-12)
    assert search.best_score_ == search.cv_results_["mean_test_score"].max()


def test_cross_val_score_with_neg_sece_on_a_binary_problem(cancer):
    X, y = cancer
    cv = StratifiedKFold(4)
    scores = cross_val_score(logistic(), X, y, scoring=get_scorer("neg_sece"), cv=cv)
    np.testing.assert_allclose(scores, manual_cv(logistic(), X, y, cv, smooth_calibration_error))
    assert np.all(scores < 0)


def test_routed_sample_weights_reach_the_scorer_that_requests_them(cancer):
    """With metadata routing, a scorer takes the fold's weights once it requests them; one
    that has not said raises, as scikit-learn's own scorers and estimators do."""
    X, y = cancer
    weight = np.where(y == 0, 3.0, 1.0)
    cv = StratifiedKFold(3)
    with sklearn.config_context(enable_metadata_routing=True):
        model = GaussianNB().set_fit_request(sample_weight=True)
        for scoring in (get_scorer("neg_ece"), "neg_log_loss"):
            with pytest.raises(UnsetMetadataPassedError, match="set_score_request"):
                cross_val_score(
                    model, X, y, params={"sample_weight": weight}, scoring=scoring, cv=cv
                )
        scorer = get_scorer("neg_ece").set_score_request(sample_weight=True)
        scores = cross_val_score(
            model, X, y, params={"sample_weight": weight}, scoring=scorer, cv=cv
        )
    expected = []
    for train, test in cv.split(X, y):
        fitted = GaussianNB().fit(X[train], y[train], sample_weight=weight[train])
        proba = fitted.predict_proba(X[test])[:, 1]
        expected.append(-expected_calibration_error(y[test], proba, sample_weight=weight[test]))
    np.testing.assert_allclose(scores, expected, rtol=1e-12)
    unweighted_scoring = [
        -expected_calibration_error(
            y[test],
            GaussianNB()
            .fit(X[train], y[train], sample_weight=weight[train])
            .predict_proba(X[test])[:, 1],
        )
        for train, test in cv.split(X, y)
    ]
    assert not np.allclose(scores, unweighted_scoring)


def test_multi_metric_cross_validate(digits_450):
    X, y = digits_450
    cv = StratifiedKFold(3)
    scoring = {name: get_scorer(name) for name in METRICS}
    scoring["accuracy"] = "accuracy"
    result = cross_validate(GaussianNB(), X, y, scoring=scoring, cv=cv)
    for name, metric in METRICS.items():
        np.testing.assert_allclose(
            result[f"test_{name}"], manual_cv(GaussianNB(), X, y, cv, metric), rtol=1e-12
        )
    assert np.all(result["test_accuracy"] > 0.5)


def test_binary_string_labels_with_a_fold_missing_a_class(cancer):
    X, y = cancer
    order = np.argsort(y, kind="stable")
    X, y = X[order], np.where(y[order] == 1, "benign", "malignant")
    cv = KFold(4)  # unshuffled over sorted labels: the first and last folds hold one class
    scores = cross_val_score(logistic(), X, y, scoring=get_scorer("neg_ece"), cv=cv)
    np.testing.assert_allclose(scores, manual_cv(logistic(), X, y, cv, expected_calibration_error))
    # without the fitted classes a metric cannot tell which class a lone label is
    _, test = next(cv.split(X, y))
    assert len(np.unique(y[test])) == 1
    fitted = logistic().fit(X, y)
    plain = make_scorer(
        expected_calibration_error, response_method="predict_proba", greater_is_better=False
    )
    with pytest.raises(ValueError, match="pass `labels=`"):
        plain(fitted, X[test], y[test])
    assert get_scorer("neg_ece")(fitted, X[test], y[test]) == pytest.approx(
        -expected_calibration_error(y[test], fitted.predict_proba(X[test]), labels=fitted.classes_)
    )


def test_multiclass_fold_missing_a_class_with_string_labels(digits_450):
    X, y = digits_450
    names = np.array(list("abcdefghij"))[y]
    fitted = GaussianNB().fit(X, names)
    keep = names != "c"
    scorer = get_scorer("neg_classwise_ece")
    expected = -classwise_calibration_error(
        names[keep], fitted.predict_proba(X[keep]), labels=fitted.classes_
    )
    assert scorer(fitted, X[keep], names[keep]) == pytest.approx(expected)


def test_make_calibration_scorer_passes_fixed_arguments(digits_450):
    X, y = digits_450
    fitted = GaussianNB().fit(X, y)
    proba = fitted.predict_proba(X)
    scorer = make_calibration_scorer(expected_calibration_error, n_bins=5, norm="l2")
    assert scorer(fitted, X, y) == pytest.approx(
        -expected_calibration_error(y, proba, n_bins=5, norm="l2")
    )
    assert "make_scorer(expected_calibration_error" in repr(scorer)
    assert "response_method='predict_proba'" in repr(scorer)


def test_get_scorer_falls_back_to_scikit_learn(digits_450):
    X, y = digits_450
    fitted = GaussianNB().fit(X, y)
    assert get_scorer("accuracy")(fitted, X, y) == pytest.approx(fitted.score(X, y))
    assert get_scorer(None) is None
    with pytest.raises(ValueError, match=r"not a valid scoring value; sklearn_calib.scoring.get"):
        get_scorer("neg_nothing")
    assert get_scorer("neg_ece") is not get_scorer("neg_ece")
    names = get_scorer_names()
    assert set(METRICS) <= set(names) and "accuracy" in names


def test_make_calibration_scorer_rejects_unknown_keywords_when_built():
    # a misspelt option used to fail only when the scorer ran, deep inside cross-validation
    with pytest.raises(ValueError, match=r"takes no argument\(s\) \['n_bin'\].*'n_bins'"):
        make_calibration_scorer(expected_calibration_error, n_bin=10)
    with pytest.raises(ValueError, match="`score_func` to be a metric function"):
        make_calibration_scorer("neg_ece")

    def any_options(y_true, y_prob, **kwargs):
        return 0.0

    assert make_calibration_scorer(any_options, anything=1) is not None
