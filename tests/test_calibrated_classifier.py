import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_digits, make_classification
from sklearn.dummy import DummyClassifier
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    ShuffleSplit,
    StratifiedKFold,
    cross_val_predict,
    train_test_split,
)
from sklearn.neural_network import MLPClassifier
from sklearn.svm import LinearSVC

from sklearn_calib.calibrators import (
    BetaCalibration,
    CalibratedClassifier,
    HistogramBinning,
    IsotonicCalibration,
    PlattScaling,
    TemperatureScaling,
)
from sklearn_calib.calibrators.calibrated_classifier import _one_of_each_class
from sklearn_calib.scoring import expected_calibration_error, get_scorer


def _data(n_classes=3, n_samples=300, seed=0):
    return make_classification(
        n_samples=n_samples,
        n_features=6,
        n_informative=4,
        n_classes=n_classes,
        random_state=seed,
    )


def test_holdout_fits_the_estimator_and_the_calibrator_on_disjoint_stratified_parts():
    X, y = _data()
    clf = CalibratedClassifier(LogisticRegression(), cv=0.2, random_state=3)
    clf.fit(X, y)
    train, calibration = train_test_split(
        np.arange(len(y)), test_size=60, stratify=y, random_state=np.random.RandomState(3)
    )
    estimator = LogisticRegression().fit(X[train], y[train])
    calibrator = TemperatureScaling().fit(
        estimator.decision_function(X[calibration]), y[calibration]
    )
    np.testing.assert_allclose(clf.estimators_[0].coef_, estimator.coef_)
    assert clf.calibrators_[0].temperature_ == pytest.approx(calibrator.temperature_)
    np.testing.assert_allclose(
        clf.predict_proba(X), calibrator.predict_proba(estimator.decision_function(X))
    )
    assert clf.score_method_ == "decision_function"
    assert clf.calibrators_[0].input == "logits"
    assert clf.n_features_in_ == 6
    np.testing.assert_array_equal(clf.classes_, [0, 1, 2])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_estimator_without_decision_function_feeds_probabilities():
    X, y = _data(seed=1)
    mlp = MLPClassifier(hidden_layer_sizes=(8,), max_iter=300, random_state=0)
    clf = CalibratedClassifier(mlp, calibrator=HistogramBinning(n_bins=5), random_state=0).fit(X, y)
    assert clf.score_method_ == "predict_proba"
    assert clf.calibrators_[0].input == "probabilities"
    expected = clf.calibrators_[0].predict_proba(clf.estimators_[0].predict_proba(X))
    np.testing.assert_allclose(clf.predict_proba(X), expected)
    np.testing.assert_allclose(clf.predict_proba(X).sum(axis=1), 1.0)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_labels_of_any_type(n_classes):
    X, y = _data(n_classes=n_classes, seed=2)
    names = np.array(["ant", "bee", "cow"])[y]
    clf = CalibratedClassifier(LogisticRegression(), random_state=0).fit(X, names)
    np.testing.assert_array_equal(clf.classes_, ["ant", "bee", "cow"][:n_classes])
    proba = clf.predict_proba(X)
    assert proba.shape == (len(y), n_classes)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[proba.argmax(axis=1)])
    # The temperature keeps the estimator's predictions.
    np.testing.assert_array_equal(clf.predict(X), clf.estimators_[0].predict(X))
    if n_classes == 2:
        # A binary decision function is 1-D: the calibrator reads it as log-odds.
        assert clf.calibrators_[0].n_classes_ == 2
        assert not hasattr(clf.calibrators_[0], "n_features_in_")


def test_prefit_calibrates_on_all_data_with_a_frozen_estimator():
    X, y = _data(seed=4)
    fitted = LogisticRegression().fit(X[:150], y[:150])
    clf = CalibratedClassifier(FrozenEstimator(fitted)).fit(X[150:], y[150:])
    assert isinstance(clf.estimators_[0], FrozenEstimator)
    np.testing.assert_array_equal(clf.estimators_[0].coef_, fitted.coef_)
    expected = TemperatureScaling().fit(fitted.decision_function(X[150:]), y[150:])
    assert clf.calibrators_[0].temperature_ == pytest.approx(expected.temperature_)
    # A FrozenEstimator is prefit whatever `cv` says.
    frozen = CalibratedClassifier(FrozenEstimator(fitted), cv=3).fit(X[150:], y[150:])
    np.testing.assert_allclose(frozen.predict_proba(X), clf.predict_proba(X))
    with pytest.raises(NotFittedError, match="fit the estimator before freezing it"):
        CalibratedClassifier(FrozenEstimator(LogisticRegression())).fit(X, y)


def test_a_calibration_part_lacking_the_first_class_is_calibrated_by_label():
    X, y = _data(seed=6)
    y = y + 1  # 1-based labels
    fitted = LogisticRegression().fit(X[:150], y[:150])
    rows = 150 + np.flatnonzero(y[150:] != 1)
    clf = CalibratedClassifier(FrozenEstimator(fitted)).fit(X[rows], y[rows])
    np.testing.assert_array_equal(clf.calibrators_[0].classes_, fitted.classes_)
    expected = TemperatureScaling().fit(
        fitted.decision_function(X[rows]), y[rows], classes=fitted.classes_
    )
    assert clf.calibrators_[0].temperature_ == pytest.approx(expected.temperature_)


def test_cv_averages_the_calibrated_folds():
    X, y = _data(seed=5)
    clf = CalibratedClassifier(LogisticRegression(), calibrator=IsotonicCalibration(), cv=3)
    clf.fit(X, y)
    assert len(clf.estimators_) == len(clf.calibrators_) == 3
    expected = np.zeros((len(y), 3))
    for train, test in StratifiedKFold(3).split(X, y):
        estimator = LogisticRegression().fit(X[train], y[train])
        calibrator = IsotonicCalibration().fit(estimator.decision_function(X[test]), y[test])
        expected += calibrator.predict_proba(estimator.decision_function(X)) / 3
    np.testing.assert_allclose(clf.predict_proba(X), expected)


def test_sample_weights_reach_the_estimator_and_the_calibrator():
    X, y = _data(seed=6)
    weight = np.random.default_rng(0).uniform(0.1, 3, size=len(y))
    clf = CalibratedClassifier(LogisticRegression(), cv=0.2, random_state=1)
    clf.fit(X, y, sample_weight=weight)
    train, calibration = train_test_split(
        np.arange(len(y)), test_size=60, stratify=y, random_state=np.random.RandomState(1)
    )
    estimator = LogisticRegression().fit(X[train], y[train], sample_weight=weight[train])
    calibrator = TemperatureScaling().fit(
        estimator.decision_function(X[calibration]), y[calibration], weight[calibration]
    )
    np.testing.assert_allclose(clf.estimators_[0].coef_, estimator.coef_)
    assert clf.calibrators_[0].temperature_ == pytest.approx(calibrator.temperature_)
    with pytest.raises(ValueError, match="negative"):
        clone(clf).fit(X, y, sample_weight=-weight)


def test_bad_input_raises():
    X, y = _data(seed=7)
    with pytest.raises(ValueError, match="1 class"):
        CalibratedClassifier(LogisticRegression()).fit(X, np.zeros(len(y)))
    rare = y.copy()
    rare[0] = 3
    with (
        pytest.warns(UserWarning, match="least populated"),
        pytest.raises(ValueError, match=r"fitted on the training part of fold 1 of 3, which"),
    ):
        CalibratedClassifier(LogisticRegression(), cv=3).fit(X, rare)
    fitted = LogisticRegression().fit(X, y)
    with pytest.raises(ValueError, match="does not know"):
        CalibratedClassifier(FrozenEstimator(fitted)).fit(X, rare)


@pytest.mark.slow
def test_grid_search_tunes_estimator_and_calibrator_by_ece():
    X, y = load_digits(return_X_y=True)
    X, y = X[:900] / 16.0, y[:900]
    search = GridSearchCV(
        CalibratedClassifier(LogisticRegression(max_iter=300), cv=0.25, random_state=0),
        {"estimator__C": [0.01, 1.0], "calibrator": [TemperatureScaling(), HistogramBinning()]},
        scoring=get_scorer("neg_ece"),
        cv=3,
    )
    search.fit(X, y)
    assert np.isfinite(search.best_score_) and search.best_score_ <= 0
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert set(search.best_params_) == {"estimator__C", "calibrator"}
    assert search.best_score_ == np.max(search.cv_results_["mean_test_score"])
    best = search.best_estimator_
    assert expected_calibration_error(y, best.predict_proba(X)) < 0.2


@pytest.mark.slow
def test_nested_calibrator_parameters_are_tunable():
    X, y = _data(seed=8)
    clf = CalibratedClassifier(LogisticRegression(), calibrator=HistogramBinning(), random_state=0)
    assert clf.get_params()["calibrator__n_bins"] == 15
    search = GridSearchCV(
        clf,
        {"calibrator__n_bins": [3, 10], "estimator__C": [0.1, 1.0]},
        cv=3,
        scoring=get_scorer("neg_ece"),
    ).fit(X, y)
    assert search.best_estimator_.calibrators_[0].n_bins in (3, 10)
    assert search.best_estimator_.calibrators_[0].bin_values_.shape == (
        search.best_params_["calibrator__n_bins"],
    )


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.slow
def test_net_classifier_is_calibrated_through_its_logits(n_classes):
    from sklearn_calib.estimators import NetClassifier

    X, y = _data(n_classes=n_classes, seed=9)
    names = np.array(["ant", "bee", "cow"])[y]
    net = NetClassifier(module__hidden_units=(16,), lr=0.05, max_epochs=10, random_state=0)
    clf = CalibratedClassifier(net, calibrator=TemperatureScaling(), cv=0.25, random_state=0)
    clf.fit(X, names)
    assert clf.score_method_ == "decision_function"
    assert clf.calibrators_[0].input == "logits"
    np.testing.assert_array_equal(clf.classes_, ["ant", "bee", "cow"][:n_classes])
    train, calibration = train_test_split(
        np.arange(len(y)), test_size=75, stratify=names, random_state=np.random.RandomState(0)
    )
    fitted = clone(net).fit(X[train], names[train])
    calibrator = TemperatureScaling().fit(
        fitted.decision_function(X[calibration]), names[calibration]
    )
    assert clf.calibrators_[0].temperature_ == pytest.approx(calibrator.temperature_, rel=1e-5)
    np.testing.assert_allclose(
        clf.predict_proba(X), calibrator.predict_proba(fitted.decision_function(X)), atol=1e-6
    )
    np.testing.assert_array_equal(clf.predict(X), fitted.predict(X))


@pytest.mark.parametrize(
    "size, n_calibration",
    # np.float32(0.2) is 0.2000000030, a fraction of 300 rows of 60.0000009: 61 rows.
    [(0.2, 60), (np.float32(0.2), 61), (np.float64(0.2), 60)],
)
@pytest.mark.slow
def test_a_held_out_share_of_any_float_type(size, n_calibration):
    X, y = _data()
    clf = CalibratedClassifier(LogisticRegression(), cv=size, random_state=3)
    clf.fit(X, y)
    train, _ = train_test_split(
        np.arange(len(y)),
        test_size=n_calibration,
        stratify=y,
        random_state=np.random.RandomState(3),
    )
    np.testing.assert_allclose(
        clf.estimators_[0].coef_, LogisticRegression().fit(X[train], y[train]).coef_
    )


def test_holdout_calibrates_on_every_class_even_when_stratification_rounds_one_away():
    X, _ = _data(n_samples=200, seed=8)
    y = np.zeros(200, dtype=int)
    y[:5], y[5:10] = 1, 2
    clf = CalibratedClassifier(
        LogisticRegression(), calibrator=HistogramBinning(), cv=0.01, random_state=0
    )
    clf.fit(X, y)
    # The stratified split of 3 rows takes class 0 only; one row of each other class moves
    # from the training part to the calibration part, which then holds every class.
    train, calibration = train_test_split(
        np.arange(200), test_size=3, stratify=y, random_state=np.random.RandomState(0)
    )
    assert set(y[calibration]) == {0}
    assert clf.estimators_[0].coef_.shape == (3, X.shape[1])
    # The calibrator saw 5 rows: the 3 of the split and one of each of classes 1 and 2.
    assert clf.calibrators_[0].bin_weights_.sum() == 5
    np.testing.assert_array_equal(clf.classes_, [0, 1, 2])


def test_moving_rows_into_the_calibration_part_keeps_the_training_order():
    y = np.array([0] * 8 + [1, 2])
    train = np.array([9, 3, 0, 7, 8, 1, 5])
    calibration = np.array([2, 4, 6])
    new_train, new_calibration = _one_of_each_class(
        train, calibration, y, np.array([0, 1, 2]), np.random.RandomState(0)
    )
    np.testing.assert_array_equal(new_train, [3, 0, 7, 1, 5])
    np.testing.assert_array_equal(np.sort(new_calibration), [2, 4, 6, 8, 9])


def test_a_classifier_whose_scores_tie_calibrates_with_temperature_one():
    X, y = _data(seed=9)
    clf = CalibratedClassifier(DummyClassifier(strategy="uniform"), random_state=0)
    with pytest.warns(UserWarning, match="every temperature is optimal"):
        clf.fit(X, y)
    assert clf.calibrators_[0].temperature_ == 1.0
    np.testing.assert_allclose(clf.predict_proba(X), 1 / 3)


class _PredictOnly(ClassifierMixin, BaseEstimator):
    """A classifier with neither decision_function nor predict_proba; counts its fits."""

    fits = 0

    def fit(self, X, y):
        type(self).fits += 1
        self.classes_ = np.unique(y)
        return self

    def predict(self, X):
        return np.full(len(X), self.classes_[0])


def test_an_estimator_without_scores_is_rejected_before_fitting():
    X, y = _data(seed=10)
    for cv in (0.1, 5):
        with pytest.raises(ValueError, match="'decision_function'.*'predict_proba'"):
            CalibratedClassifier(_PredictOnly(), cv=cv).fit(X, y)
    assert _PredictOnly.fits == 0


def test_refit_on_an_array_drops_the_feature_names_of_a_dataframe_fit():
    pandas = pytest.importorskip("pandas")
    X, y = _data(seed=5)
    frame = pandas.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    clf = CalibratedClassifier(LogisticRegression(), random_state=0).fit(frame, y)
    np.testing.assert_array_equal(clf.feature_names_in_, frame.columns)
    clf.fit(X, y)
    assert not hasattr(clf, "feature_names_in_")
    assert clf.n_features_in_ == X.shape[1]


@pytest.mark.parametrize("ensemble", [True, False])
@pytest.mark.parametrize("calibrator", [None, PlattScaling(), IsotonicCalibration()], ids=repr)
def test_calibration_folds_holding_a_single_class_fit(ensemble, calibrator):
    # scikit-learn's non-regression test for its issue #7796: the first and last held-out
    # folds of KFold(3) hold one class, their training folds both.
    X, _ = make_classification(n_samples=10, n_features=5, n_classes=2, random_state=0)
    y = np.array([1, 1, 1, 1, 1, 0, 0, 0, 0, 0])
    clf = CalibratedClassifier(
        LinearSVC(C=1.0, random_state=7),
        calibrator=calibrator,
        cv=KFold(n_splits=3),
        ensemble=ensemble,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    proba = clf.predict_proba(X)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert len(clf.calibrators_) == (3 if ensemble else 1)


class _TwoClassesOnly(BaseEstimator):
    """A calibrator (without ``classes=``) that cannot fit scores of a single class."""

    def fit(self, scores, y, sample_weight=None):
        if len(np.unique(y)) < 2:
            raise ValueError("needs both classes.")
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, scores):
        positive = 1 / (1 + np.exp(-np.asarray(scores)))
        return np.column_stack([1 - positive, positive])


def test_a_calibrator_that_cannot_fit_a_fold_names_it_and_the_fix():
    X, _ = make_classification(n_samples=10, n_features=5, n_classes=2, random_state=0)
    y = np.array([1, 1, 1, 1, 1, 0, 0, 0, 0, 0])
    clf = CalibratedClassifier(
        LinearSVC(random_state=7), calibrator=_TwoClassesOnly(), cv=KFold(n_splits=3)
    )
    with pytest.raises(
        ValueError,
        match=r"on held-out fold 1 of 3 \(4 samples, classes \[1\]\): needs both classes\. "
        r"Use stratified `cv` folds .* or ensemble=False",
    ):
        clf.fit(X, y)
    # one calibrator on the held-out scores of all the folds sees both classes
    clf.set_params(ensemble=False).fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(X).sum(axis=1), 1.0)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.slow
def test_ensemble_false_calibrates_the_cross_validated_scores(n_classes):
    X, y = _data(n_classes=n_classes, seed=11)
    cv = StratifiedKFold(3)
    clf = CalibratedClassifier(LogisticRegression(), cv=cv, ensemble=False)
    clf.fit(X, y)
    held_out = cross_val_predict(LogisticRegression(), X, y, cv=cv, method="decision_function")
    calibrator = TemperatureScaling().fit(held_out, y)
    estimator = LogisticRegression().fit(X, y)
    assert len(clf.estimators_) == len(clf.calibrators_) == 1
    np.testing.assert_allclose(clf.estimators_[0].coef_, estimator.coef_)
    assert clf.calibrators_[0].temperature_ == pytest.approx(calibrator.temperature_, rel=1e-12)
    np.testing.assert_allclose(
        clf.predict_proba(X), calibrator.predict_proba(estimator.decision_function(X))
    )
    # scikit-learn's temperature calibration with the same semantics agrees
    theirs = CalibratedClassifierCV(
        LogisticRegression(), method="temperature", cv=cv, ensemble=False
    ).fit(X, y)
    atol = 1e-5 if n_classes == 2 else 1e-3
    np.testing.assert_allclose(clf.predict_proba(X), theirs.predict_proba(X), atol=atol)


def test_ensemble_false_needs_folds_that_partition_the_samples():
    X, y = _data(seed=12)
    clf = CalibratedClassifier(
        LogisticRegression(), cv=ShuffleSplit(3, random_state=0), ensemble=False
    )
    with pytest.raises(ValueError, match="partition the samples"):
        clf.fit(X, y)


@pytest.mark.parametrize("ensemble", [True, False])
@pytest.mark.slow
def test_parallel_folds_give_the_same_model(ensemble):
    X, y = _data(seed=13)
    serial = CalibratedClassifier(LogisticRegression(), cv=3, ensemble=ensemble)
    parallel = clone(serial).set_params(n_jobs=2)
    np.testing.assert_array_equal(
        serial.fit(X, y).predict_proba(X), parallel.fit(X, y).predict_proba(X)
    )


class _HugeScores(ClassifierMixin, BaseEstimator):
    """A classifier whose decision function is 1e200 times a logistic regression's."""

    def fit(self, X, y):
        self.model_ = LogisticRegression().fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def decision_function(self, X):
        return 1e200 * self.model_.decision_function(X)


@pytest.mark.parametrize("cv", [0.1, 3])
def test_a_calibrator_error_on_a_part_holding_every_class_passes_unchanged(cv):
    # Scores out of the calibrators' range: the error names the scores, with no advice
    # about folds (which would not help).
    X, y = _data(seed=14)
    clf = CalibratedClassifier(_HugeScores(), cv=cv, random_state=0)
    with pytest.raises(ValueError, match=r"^Expected `scores` \(logits\)") as error:
        clf.fit(X, y)
    assert "folds" not in str(error.value)


@pytest.mark.filterwarnings("ignore:`method` and `calibration_size`:FutureWarning")
def test_an_unfitted_prefit_estimator_points_to_frozen_estimator():
    # GridSearchCV clones the meta-estimator, and the clone of a fitted estimator is
    # unfitted: the error of the deprecated method="prefit" says to wrap it in
    # FrozenEstimator, which then works.
    X, y = _data(seed=20)
    fitted = LogisticRegression().fit(X[:150], y[:150])
    grid = {"calibrator": [TemperatureScaling(), PlattScaling()]}
    search = GridSearchCV(CalibratedClassifier(fitted, method="prefit"), grid, cv=3)
    with pytest.raises(NotFittedError, match=r"sklearn\.frozen\.FrozenEstimator"):
        search.set_params(error_score="raise").fit(X[150:], y[150:])
    frozen = GridSearchCV(CalibratedClassifier(FrozenEstimator(fitted)), grid, cv=3)
    frozen.fit(X[150:], y[150:])
    assert type(frozen.best_estimator_.calibrators_[0]) in (TemperatureScaling, PlattScaling)
    np.testing.assert_array_equal(frozen.best_estimator_.estimators_[0].coef_, fitted.coef_)


@pytest.mark.parametrize(
    "method, part",
    [("cv", "held-out fold 1 of 3"), ("holdout", "the calibration part")],
)
def test_a_calibration_part_without_weight_is_named(method, part):
    X, y = _data(n_samples=90, seed=21)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    weight = np.ones(90)
    if method == "cv":
        cv = StratifiedKFold(3)
        held_out = next(iter(cv.split(X, y)))[1]
        weight[held_out] = 0.0
        clf = CalibratedClassifier(LogisticRegression(), cv=cv)
    else:
        clf = CalibratedClassifier(LogisticRegression(), cv=0.2, random_state=0)
        _, calibration = train_test_split(
            np.arange(90), test_size=18, stratify=y, random_state=np.random.RandomState(0)
        )
        weight[calibration] = 0.0
    with pytest.raises(ValueError, match=f"got 0 for {part}"):
        clf.fit(X, y, sample_weight=weight)


@pytest.mark.slow
def test_each_distinct_warning_is_issued_once_per_fit():
    # KFold(5) on sorted labels: each held-out fold lacks a class, whose sigmoid then
    # has no minimum; beta calibration warns the same way for each fold.
    X, y = _data(seed=22)
    order = np.argsort(y, kind="stable")
    clf = CalibratedClassifier(LogisticRegression(), calibrator=BetaCalibration(), cv=KFold(5))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.fit(X[order], y[order])
    messages = [(w.category, str(w.message)) for w in caught]
    assert messages and len(messages) == len(set(messages))
