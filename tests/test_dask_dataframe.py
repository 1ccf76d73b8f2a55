"""Dask DataFrame columns (probability or logit columns, Series of labels and weights) give
the in-memory values of the metrics and calibrator fits, on a two-worker cluster, and
the in-memory errors where the columns are wrong."""

import re
import warnings

import numpy as np
import pytest

from sklearn_calib import metrics
from sklearn_calib.calibrators import HistogramBinning, TemperatureScaling

distributed = pytest.importorskip("distributed")

#: The tests share a cluster of worker processes, minutes of the suite.
pytestmark = pytest.mark.slow
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

N_CLASSES = 4
COLUMNS = [f"p{k}" for k in range(N_CLASSES)]
NAMES = np.array(["ant", "bee", "cat", "dog"])


@pytest.fixture(scope="module")
def client(dask_client):
    return dask_client


@pytest.fixture(scope="module")
def frame():
    """4000 overconfident predictions: logits, probabilities, labels and weights."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4000, N_CLASSES)) * 2.5
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    table = pd.DataFrame(proba, columns=COLUMNS)
    for k in range(N_CLASSES):
        table[f"z{k}"] = logits[:, k]
    table["y"] = np.argmax(logits / 1.6 + rng.gumbel(size=logits.shape), axis=1)
    table["w"] = rng.random(4000)
    return table


def columns(table, npartitions=3):
    """The Dask probabilities, logits, labels and weights of ``table``."""
    lazy = dd.from_pandas(table, npartitions=npartitions)
    return lazy[COLUMNS], lazy[[f"z{k}" for k in range(N_CLASSES)]], lazy["y"], lazy["w"]


def in_memory(table):
    logits = table[[f"z{k}" for k in range(N_CLASSES)]].to_numpy()
    return table[COLUMNS].to_numpy(), logits, table["y"].to_numpy(), table["w"].to_numpy()


def test_metrics_of_dataframe_columns_equal_the_in_memory_ones(client, frame):
    proba, _, y, weight = in_memory(frame)
    dproba, _, dy, dweight = columns(frame)
    # labels and weights partitioned apart from the probabilities are aligned by row
    dy_apart = dd.from_pandas(frame["y"], npartitions=5)
    assert dy_apart.npartitions != dproba.npartitions
    for name in (
        "expected_calibration_error",
        "maximum_calibration_error",
        "adaptive_calibration_error",
        "classwise_calibration_error",
        "top_label_calibration_error",
        "negative_log_likelihood",
        "brier_score",
        "smooth_ece",
    ):
        metric = getattr(metrics, name)
        for labels, dask_weight, sample_weight in (
            (dy, None, None),
            (dy, dweight, weight),
            (dy_apart, dweight, weight),
        ):
            found = metric(labels, dproba, sample_weight=dask_weight)
            expected = metric(y, proba, sample_weight=sample_weight)
            assert abs(found - expected) <= 1e-12 * abs(expected), name
    # a binary problem: a Series of positive-class probabilities
    positive, outcome = frame["p1"] / (frame["p0"] + frame["p1"]), frame["y"] == 1
    found = metrics.expected_calibration_error(
        dd.from_pandas(outcome, npartitions=3), dd.from_pandas(positive, npartitions=3)
    )
    expected = metrics.expected_calibration_error(outcome.to_numpy(), positive.to_numpy())
    assert expected > 0.05 and abs(found - expected) <= 1e-12 * expected


def test_calibration_report_of_dataframe_columns(client, frame):
    proba, _, y, weight = in_memory(frame)
    dproba, _, dy, dweight = columns(frame)
    options = {"n_resamples": 50, "random_state": 0, "output_dict": True}
    found = metrics.calibration_report(dy, dproba, sample_weight=dweight, **options)
    expected = metrics.calibration_report(y, proba, sample_weight=weight, **options)
    for key, entry in expected["errors"].items():
        estimate = found["errors"][key]["estimate"]
        assert abs(estimate - entry["estimate"]) <= 1e-12 * entry["estimate"], key
    spiegelhalter = expected["tests"]["spiegelhalter"]["statistic"]
    assert found["tests"]["spiegelhalter"]["statistic"] == pytest.approx(spiegelhalter, rel=1e-12)
    for part, value in expected["decomposition"]["log_loss"].items():
        assert found["decomposition"]["log_loss"][part] == pytest.approx(value, rel=1e-8), part


def test_calibrators_fit_dataframe_columns_to_the_in_memory_values(client, frame):
    _, logits, y, weight = in_memory(frame)
    _, dlogits, dy, dweight = columns(frame)
    expected = TemperatureScaling().fit(logits, y, sample_weight=weight)
    found = TemperatureScaling().fit(dlogits, dy, sample_weight=dweight)
    assert expected.temperature_ > 1.2  # the logits are overconfident
    assert abs(found.temperature_ - expected.temperature_) <= 1e-10 * expected.temperature_
    assert found.n_features_in_ == N_CLASSES
    for multi_class in ("top_label", "classwise"):
        expected = HistogramBinning(multi_class=multi_class).fit(logits, y, sample_weight=weight)
        found = HistogramBinning(multi_class=multi_class).fit(dlogits, dy, sample_weight=dweight)
        np.testing.assert_allclose(found.bin_values_, expected.bin_values_, rtol=1e-12)
        np.testing.assert_allclose(found.bin_weights_, expected.bin_weights_, rtol=1e-12)


def test_dataframe_of_unknown_partition_lengths(client, frame):
    kept = frame[frame["w"] > 0.3]
    proba, logits, y, weight = in_memory(kept)
    lazy = dd.from_pandas(frame, npartitions=3)
    lazy = lazy[lazy["w"] > 0.3]
    assert np.isnan(lazy.to_dask_array().shape[0])  # a filter's lengths are unknown
    dproba, dlogits, dy, dweight = lazy[COLUMNS], lazy[[f"z{k}" for k in range(4)]], lazy.y, lazy.w
    found = metrics.expected_calibration_error(dy, dproba, sample_weight=dweight)
    expected = metrics.expected_calibration_error(y, proba, sample_weight=weight)
    assert abs(found - expected) <= 1e-12 * expected
    expected = TemperatureScaling().fit(logits, y).temperature_
    found = TemperatureScaling().fit(dlogits, dy).temperature_
    assert abs(found - expected) <= 1e-10 * expected


def test_string_and_nullable_label_series(client, frame):
    proba, logits, y, _ = in_memory(frame)
    dproba, dlogits, _, _ = columns(frame)
    words = dd.from_pandas(pd.Series(NAMES[y], dtype="str"), npartitions=3)
    nullable = dd.from_pandas(pd.Series(y, dtype="Int64"), npartitions=3)
    with warnings.catch_warnings():
        # Dask's own conversion of such columns warns that they become objects
        warnings.simplefilter("error")
        expected = metrics.expected_calibration_error(NAMES[y], proba)
        for labels in (None, NAMES):
            found = metrics.expected_calibration_error(words, dproba, labels=labels)
            assert abs(found - expected) <= 1e-12 * expected
        found = metrics.expected_calibration_error(nullable, dproba)
        assert abs(found - metrics.expected_calibration_error(y, proba)) <= 1e-12 * expected
        expected = TemperatureScaling().fit(logits, y).temperature_
        for labels, classes in ((words, NAMES), (nullable, np.arange(N_CLASSES))):
            found = TemperatureScaling().fit(dlogits, labels)
            assert abs(found.temperature_ - expected) <= 1e-10 * expected
            np.testing.assert_array_equal(found.classes_, classes)


def in_memory_error(function, *args):
    with pytest.raises(ValueError) as error:
        function(*args)
    return str(error.value)


def test_wrong_or_missing_labels_raise_the_in_memory_errors(client, frame):
    proba, _, y, _ = in_memory(frame)
    dproba, dlogits, dy, _ = columns(frame)
    short = dd.from_pandas(frame["y"].iloc[:3000], npartitions=2)
    with pytest.raises(ValueError, match="`y_true` has 3000 samples but `y_prob` has 4000"):
        metrics.expected_calibration_error(short, dproba)
    light = dd.from_pandas(frame["w"].iloc[:3000], npartitions=2)
    with pytest.raises(ValueError, match="`sample_weight` has 3000 samples but `y_prob` has 4000"):
        metrics.expected_calibration_error(dy, dproba, sample_weight=light)
    with pytest.raises(ValueError, match="`y` has 3000 samples but `scores` has 4000"):
        TemperatureScaling().fit(dlogits, short)
    missing = pd.Series(y, dtype="Int64")
    missing[7] = pd.NA
    message = in_memory_error(metrics.expected_calibration_error, missing, proba)
    assert "NaN" in message
    with pytest.raises(ValueError, match=re.escape(message)):
        metrics.expected_calibration_error(dd.from_pandas(missing, npartitions=3), dproba)
    words = pd.Series(NAMES[y], dtype="str")
    words[7] = None
    # the missing value is NaN in memory, pandas' NA in Dask's string columns
    message = "`y_true` mixes labels of types {}, str; expected labels that are all strings"
    with pytest.raises(ValueError, match=message.format("float")):
        metrics.expected_calibration_error(words, proba)
    with pytest.raises(ValueError, match=message.format("(float|NAType)")):
        metrics.expected_calibration_error(dd.from_pandas(words, npartitions=3), dproba)


def test_nullable_probability_columns_are_read_as_floats(client, frame):
    # numpy reads a DataFrame of several Float64 columns as objects
    proba, _, y, _ = in_memory(frame)
    nullable = frame[COLUMNS].astype("Float64")
    expected = metrics.expected_calibration_error(y, proba)
    assert metrics.expected_calibration_error(frame["y"], nullable) == expected
    lazy = dd.from_pandas(nullable, npartitions=3)
    found = metrics.expected_calibration_error(dd.from_pandas(frame["y"], npartitions=3), lazy)
    assert found == pytest.approx(expected, rel=1e-12)
    # a missing probability is named, in memory and under Dask
    nullable.iloc[5, 1] = pd.NA
    with pytest.raises(ValueError, match="`y_prob` contains NaN"):
        metrics.expected_calibration_error(frame["y"], nullable)
    with pytest.raises(ValueError, match="`y_prob` contains NaN"):
        metrics.expected_calibration_error(
            dd.from_pandas(frame["y"], npartitions=3), dd.from_pandas(nullable, npartitions=3)
        )


def test_one_probability_column_gets_the_in_memory_error(client, frame):
    one = frame[["p0"]]
    message = re.escape("Expected `y_prob` to have at least 2 columns, got shape (4000, 1)")
    with pytest.raises(ValueError, match=message):
        metrics.expected_calibration_error(frame["y"], one)
    with pytest.raises(ValueError, match="Expected `y_prob` to have at least 2 columns"):
        metrics.expected_calibration_error(
            dd.from_pandas(frame["y"], npartitions=3), dd.from_pandas(one, npartitions=3)
        )


def test_the_partitions_of_labels_scores_and_weights_are_counted_in_one_computation(
    frame, monkeypatch
):
    import dask

    from sklearn_calib._dask_chunks import ChunkedRows

    dproba, _, dy, dweight = columns(frame)
    dy_apart = dd.from_pandas(frame["y"], npartitions=5)
    computed = []
    compute = dask.compute

    def counted(*args, **kwargs):
        computed.append(len(args))
        return compute(*args, **kwargs)

    monkeypatch.setattr(dask, "compute", counted)
    rows = ChunkedRows(dy_apart, dproba, dweight)
    assert computed == [3]
    assert rows.n_samples == len(frame) and rows.y.chunks != rows.scores.chunks[:1]
    # each chunk of scores reads the labels and weights of its rows
    blocks = rows.blocks()
    for column, name in ((0, "y"), (2, "w")):
        read = np.concatenate(compute(*[block[column] for block in blocks]))
        np.testing.assert_array_equal(read, frame[name].to_numpy())
