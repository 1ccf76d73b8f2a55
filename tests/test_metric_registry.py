"""A metric is declared once and every part reads the declaration: a toy metric, registered
by a fixture, appears in the report table and metric_values, calibration_report, the
scorers, the accumulator (numpy and torch batches) and CalibrationScoring."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from skorch.dataset import Dataset
from skorch.helper import predefined_split

from sklearn_calib.estimators import CalibrationScoring, NetClassifier
from sklearn_calib.metrics import (
    REPORT_METRICS,
    CalibrationAccumulator,
    calibration_error_ci,
    calibration_report,
    expected_calibration_error,
    metric_values,
)
from sklearn_calib.metrics._core._registry import (
    KERNELS,
    Column,
    Metric,
    Scorer,
    Streaming,
    by_name,
    declared,
    register,
    unregister,
)
from sklearn_calib.metrics._functions._predictions import check_predictions
from sklearn_calib.metrics._functions._scores import mean_plan
from sklearn_calib.scoring import get_scorer, get_scorer_names


def mean_first_column(y_true, y_prob, *, labels=None, sample_weight=None):
    """The weighted mean probability of the first column (a toy metric)."""
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return _mean_first_column(data)


def _mean_first_column(data):
    return float(np.average(data.proba[:, 0], weights=data.sample_weight))


@pytest.fixture
def toy():
    """The toy metric, declared for the test and taken out after it."""
    metric = Metric(
        "toy",
        function=mean_first_column,
        kernel=_mean_first_column,
        plan=lambda data: mean_plan(data, data.proba[:, 0].astype(np.float64)),
        column=Column("toy", "Toy"),
        report="toy column",
        scorers=(Scorer("neg_toy"),),
        streaming=Streaming(
            sums=lambda proba, y_index, weight: (weight.sum(), weight @ proba[:, 0]),
            n_sums=2,
            value=lambda sums: sums[1] / sums[0],
            per_epoch=True,
        ),
    )
    yield register(metric)
    unregister("toy")


def predictions(n=600, n_classes=3, seed=0):
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.ones(n_classes), n)
    return rng.integers(0, n_classes, n), proba, rng.random(n)


def test_the_report_table_and_metric_values_read_the_declaration(toy):
    y, proba, weight = predictions()
    values = metric_values(y, proba)
    assert list(values) == [metric.name for metric in REPORT_METRICS] + ["toy"]
    assert values["toy"] == pytest.approx(proba[:, 0].mean(), rel=1e-12)
    assert metric_values(y, proba, metrics=["toy"]) == {"toy": values["toy"]}
    assert KERNELS[mean_first_column].compute is _mean_first_column
    report = calibration_report(y, proba, n_resamples=50, random_state=0, output_dict=True)
    assert list(report["errors"]) == [
        "ece",
        "adaptive_ece",
        "classwise_ece",
        "smooth_ece",
        "debiased_ce",
        "toy",
    ]
    assert report["errors"]["toy"]["estimate"] == pytest.approx(values["toy"], rel=1e-12)
    assert "toy column" in calibration_report(y, proba, n_resamples=50, random_state=0)
    interval = calibration_error_ci(mean_first_column, y, proba, n_resamples=50)
    assert interval.low <= interval.estimate <= interval.high


def test_the_scorers_read_the_declaration(toy):
    X, y = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=200).fit(X[:500], y[:500])
    assert "neg_toy" in get_scorer_names()
    score = get_scorer("neg_toy")(model, X[500:700], y[500:700])
    proba = model.predict_proba(X[500:700])
    assert score == pytest.approx(-proba[:, 0].mean(), rel=1e-12)


def test_the_accumulator_sums_numpy_and_torch_batches_of_the_declaration(toy):
    y, proba, weight = predictions(1000)
    expected = mean_first_column(y, proba, sample_weight=weight)
    first = CalibrationAccumulator(metrics=["toy", "ece"])
    first.update(y[:400], proba[:400], weight[:400])
    second = CalibrationAccumulator(metrics=["toy", "ece"])
    second.update(torch.as_tensor(y[400:]), torch.as_tensor(proba[400:]), weight[400:])
    result = first.merge(second).compute()
    assert result.toy == pytest.approx(expected, rel=1e-12)
    assert result.ece == pytest.approx(
        expected_calibration_error(y, proba, sample_weight=weight), rel=1e-12
    )
    assert CalibrationAccumulator().metrics[-1] == "toy"


def test_calibration_scoring_records_the_declared_metric(toy):
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    net = NetClassifier(
        module__hidden_units=(16,),
        max_epochs=1,
        batch_size=64,
        random_state=0,
        train_split=predefined_split(Dataset(X[900:1100], y[900:1100])),
        callbacks=[CalibrationScoring(metrics=("toy", "ece"))],
    ).fit(X[:900], y[:900])
    proba = net.predict_proba(X[900:1100])
    assert net.history[-1, "valid_toy"] == pytest.approx(proba[:, 0].mean(), rel=1e-6)


def test_a_metric_taken_out_is_read_nowhere(toy):
    unregister("toy")
    try:
        assert by_name("toy") is None and mean_first_column not in KERNELS
        assert "neg_toy" not in get_scorer_names()
        with pytest.raises(ValueError, match="to name metrics from"):
            CalibrationAccumulator(metrics=["toy"])
        with pytest.raises(ValueError, match="Unknown metric names"):
            metric_values([0, 1], [0.3, 0.6], metrics=["toy"])
    finally:
        register(toy)


def test_a_name_function_or_scorer_is_declared_once(toy):
    with pytest.raises(ValueError, match="declared already"):
        register(Metric("toy"))
    with pytest.raises(ValueError, match="declared already"):
        register(Metric("other", scorers=(Scorer("neg_ece"),)))
    with pytest.raises(ValueError, match="mean_first_column is declared already"):
        register(Metric("other", function=mean_first_column))
    with pytest.raises(ValueError, match="Expected a Metric declaration, got 'toy'"):
        register("toy")
    with pytest.raises(ValueError, match="a row of calibration_report needs a kernel and a plan"):
        register(Metric("other", function=len, kernel=len, report="other"))
    assert [metric.name for metric in declared()].count("toy") == 1
