"""The spellings deprecated in 0.2: each warns with a FutureWarning naming its new spelling
and gives the same result as that spelling, for one minor version."""

import pickle
import re
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from sklearn_calib.calibrators import (
    CalibratedClassifier,
    CalibratorSelector,
    DirichletCalibration,
    HistogramBinning,
    MatrixScaling,
    MulticalibrationBoosting,
    ScalingBinning,
    StructuredMatrixScaling,
    StructuredVectorScaling,
    TemperatureScaling,
    VectorScaling,
)


def _logits(n_samples=240, n_classes=3, seed=0):
    rng = np.random.default_rng(seed)
    true = rng.normal(size=(n_samples, n_classes))
    y = np.argmax(true - np.log(-np.log(rng.uniform(size=true.shape))), axis=1)
    return 3.0 * true, y


def _small_dirichlet():
    """DirichletCalibration choosing its penalties among few values on 2 folds."""
    return DirichletCalibration(
        cv=2,
        l2_regularization_off_diagonal_grid=(1e-3, 1e-1),
        l2_regularization_intercept_grid=(1e-3, 1e-1),
    )


def _same_fit(old, new, scores, y, matches, **fit_params):
    """Fit both; the old spelling warns once per name of ``matches``, the new one not at
    all; return both fitted models after checking their probabilities are equal."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old.fit(scores, y, **fit_params)
    messages = [str(w.message) for w in caught if w.category is FutureWarning]
    assert len(messages) == len(matches), messages
    for match, message in zip(matches, messages, strict=True):
        assert re.search(match, message), (match, message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        new.fit(scores, y, **fit_params)
    np.testing.assert_array_equal(old.predict_proba(scores), new.predict_proba(scores))
    return old, new


# ------------------------------------------------------------ renamed parameters

RENAMED_PARAMETERS = [
    (HistogramBinning, {"mode": "classwise"}, {"multi_class": "classwise"}),
    (ScalingBinning, {"mode": "classwise"}, {"multi_class": "classwise"}),
    (
        MatrixScaling,
        {"off_diagonal_l2": 0.5, "intercept_l2": 0.1},
        {"l2_regularization_off_diagonal": 0.5, "l2_regularization_intercept": 0.1},
    ),
    (
        DirichletCalibration,
        {"off_diagonal_l2_grid": [1e-2, 1e-3], "intercept_l2_grid": [1e-2], "cv": 3},
        {
            "l2_regularization_off_diagonal_grid": [1e-2, 1e-3],
            "l2_regularization_intercept_grid": [1e-2],
            "cv": 3,
        },
    ),
    (
        StructuredVectorScaling,
        {"lambda_intercept": 3.0, "lambda_diagonal": 0.5},
        {"l2_regularization_intercept": 3.0, "l2_regularization_diagonal": 0.5},
    ),
    (
        StructuredMatrixScaling,
        {"lambda_intercept": 3.0, "lambda_diagonal": 0.5, "lambda_off_diagonal": 2.0},
        {
            "l2_regularization_intercept": 3.0,
            "l2_regularization_diagonal": 0.5,
            "l2_regularization_off_diagonal": 2.0,
        },
    ),
    (
        MulticalibrationBoosting,
        {
            "multiclass": "top_label",
            "max_rounds": 6,
            "validation": 0.3,
            "n_rounds_no_change": 2,
            "random_state": 0,
        },
        {
            "multi_class": "top_label",
            "max_iter": 6,
            "validation_fraction": 0.3,
            "n_iter_no_change": 2,
            "random_state": 0,
        },
    ),
]


@pytest.mark.parametrize(
    "cls, old, new", RENAMED_PARAMETERS, ids=[cls.__name__ for cls, _, _ in RENAMED_PARAMETERS]
)
def test_a_renamed_calibrator_parameter_warns_and_means_the_same(cls, old, new):
    logits, y = _logits()
    renamed = [name for name in old if name not in new]
    matches = [f"^`{name}` of {cls.__name__} was renamed `" for name in renamed]
    old_model, _ = _same_fit(cls(**old), cls(**new), logits, y, matches)
    # The old spelling still round-trips through get_params, clone and pickle.
    assert clone(old_model).get_params()[renamed[0]] == old[renamed[0]]
    np.testing.assert_array_equal(
        pickle.loads(pickle.dumps(old_model)).predict_proba(logits), old_model.predict_proba(logits)
    )


def test_a_renamed_parameter_given_under_both_names_is_refused():
    logits, y = _logits()
    with pytest.raises(ValueError, match="both; `mode` is deprecated: pass `multi_class` only"):
        HistogramBinning(mode="classwise", multi_class="classwise").fit(logits, y)


def test_renamed_fitted_attributes_warn_and_read_the_new_ones():
    logits, y = _logits()
    dirichlet = _small_dirichlet().fit(logits, y)
    with pytest.warns(FutureWarning, match="`off_diagonal_l2_` .* renamed"):
        assert dirichlet.off_diagonal_l2_ == dirichlet.l2_regularization_off_diagonal_
    with pytest.warns(FutureWarning, match="`intercept_l2_` .* renamed"):
        assert dirichlet.intercept_l2_ == dirichlet.l2_regularization_intercept_
    boosting = MulticalibrationBoosting(max_iter=3, early_stopping=False).fit(logits, y)
    with pytest.warns(FutureWarning, match="`n_rounds_` .* renamed `n_iter_`"):
        assert boosting.n_rounds_ == boosting.n_iter_ == 3


def test_a_state_saved_under_the_old_names_loads_under_the_new_ones():
    logits, y = _logits()
    fitted = _small_dirichlet().fit(logits, y)
    state = dict(vars(fitted))
    for new, old in [
        ("l2_regularization_off_diagonal_grid", "off_diagonal_l2_grid"),
        ("l2_regularization_intercept_grid", "intercept_l2_grid"),
        ("l2_regularization_off_diagonal_", "off_diagonal_l2_"),
        ("l2_regularization_intercept_", "intercept_l2_"),
    ]:
        state[old] = state.pop(new)
    loaded = DirichletCalibration.__new__(DirichletCalibration)
    loaded.__setstate__(state)
    assert loaded.off_diagonal_l2_grid == "deprecated"
    assert loaded.l2_regularization_off_diagonal_ == fitted.l2_regularization_off_diagonal_
    assert "off_diagonal_l2_" not in vars(loaded)
    np.testing.assert_array_equal(loaded.predict_proba(logits), fitted.predict_proba(logits))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        clone(loaded).fit(logits, y)


# ------------------------------------------------------------ keyword-only constructors


@pytest.mark.parametrize(
    "old, new",
    [
        (
            lambda: HistogramBinning(5, "quantile"),
            lambda: HistogramBinning(n_bins=5, strategy="quantile"),
        ),
        (lambda: TemperatureScaling("logits", "ece"), lambda: TemperatureScaling(objective="ece")),
        (lambda: VectorScaling("logits", 50), lambda: VectorScaling(max_iter=50)),
        (
            lambda: CalibratorSelector(None, "neg_log_loss", 3),
            lambda: CalibratorSelector(scoring="neg_log_loss", cv=3),
        ),
    ],
    ids=["HistogramBinning", "TemperatureScaling", "VectorScaling", "CalibratorSelector"],
)
def test_positional_arguments_warn_and_pass_by_their_former_names(old, new):
    with pytest.warns(FutureWarning, match="by keyword"):
        model = old()
    assert model.get_params() == new().get_params()


def test_keyword_only_constructors_still_refuse_what_python_refuses():
    with pytest.raises(TypeError, match="multiple values for 'n_bins'"):
        HistogramBinning(5, n_bins=3)
    with pytest.raises(TypeError, match="at most 4 positional arguments"):
        HistogramBinning(5, "uniform", "top_label", "logits", 0)


# ------------------------------------------------------------ CalibratedClassifier's split


def _classification():
    return make_classification(300, n_features=6, n_informative=4, n_classes=3, random_state=0)


@pytest.mark.parametrize(
    "old, new",
    [
        ({"method": "holdout", "calibration_size": 0.3}, {"cv": 0.3}),
        ({"calibration_size": 0.3}, {"cv": 0.3}),
        ({"method": "holdout"}, {}),
        ({"method": "cv", "cv": 3}, {"cv": 3}),
        ({"method": "cv"}, {"cv": 5}),
    ],
)
@pytest.mark.slow
def test_method_and_calibration_size_warn_and_mean_cv(old, new):
    X, y = _classification()
    _same_fit(
        CalibratedClassifier(LogisticRegression(), random_state=0, **old),
        CalibratedClassifier(LogisticRegression(), random_state=0, **new),
        X,
        y,
        ["`method` and `calibration_size` .* deprecated"],
    )


def test_method_prefit_warns_and_means_a_frozen_estimator():
    X, y = _classification()
    fitted = LogisticRegression().fit(X[:150], y[:150])
    _same_fit(
        CalibratedClassifier(fitted, method="prefit"),
        CalibratedClassifier(FrozenEstimator(fitted)),
        X[150:],
        y[150:],
        ["FrozenEstimator"],
    )


def test_a_number_of_calibration_samples_warns_and_holds_them_out():
    X, y = _classification()
    with pytest.warns(FutureWarning, match="StratifiedShuffleSplit"):
        clf = CalibratedClassifier(LogisticRegression(), calibration_size=50, random_state=1)
        clf.fit(X, y)
    train, _ = train_test_split(
        np.arange(len(y)), test_size=50, stratify=y, random_state=np.random.RandomState(1)
    )
    np.testing.assert_allclose(
        clf.estimators_[0].coef_, LogisticRegression().fit(X[train], y[train]).coef_
    )


def test_the_calibrator_passed_by_position_warns():
    X, y = _classification()
    with pytest.warns(FutureWarning, match="Pass calibrator=... to CalibratedClassifier"):
        old = CalibratedClassifier(LogisticRegression(), HistogramBinning(), random_state=0)
    new = CalibratedClassifier(LogisticRegression(), calibrator=HistogramBinning(), random_state=0)
    np.testing.assert_array_equal(old.fit(X, y).predict_proba(X), new.fit(X, y).predict_proba(X))


@pytest.mark.parametrize(
    "saved, expected",
    [
        ({"method": "holdout", "calibration_size": 0.3, "cv": 5}, {"cv": 0.3}),
        ({"method": "cv", "calibration_size": 0.1, "cv": 3}, {"cv": 3}),
        ({"method": "holdout", "calibration_size": 40, "cv": 5}, {"method": "holdout", "cv": 5}),
    ],
)
def test_a_state_saved_with_method_loads_with_the_cv_it_meant(saved, expected):
    X, y = _classification()
    fitted = CalibratedClassifier(LogisticRegression(), random_state=0).fit(X, y)
    state = {**vars(fitted), **saved}
    loaded = CalibratedClassifier.__new__(CalibratedClassifier)
    loaded.__setstate__(state)
    params = loaded.get_params(deep=False)
    assert {name: params[name] for name in expected} == expected
    np.testing.assert_array_equal(loaded.predict_proba(X), fitted.predict_proba(X))


def test_a_state_saved_with_method_prefit_loads_with_a_frozen_estimator():
    X, y = _classification()
    fitted = LogisticRegression().fit(X, y)
    model = CalibratedClassifier(FrozenEstimator(fitted)).fit(X, y)
    state = {**vars(model), "estimator": fitted, "method": "prefit", "calibration_size": 0.1}
    loaded = CalibratedClassifier.__new__(CalibratedClassifier)
    loaded.__setstate__(state)
    assert isinstance(loaded.estimator, FrozenEstimator) and loaded.method == "deprecated"
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        refitted = clone(loaded).fit(X, y)
    np.testing.assert_array_equal(refitted.predict_proba(X), model.predict_proba(X))


# ------------------------------------------------------------ renamed functions


@pytest.mark.parametrize(
    "old, new",
    [
        ("smooth_ece", "smooth_calibration_error"),
        ("differentiable_ece", "differentiable_calibration_error"),
    ],
)
def test_the_torch_calibration_errors_of_0_1_warn_and_give_the_same_value(old, new):
    import torch

    from sklearn_calib import losses

    logits, y = _logits(n_samples=50)
    probs, target = torch.softmax(torch.from_numpy(logits), 1), torch.from_numpy(y)
    assert old not in losses.__all__ and new in losses.__all__
    with pytest.warns(FutureWarning, match=f"`{old}` was renamed `{new}`"):
        value = getattr(losses, old)(probs, target)
    assert value.item() == getattr(losses, new)(probs, target).item()


# ------------------------------------------------------------ internals out of the API


def test_the_evaluation_tables_column_names_are_internal():
    from sklearn_calib import evaluation

    assert {"TEMPERATURE_COLUMN", "interval_column"}.isdisjoint(evaluation.__all__)
    with pytest.warns(FutureWarning, match="`sklearn_calib.evaluation.TEMPERATURE_COLUMN` is no"):
        assert evaluation.TEMPERATURE_COLUMN == "T"
    with pytest.warns(FutureWarning, match="no longer public: an interval's column"):
        from sklearn_calib.evaluation import interval_column
    assert interval_column("ECE") == "ECE 95% CI"
    with pytest.raises(AttributeError, match="has no attribute 'TEMPERATURE'"):
        _ = evaluation.TEMPERATURE


# ------------------------------------------------------------ the changelog


def test_the_changelog_lists_every_renamed_parameter_and_attribute():
    from pathlib import Path

    import sklearn_calib.calibrators as calibrators

    changes = (Path(__file__).resolve().parents[1] / "CHANGES.rst").read_text()
    classes = [getattr(calibrators, name) for name in calibrators.__all__]
    renamed = {
        pair
        for cls in classes
        if isinstance(cls, type)
        for table in ("_renamed_parameters", "_renamed_attributes")
        for pair in getattr(cls, table, {}).items()
    }
    assert ("mode", "multi_class") in renamed and ("n_rounds_", "n_iter_") in renamed
    named = set(re.findall(r"``[^`]*``", changes))

    def listed(name):
        return any(re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", code) for code in named)

    missing = [pair for pair in renamed if not all(listed(name) for name in pair)]
    assert missing == []
    for old in ("method", "calibration_size", "losses.smooth_ece", "losses.differentiable_ece"):
        assert listed(old), old


@pytest.mark.parametrize("name", ["DEFAULT_LRS", "REFERENCE_PAIRING", "MixedTarget"])
def test_the_estimators_internals_warn_and_are_the_same_objects(name):
    from sklearn_calib import estimators
    from sklearn_calib.estimators import _recipes, _targets

    assert name not in estimators.__all__
    with pytest.warns(FutureWarning, match=f"`sklearn_calib.estimators.{name}` is no longer"):
        value = getattr(estimators, name)
    assert value is getattr(_recipes, name, None) or value is getattr(_targets, name)
