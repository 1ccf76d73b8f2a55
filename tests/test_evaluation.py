"""The shared pipeline: metric_values, post-hoc calibration of held-out scores, the table."""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB

from sklearn_calib.calibrators import (
    CalibratedClassifier,
    HistogramBinning,
    IsotonicCalibration,
    TemperatureScaling,
)
from sklearn_calib.evaluation import (
    Prediction,
    calibrate_scores,
    classifier_scores,
    evaluation_table,
    format_table,
    posthoc_predictions,
)
from sklearn_calib.metrics import (
    REPORT_METRICS,
    calibration_error_ci,
    expected_calibration_error,
    metric_values,
    negative_log_likelihood,
)

CALIBRATORS = {
    "TS": TemperatureScaling(),
    "HB": HistogramBinning(n_bins=10),
    "iso": IsotonicCalibration(),
}


@pytest.fixture(scope="module")
def splits():
    X, y = load_digits(return_X_y=True)
    X, X_test, y, y_test = train_test_split(X / 16, y, test_size=0.3, random_state=0, stratify=y)
    X_train, X_cal, y_train, y_cal = train_test_split(X, y, test_size=0.3, random_state=0)
    return X_train, y_train, X_cal, y_cal, X_test, y_test


def test_metric_values_are_the_report_metrics_in_order():
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(4), size=300)
    y = rng.integers(0, 4, 300)
    values = metric_values(y, proba, n_bins=10)
    assert list(values) == [metric.name for metric in REPORT_METRICS]
    for metric in REPORT_METRICS:
        options = {"n_bins": 10} if metric.binned else {}
        assert values[metric.name] == metric.function(y, proba, **options)
    assert list(metric_values(y, proba, metrics=["ece", "nll"])) == ["ece", "nll"]


def test_metric_values_rejects_unknown_names():
    with pytest.raises(ValueError, match=r"Unknown metric names \['ECE'\]; expected names from"):
        metric_values([0, 1], [0.3, 0.6], metrics=["ECE"])


def test_report_metric_names_and_labels_are_unique():
    assert len({metric.name for metric in REPORT_METRICS}) == len(REPORT_METRICS)
    assert len({metric.label for metric in REPORT_METRICS}) == len(REPORT_METRICS)


@pytest.mark.parametrize("model", [LogisticRegression(max_iter=1000), GaussianNB()])
@pytest.mark.slow
def test_posthoc_predictions_equal_calibrated_classifier_prefit(model, splits):
    X_train, y_train, X_cal, y_cal, X_test, _ = splits
    model = model.fit(X_train, y_train)
    predictions = posthoc_predictions(model, CALIBRATORS, X_cal, y_cal, X_test)
    assert list(predictions) == ["", *CALIBRATORS]
    np.testing.assert_array_equal(predictions[""].proba, model.predict_proba(X_test))
    assert predictions[""].temperature is None
    for name, calibrator in CALIBRATORS.items():
        reference = CalibratedClassifier(FrozenEstimator(model), calibrator=calibrator).fit(
            X_cal, y_cal
        )
        np.testing.assert_array_equal(predictions[name].proba, reference.predict_proba(X_test))
        expected_temperature = getattr(reference.calibrators_[0], "temperature_", None)
        assert predictions[name].temperature == expected_temperature
    assert "temperature_" not in vars(CALIBRATORS["TS"])  # the given calibrators stay unfitted


@pytest.mark.slow
def test_classifier_scores_follow_the_estimator_methods(splits):
    X_train, y_train, X_cal, *_ = splits
    logistic = LogisticRegression(max_iter=1000).fit(X_train, y_train)
    scores, kind = classifier_scores(logistic, X_cal)
    assert kind == "logits"
    np.testing.assert_array_equal(scores, logistic.decision_function(X_cal))
    bayes = GaussianNB().fit(X_train, y_train)
    scores, kind = classifier_scores(bayes, X_cal)
    assert kind == "probabilities"
    np.testing.assert_array_equal(scores, bayes.predict_proba(X_cal))


def test_calibrate_scores_names_the_columns_with_classes():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((60, 3))
    y = np.array(["a", "c"] * 30)  # the calibration part lacks class "b"
    logits[np.arange(60), np.where(y == "a", 0, 2)] += 2.0
    proba, fitted = calibrate_scores(
        TemperatureScaling(), logits, y, logits[:5], classes=np.array(["a", "b", "c"])
    )
    assert proba.shape == (5, 3)
    assert list(fitted.classes_) == ["a", "b", "c"]


def test_evaluation_table_intervals_are_the_bootstrap_intervals_of_the_metrics():
    rng = np.random.default_rng(3)
    proba = rng.dirichlet(np.ones(4), size=300)
    y = rng.integers(0, 4, 300)
    predictions = {
        "m": Prediction(proba),
        "m+TS": Prediction(proba**2 / (proba**2).sum(1, keepdims=True), 2.0),
    }
    table = evaluation_table(
        predictions,
        y,
        n_bins=10,
        intervals=["ece", "nll"],
        confidence_level=0.9,
        n_resamples=200,
        random_state=7,
    )
    assert list(table["m"])[:6] == ["accuracy", "NLL", "NLL 90% CI", "Brier", "ECE", "ECE 90% CI"]
    for name, (p, _) in predictions.items():
        ece = calibration_error_ci(
            expected_calibration_error,
            y,
            p,
            n_bins=10,
            confidence_level=0.9,
            n_resamples=200,
            random_state=7,
        )
        nll = calibration_error_ci(
            negative_log_likelihood, y, p, confidence_level=0.9, n_resamples=200, random_state=7
        )
        assert table[name]["ECE 90% CI"] == (ece.low, ece.high)
        assert table[name]["NLL 90% CI"] == (nll.low, nll.high)
        assert table[name]["ECE"] == pytest.approx(ece.estimate, abs=1e-12)
    without = evaluation_table(predictions, y, n_bins=10)
    assert {
        name: {k: v for k, v in row.items() if "CI" not in k} for name, row in table.items()
    } == without
    with pytest.raises(ValueError, match=r"`intervals` to name metrics.*got \['ECE'\]"):
        evaluation_table(predictions, y, intervals=["ECE"])


def test_format_table_shows_intervals_in_columns_of_their_own_width():
    table = {
        "model": {"ECE": 0.0093, "ECE 95% CI": (0.0086, 0.0235), "T": 1.5},
        "model+HB": {"ECE": 0.01361, "ECE 95% CI": (0.00654, 0.02642)},
    }
    assert format_table(table).splitlines() == [
        "model         ECE        ECE 95% CI        T",
        "--------------------------------------------",
        "model      0.0093  [0.0086, 0.0235]   1.5000",
        "model+HB   0.0136  [0.0065, 0.0264]        -",
    ]


def test_evaluation_table_rows_hold_the_metric_values():
    rng = np.random.default_rng(2)
    proba = rng.dirichlet(np.ones(3), size=100)
    y = rng.integers(0, 3, 100)
    table = evaluation_table({"m": Prediction(proba), "m+TS": Prediction(proba, 2.0)}, y)
    values = metric_values(y, proba)
    assert table["m"] == {metric.label: values[metric.name] for metric in REPORT_METRICS}
    assert table["m+TS"] == {**table["m"], "T": 2.0}
