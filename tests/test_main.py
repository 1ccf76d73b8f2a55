import re
import struct

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_calib.__main__ import FIGURE_FILE, REPORT_FILE, main
from sklearn_calib._experiment import default_n_train
from sklearn_calib.calibrators import HistogramBinning, TemperatureScaling
from sklearn_calib.evaluation import (
    _TEMPERATURE_COLUMN,
    Prediction,
    _interval_column,
    evaluation_table,
    format_table,
)
from sklearn_calib.metrics import REPORT_METRICS
from sklearn_calib.scoring import expected_calibration_error, smooth_calibration_error

COLUMNS = [
    name
    for metric in REPORT_METRICS
    for name in (
        [metric.label, _interval_column(metric.label)]
        if metric.name in ("nll", "ece")
        else [metric.label]
    )
] + [_TEMPERATURE_COLUMN]
CALIBRATIONS = ("", "+TS", "+HB")


def read_table(text):
    """Parse the report table: row name to column to value (None for "-", a tuple for an
    interval "[low, high]"); columns are separated by two spaces or more."""

    def cell(text):
        if text == "-":
            return None
        if text.startswith("["):
            return tuple(float(value) for value in text.strip("[]").split(", "))
        return float(text)

    lines = text.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("model"))
    columns = re.split(r"\s{2,}", lines[start].strip())[1:]
    rows = {}
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        name, *values = re.split(r"\s{2,}", line.strip())
        rows[name] = dict(zip(columns, map(cell, values), strict=True))
    return rows


def png_size(path):
    """Width and height of a PNG, from its IHDR chunk."""
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def check_rows(rows, models):
    """Every model has its three rows; T only for TS; calibration keeps the accuracy."""
    assert list(rows) == [model + suffix for model in models for suffix in CALIBRATIONS]
    for model in models:
        for suffix in CALIBRATIONS:
            row = rows[model + suffix]
            assert list(row) == COLUMNS
            assert all(row[name] is not None for name in COLUMNS[:-1])
            assert 0 <= row["ECE"] <= row["MCE"] <= 1
            for metric in ("NLL", "ECE"):
                low, high = row[_interval_column(metric)]
                assert 0 <= low < high and low <= 1.05 * row[metric] and row[metric] <= high
            assert (row["T"] is not None) == (suffix == "+TS")
        assert rows[model + "+TS"]["T"] > 0
        # TS divides the logits by one T > 0 and top-label HB keeps each row's top class:
        # neither changes a prediction
        accuracy = rows[model]["accuracy"]
        assert rows[model + "+TS"]["accuracy"] == accuracy
        assert rows[model + "+HB"]["accuracy"] == accuracy


@pytest.mark.slow
def test_main_job_on_digits_prints_and_writes_the_report_and_the_diagrams(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--out", str(out), "--seed", "3", "--n-bins", "10", "--epochs", "2"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    written = (out / REPORT_FILE).read_text()
    assert read_table(printed) == read_table(written)
    assert "train 808, calibration 270, test 719 (seed 3)" in written
    assert "NLL 95% CI and ECE 95% CI: percentile bootstrap intervals over the 719 test" in written
    rows = read_table(written)
    models = ["LogisticRegression", "GaussianNB", "mlp-CE", "mlp-focal3"]
    check_rows(rows, models)
    # one panel (diagram and histogram) per row: 3 columns, one row of panels per model
    assert png_size(out / FIGURE_FILE.format(dataset="digits")) == (3 * 360, 4 * 440)

    # the LogisticRegression rows, recomputed on the same splits
    X, y = load_digits(return_X_y=True)
    X_pool, X_test, y_pool, y_test = train_test_split(
        X / 16, y, test_size=0.4, stratify=y, random_state=3
    )
    X_train, X_cal, y_train, y_cal = train_test_split(
        X_pool, y_pool, test_size=0.25, stratify=y_pool, random_state=3
    )
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    model.fit(X_train, y_train)
    proba = model.predict_proba(X_test)
    row = rows["LogisticRegression"]
    assert row["accuracy"] == pytest.approx(np.mean(proba.argmax(1) == y_test), abs=1e-4)
    assert row["ECE"] == pytest.approx(
        expected_calibration_error(y_test, proba, n_bins=10), abs=5e-5
    )
    assert row["SECE"] == pytest.approx(smooth_calibration_error(y_test, proba), abs=5e-5)
    scores_cal, scores_test = model.decision_function(X_cal), model.decision_function(X_test)
    ts = TemperatureScaling().fit(scores_cal, y_cal)
    assert rows["LogisticRegression+TS"]["T"] == pytest.approx(ts.temperature_, abs=5e-5)
    hb = HistogramBinning().fit(scores_cal, y_cal)
    for suffix, calibrator in (("+TS", ts), ("+HB", hb)):
        ece = expected_calibration_error(y_test, calibrator.predict_proba(scores_test), n_bins=10)
        assert rows["LogisticRegression" + suffix]["ECE"] == pytest.approx(ece, abs=5e-5)


fashion_mnist_installed = pytest.mark.usefixtures("fashion_mnist")


@fashion_mnist_installed
@pytest.mark.slow
def test_main_job_on_fashion_mnist_subset(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--dataset", "fashion_mnist", "--n-train", "300", "--calibration-size", "1000"]
    assert main([*argv, "--epochs", "5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "train 300, calibration 1000, test 10000 (seed 0)" in printed
    rows = read_table(printed)
    check_rows(rows, ["mlp-CE", "mlp-focal3"])
    assert rows["mlp-CE"]["accuracy"] > 0.6  # 10 classes: chance is 0.1
    assert png_size(out / FIGURE_FILE.format(dataset="fashion_mnist")) == (3 * 360, 2 * 440)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_main_job_trains_the_networks_on_cuda(tmp_path, capsys):
    argv = ["--device", "cuda", "--epochs", "2", "--network", "cnn", "--out", str(tmp_path)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "2 epochs of AdamW (lr 0.01) on cuda" in printed
    check_rows(read_table(printed), ["LogisticRegression", "GaussianNB", "cnn-CE", "cnn-focal3"])


def test_main_rejects_missing_fashion_mnist_with_the_install_hint(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--dataset", "fashion_mnist", "--data-home", str(tmp_path / "nowhere")]
    assert main([*argv, "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("python -m sklearn_calib: error: Fashion-MNIST files not found")
    assert "apt-get install dataset-fashion-mnist" in captured.err
    assert "Traceback" not in captured.err
    assert not out.exists()


def test_main_rejects_an_output_path_that_is_a_file(tmp_path, capsys):
    existing = tmp_path / "report.txt"
    existing.write_text("")
    with pytest.raises(SystemExit) as info:
        main(["--out", str(existing)])
    assert info.value.code == 2
    assert "expected --out to be a directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--test-size", "1.5"],
        ["--n-bins", "0"],
        ["--seed", "x"],
        ["--epochs", "0"],
        ["--lr", "0"],
        ["--lr", "inf"],
        ["--gamma", "-1"],
        ["--gamma", "nan"],
        ["--calibration-size", "1"],
        ["--calibration-size", "0"],
        ["--calibration-size", "2.5"],
        ["--calibration-size", "2000"],
        ["--n-train", "5"],
        ["--network", "resnet"],
        ["--dataset", "cifar10"],
        ["--device", "nonsense"],
    ],
)
def test_main_rejects_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "error" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available")
def test_main_rejects_cuda_without_cuda(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--device", "cuda"])
    assert info.value.code == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_default_training_size_is_bounded_on_the_cpu_only():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert default_n_train("fashion_mnist", cpu) == 5000
    assert default_n_train("fashion_mnist", cuda) is None
    assert default_n_train("digits", cpu) is None


def test_format_table_aligns_rows_and_marks_missing_values():
    table = evaluation_table({"a": Prediction([0.2, 0.7, 0.4])}, [0, 1, 1])
    table["longer name"] = {"accuracy": 0.5}
    lines = format_table(table, digits=3).splitlines()
    assert len({len(line) for line in lines}) == 1
    assert lines[0].split() == ["model", *(metric.label for metric in REPORT_METRICS)]
    assert lines[2].split()[1:3] == ["0.667", f"{table['a']['NLL']:.3f}"]
    assert lines[3].split()[-1] == "-"


def test_report_shows_the_temperature_of_temperature_scaled_rows_only():
    predictions = {
        "model": Prediction([0.2, 0.7, 0.4]),
        "model+TS": Prediction([0.3, 0.6, 0.45], temperature=1.75),
    }
    table = evaluation_table(predictions, [0, 1, 1], intervals=["nll", "ece"], random_state=0)
    assert list(table["model+TS"]) == COLUMNS and table["model+TS"]["T"] == 1.75
    assert _TEMPERATURE_COLUMN not in table["model"]
    rows = read_table(format_table(table))
    assert rows["model"]["T"] is None and rows["model+TS"]["T"] == 1.75
    assert rows["model+TS"]["accuracy"] == pytest.approx(2 / 3, abs=5e-5)
