"""Metrics, accumulators and calibrator fits of Dask collections equal the in-memory ones,
on a two-worker cluster; Dask stays an optional import."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sklearn_calib import metrics
from sklearn_calib._dask_chunks import ChunkedRows, is_dask_collection
from sklearn_calib.calibrators import (
    HistogramBinning,
    MulticalibrationBoosting,
    PlattScaling,
    TemperatureScaling,
)
from sklearn_calib.metrics import CalibrationAccumulator
from sklearn_calib.metrics._core._dispatch import HANDLERS

REPO = Path(__file__).resolve().parents[1]


def test_importing_and_measuring_arrays_does_not_import_dask():
    code = (
        "import sys\n"
        "from sklearn_calib.metrics import CalibrationAccumulator, expected_calibration_error\n"
        "from sklearn_calib import TemperatureScaling\n"
        "expected_calibration_error([0, 1], [[0.8, 0.2], [0.3, 0.7]])\n"
        "CalibrationAccumulator().update([0, 1], [[0.8, 0.2], [0.3, 0.7]]).compute()\n"
        "TemperatureScaling().fit([[1.0, 0.0], [0.0, 2.0]], [0, 1])\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=REPO)


def test_dask_collections_are_recognised_by_their_protocol():
    class Lazy:
        def __dask_graph__(self):
            return {}

    assert is_dask_collection(Lazy())
    assert not is_dask_collection(Lazy)
    assert not is_dask_collection(np.ones(3))
    assert not is_dask_collection([0.2, 0.8])


distributed = pytest.importorskip("distributed")

#: The tests share a cluster of worker processes, minutes of the suite.
pytestmark = pytest.mark.slow
dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")


@pytest.fixture(scope="module")
def client(dask_client):
    return dask_client


def predictions(n=12000, n_classes=4, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, n_classes)) * 2.5
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    labels = np.argmax(logits / 1.6 + rng.gumbel(size=logits.shape), axis=1)
    return logits, labels, proba.astype(np.float32), rng.random(n)


def chunked(y, proba, weight):
    """The arrays in chunks, held by the cluster's workers (as data read from storage
    would be), so that each computation does not send them again."""
    return dask.persist(
        da.from_array(y, chunks=2500),
        da.from_array(proba, chunks=(3000, proba.shape[1])),
        da.from_array(weight, chunks=4000),
    )


@pytest.mark.parametrize("weighted", [False, True])
def test_accumulator_update_of_dask_arrays_equals_one_pass_in_memory(client, weighted):
    _, y, proba, weight = predictions()
    dy, dproba, dweight = chunked(y, proba, weight)
    options = {"n_resamples": 30, "interval_metrics": ("ece", "smooth_ece"), "random_state": 2}
    on_dask = CalibrationAccumulator(**options).update(dy, dproba, dweight if weighted else None)
    in_memory = CalibrationAccumulator(**options).update(y, proba, weight if weighted else None)
    first, second = on_dask.compute(), in_memory.compute()
    assert first.n_samples == second.n_samples == len(y)
    for name in ("ece", "classwise_ece", "adaptive_ece", "smooth_ece", "sece", "nll", "brier"):
        assert abs(first[name] - second[name]) <= 1e-12 * abs(second[name]), name
    for name in ("ece", "smooth_ece"):
        np.testing.assert_allclose(
            first.intervals[name].replicates, second.intervals[name].replicates, rtol=1e-12
        )


@pytest.mark.parametrize("weighted", [False, True])
def test_calibrators_fit_dask_arrays_to_the_in_memory_values(client, weighted):
    logits, y, _, weight = predictions(n=90000, n_classes=5, seed=1)
    sample_weight = weight if weighted else None
    dy, dlogits, dweight = chunked(y, logits, weight)
    dask_weight = dweight if weighted else None
    expected = TemperatureScaling().fit(logits, y, sample_weight=sample_weight)
    found = TemperatureScaling().fit(dlogits, dy, sample_weight=dask_weight)
    assert abs(found.temperature_ - expected.temperature_) <= 1e-10 * expected.temperature_
    assert found.n_features_in_ == 5 and np.array_equal(found.classes_, expected.classes_)
    np.testing.assert_allclose(found.predict_proba(logits), expected.predict_proba(logits))
    for multi_class in ("top_label", "classwise"):
        expected = HistogramBinning(multi_class=multi_class).fit(
            logits, y, sample_weight=sample_weight
        )
        found = HistogramBinning(multi_class=multi_class).fit(
            dlogits, dy, sample_weight=dask_weight
        )
        np.testing.assert_allclose(found.bin_values_, expected.bin_values_, rtol=1e-12)
        np.testing.assert_allclose(found.bin_weights_, expected.bin_weights_, rtol=1e-12)
        np.testing.assert_array_equal(found.bin_edges_, expected.bin_edges_)


def test_dask_fits_reject_what_is_not_a_sum(client):
    logits, y, _, _ = predictions(n=1000)
    dy, dlogits, _ = chunked(y, logits, np.ones(1000))
    with pytest.raises(ValueError, match="objective='nll'"):
        TemperatureScaling(objective="ece").fit(dlogits, dy)
    with pytest.raises(ValueError, match="strategy='uniform'"):
        HistogramBinning(strategy="quantile").fit(dlogits, dy)
    with pytest.raises(ValueError, match="in-memory data only"):
        PlattScaling().fit(dlogits[:, 1] - dlogits[:, 0], (dy > 0).astype(int))


def test_readme_example_runs(client, capsys):
    readme = (REPO / "README.md").read_text()
    text = readme.split("## Measuring calibration at scale\n", 1)[1]
    example = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    small = example.replace("200_000", "40_000").replace("50_000", "10_000")
    # the test's cluster of worker processes stands in for the example's own
    small = small.replace(
        'with Client(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=":0"):',
        "if True:",
    )
    assert "if True:" in small
    exec(small, {"__name__": "__main__"})
    printed = capsys.readouterr().out.splitlines()
    ece = float(printed[0])
    temperature, smece = (float(value) for value in printed[1].split()[:2])
    assert 0.05 < ece < 0.5 and 1.5 < temperature < 2.5 and 0.05 < smece < 0.5


def test_metric_functions_of_dask_arrays_equal_the_in_memory_ones(client):
    _, y, proba, weight = predictions(seed=3)
    dy, dproba, dweight = chunked(y, proba, weight)
    for name in (
        "expected_calibration_error",
        "maximum_calibration_error",
        "adaptive_calibration_error",
        "debiased_calibration_error",
        "classwise_calibration_error",
        "top_label_calibration_error",
        "negative_log_likelihood",
        "brier_score",
        "top_label_accuracy",
        "smooth_ece",
    ):
        metric = getattr(metrics, name)
        for dask_weight, sample_weight in ((None, None), (dweight, weight)):
            found = metric(dy, dproba, sample_weight=dask_weight)
            expected = metric(y, proba, sample_weight=sample_weight)
            assert abs(found - expected) <= 1e-12 * abs(expected), name
    # Spiegelhalter's test is exact; KS and Kuiper are read at the fine cells' ends
    bounds = CalibrationAccumulator().update(y, proba).compute()
    for method, bound in (
        ("spiegelhalter", 0.0),
        ("ks", bounds.ks.bound),
        ("kuiper", bounds.kuiper.bound),
    ):
        found = metrics.calibration_test(dy, dproba, method=method)
        expected = metrics.calibration_test(y, proba, method=method)
        assert abs(found.statistic - expected.statistic) <= bound + 1e-9 * expected.statistic
    found = metrics.reliability_diagram(dy, dproba, strategy="quantile", confidence_level=0.9)
    expected = metrics.reliability_diagram(y, proba, strategy="quantile", confidence_level=0.9)
    for key in expected:
        np.testing.assert_allclose(found[key], expected[key], rtol=1e-12, equal_nan=True)
    sece = metrics.smooth_calibration_error(dy, dproba)
    assert abs(sece - metrics.smooth_calibration_error(y, proba)) < 1e-5
    found = metrics.calibration_error_ci(
        metrics.expected_calibration_error, dy, dproba, n_resamples=50, random_state=4
    )
    poisson = (
        CalibrationAccumulator(metrics=["ece"], n_resamples=50, random_state=4)
        .update(y, proba)
        .compute()
        .intervals["ece"]
    )
    np.testing.assert_allclose(found.replicates, poisson.replicates, rtol=1e-12)
    assert (found.low, found.high) == pytest.approx((poisson.low, poisson.high), rel=1e-12)


def test_metric_functions_route_dask_input_to_the_chunked_handlers(client, monkeypatch):
    _, y, proba, _ = predictions(n=3000, seed=4)
    calls = []
    handler = HANDLERS["expected_calibration_error"]
    monkeypatch.setitem(
        HANDLERS, "expected_calibration_error", lambda call: calls.append(call) or handler(call)
    )
    dy, dproba, _ = chunked(y, proba, np.ones(3000))
    metrics.expected_calibration_error(dy, dproba, n_bins=10)
    metrics.expected_calibration_error(y, proba, n_bins=10)
    assert len(calls) == 1 and calls[0].n_bins == 10 and calls[0].norm == "l1"


@pytest.mark.parametrize("n_classes", [2, 4])
def test_calibration_report_of_dask_arrays(client, n_classes):
    _, y, proba, weight = predictions(n=8000, n_classes=n_classes, seed=5)
    dy, dproba, dweight = chunked(y, proba, weight)
    options = {"n_resamples": 100, "random_state": 0, "output_dict": True}
    for dask_weight, sample_weight in ((None, None), (dweight, weight)):
        found = metrics.calibration_report(dy, dproba, sample_weight=dask_weight, **options)
        expected = metrics.calibration_report(y, proba, sample_weight=sample_weight, **options)
        for key, entry in expected["errors"].items():
            estimate = found["errors"][key]["estimate"]
            assert abs(estimate - entry["estimate"]) <= 1e-12 * entry["estimate"], key
            low, high = found["errors"][key]["low"], found["errors"][key]["high"]
            assert low <= estimate <= high and high - low < 4 * (entry["high"] - entry["low"])
        spiegelhalter = expected["tests"]["spiegelhalter"]["statistic"]
        assert found["tests"]["spiegelhalter"]["statistic"] == pytest.approx(
            spiegelhalter, rel=1e-12
        )
        for key in ("ks", "kuiper"):
            gap = abs(found["tests"][key]["statistic"] - expected["tests"][key]["statistic"])
            assert gap <= found["tests"][key]["bound"]
        log_loss = expected["decomposition"]["log_loss"]
        for part, value in log_loss.items():
            assert found["decomposition"]["log_loss"][part] == pytest.approx(value, rel=1e-8)
        brier, exact = found["decomposition"]["brier"], expected["decomposition"]["brier"]
        assert brier["score"] == pytest.approx(exact["score"], rel=1e-12)
        assert brier["uncertainty"] == pytest.approx(exact["uncertainty"], rel=1e-12)
        # a recalibration constant on cells removes at most what CORP's removes
        assert exact["refinement"] - 1e-12 <= brier["refinement"] <= exact["refinement"] + 2e-3
    text = metrics.calibration_report(dy, dproba, n_resamples=100, random_state=0)
    assert text.startswith("Calibration report: 8000 samples") and "Poisson bootstrap" in text
    with pytest.raises(ValueError, match="ci_method='percentile'"):
        metrics.calibration_report(dy, dproba, ci_method="bca")


def test_dask_report_reads_weights_and_undefined_tests_as_in_memory(client):
    _, y, proba, _ = predictions(n=6000, n_classes=3, seed=6)
    # integer weights count repeated rows (the temperature split's mixing), zeros none
    weight = np.random.default_rng(0).integers(0, 4, size=6000).astype(np.float64)
    dy, dproba, dweight = chunked(y, proba, weight)
    options = {"n_resamples": 50, "random_state": 0, "output_dict": True}
    found = metrics.calibration_report(dy, dproba, sample_weight=dweight, **options)
    expected = metrics.calibration_report(y, proba, sample_weight=weight, **options)
    for key, entry in expected["errors"].items():
        assert found["errors"][key]["estimate"] == pytest.approx(entry["estimate"], rel=1e-12)
    for part, value in expected["decomposition"]["log_loss"].items():
        assert found["decomposition"]["log_loss"][part] == pytest.approx(value, rel=1e-8), part
    # scores of 0 and 1 only: no test applies, as in memory
    certain = np.eye(3, dtype=np.float32)[y]
    found = metrics.calibration_report(dy, da.from_array(certain, chunks=(3000, 3)), **options)
    expected = metrics.calibration_report(y, certain, **options)
    for key, entry in expected["tests"].items():
        assert np.isnan(found["tests"][key]["statistic"]), key
        assert found["tests"][key]["undefined"] == entry["undefined"]
    with pytest.raises(ValueError, match="undefined: every weighted score is 0 or 1"):
        metrics.calibration_test(dy, da.from_array(certain, chunks=(3000, 3)), method="ks")


def test_dask_input_with_groups_is_not_supported(client):
    logits, y, proba, _ = predictions(n=2000, seed=7)
    dy, dproba, _ = chunked(y, proba, np.ones(2000))
    groups = np.arange(2000) % 3
    for metric in (metrics.expected_calibration_error, metrics.calibration_report):
        with pytest.raises(NotImplementedError, match="not one per group"):
            metric(dy, dproba, groups=groups)
    # without groups the same call runs, and in memory groups give one value per group
    assert isinstance(metrics.expected_calibration_error(dy, dproba, groups=None), float)
    assert set(metrics.expected_calibration_error(y, proba, groups=groups)) == {0, 1, 2}
    dlogits = chunked(y, logits, np.ones(2000))[1]
    with pytest.raises(ValueError, match="in-memory data only"):
        MulticalibrationBoosting().fit(dlogits, dy, groups=groups)


def test_reliability_diagram_of_dask_arrays_without_intervals(client):
    _, y, proba, _ = predictions(n=3000, seed=8)
    dy, dproba, _ = chunked(y, proba, np.ones(3000))
    found = metrics.reliability_diagram(dy, dproba)
    expected = metrics.reliability_diagram(y, proba)
    assert set(found) == set(expected) == {"edges", "count", "mean_confidence", "accuracy"}
    for key in expected:
        np.testing.assert_allclose(found[key], expected[key], rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize(
    "label_chunks, score_chunks",
    [
        ((2500, 1500), (3000, 1000)),
        ((1000, 0, 3000), (4000,)),
        ((1, 999, 3000), (500, 0, 3500)),
        ((1,) * 4000, (7,) * 571 + (3,)),
        ((0, 0), (0,)),
    ],
)
def test_labels_and_weights_are_read_in_the_chunks_of_the_scores(label_chunks, score_chunks):
    n = sum(score_chunks)
    y, proba = np.arange(n) % 3, np.random.default_rng(0).random((n, 3))
    weight = np.linspace(0.5, 2.0, n)
    rows = ChunkedRows(
        da.from_array(y, chunks=(label_chunks,)),
        da.from_array(proba, chunks=(score_chunks, (3,))),
        da.from_array(weight, chunks=(label_chunks[::-1],)),
    )
    blocks = rows.blocks()
    for column, expected in ((0, y), (1, proba), (2, weight)):
        read = dask.compute(*[block[column] for block in blocks], scheduler="sync")
        assert [len(part) for part in read] == list(rows.row_chunks)
        np.testing.assert_array_equal(np.concatenate(read), expected)


def test_chunks_without_rows_are_skipped(client):
    _, y, proba, weight = predictions(n=300, seed=9)
    rows = (0, 100, 0, 200)
    dy, dweight = da.from_array(y, chunks=(rows,)), da.from_array(weight, chunks=(rows,))
    dproba = da.from_array(proba, chunks=(rows, proba.shape[1]))
    for name in ("expected_calibration_error", "adaptive_calibration_error", "smooth_ece"):
        metric = getattr(metrics, name)
        found = metric(dy, dproba, sample_weight=dweight)
        assert found == pytest.approx(metric(y, proba, sample_weight=weight), rel=1e-12), name
    accumulated = CalibrationAccumulator().update(dy, dproba, dweight).compute()
    assert accumulated.n_samples == 300
    with pytest.raises(ValueError, match="at least one sample"):
        metrics.expected_calibration_error(dy[:0], dproba[:0])


def test_dask_updates_continue_the_row_ids_of_one_stream(client):
    _, y, proba, _ = predictions(n=4000, seed=10)
    dy, dproba, _ = chunked(y, proba, np.ones(4000))
    options = {"n_resamples": 20, "random_state": 3}
    once = CalibrationAccumulator(**options).update(y, proba).compute()
    two_dask = CalibrationAccumulator(**options).update(dy[:1500], dproba[:1500])
    two_dask.update(dy[1500:], dproba[1500:])
    numpy_first = CalibrationAccumulator(**options).update(y[:1500], proba[:1500])
    numpy_first.update(dy[1500:], dproba[1500:])
    for accumulator in (two_dask, numpy_first):
        assert accumulator.n_samples_ == 4000
        result = accumulator.compute()
        np.testing.assert_allclose(
            result.intervals["ece"].replicates, once.intervals["ece"].replicates, rtol=1e-12
        )


def test_dask_tests_and_intervals_do_not_depend_on_the_weights_scale(client):
    _, y, proba, weight = predictions(n=6000, seed=11)
    dy, dproba, dweight = chunked(y, proba, weight)
    for method in ("spiegelhalter", "ks", "kuiper"):
        unit = metrics.calibration_test(dy, dproba, sample_weight=dweight, method=method)
        for scale in (1e160, 1e-200):
            found = metrics.calibration_test(
                dy, dproba, sample_weight=dweight * scale, method=method
            )
            assert found.statistic == pytest.approx(unit.statistic, rel=1e-12), method
            assert found.pvalue == pytest.approx(unit.pvalue, rel=1e-9), method
    options = {"n_resamples": 30, "random_state": 0, "output_dict": True}
    unit = metrics.calibration_report(dy, dproba, sample_weight=dweight, **options)
    for scale in (1e160, 1e-200):
        kw = {"sample_weight": dweight * scale}
        found = metrics.calibration_report(dy, dproba, **kw, **options)
        for key, entry in unit["errors"].items():
            for part in ("estimate", "low", "high"):
                assert found["errors"][key][part] == pytest.approx(entry[part], rel=1e-9), key
        for key, entry in unit["tests"].items():
            assert found["tests"][key]["statistic"] == pytest.approx(entry["statistic"], rel=1e-12)
        diagram = metrics.reliability_diagram(
            dy, dproba, strategy="quantile", confidence_level=0.9, **kw
        )
        expected = metrics.reliability_diagram(
            y, proba, strategy="quantile", confidence_level=0.9, sample_weight=weight * scale
        )
        for key in ("accuracy_low", "accuracy_high"):
            np.testing.assert_allclose(diagram[key], expected[key], rtol=1e-12)
