"""The label-shift report end to end, on small synthetic outputs in the demo's format."""

import gzip
import io
import json
import re

import numpy as np
import pytest

from benchmarks import _label_shift
from benchmarks.__main__ import main
from benchmarks._label_shift import METHODS, METRICS, draw_target, load_demo
from benchmarks._report import read_csv, write_csv


def _write_demo(folder, n=600, k=3, seed=0, published=None):
    """Softmax outputs and labels in the layout of Alexandari et al.'s demo files."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, size=n)
    logits = 2.0 * np.eye(k)[y] + rng.normal(size=(n, k))
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    with gzip.open(folder / "demo_valid_preds.txt.gz", "wt") as handle:
        np.savetxt(handle, proba)
    with gzip.open(folder / "demo_valid_labels.txt.gz", "wt") as handle:
        np.savetxt(handle, y, fmt="%d")
    if published is not None:
        with gzip.open(folder / "cifar10_label_shift_adaptation_results.json.gz", "wt") as handle:
            json.dump(published, handle)
    return proba, y


def test_load_demo_gives_log_probabilities(tmp_path):
    proba, y = _write_demo(tmp_path)
    logits, labels = load_demo(tmp_path)
    np.testing.assert_allclose(np.exp(logits), proba, rtol=1e-12)
    np.testing.assert_array_equal(labels, y)


def test_load_demo_rejects_labels_of_another_length(tmp_path):
    _write_demo(tmp_path)
    with gzip.open(tmp_path / "demo_valid_labels.txt.gz", "wt") as handle:
        np.savetxt(handle, np.zeros(5), fmt="%d")
    with pytest.raises(ValueError, match="Expected one label per row, got 5 for 600 rows"):
        load_demo(tmp_path)


def test_draw_target_takes_each_class_from_its_rows():
    pool_y = np.repeat([0, 1, 2], [5, 7, 9])
    rows, frequencies = draw_target(pool_y, 3, 1.0, 400, np.random.default_rng(3))
    assert rows.shape == (400,)
    np.testing.assert_allclose(frequencies, np.bincount(pool_y[rows], minlength=3) / 400)
    # with replacement: a class of 5 pool rows can give more than 5 target rows
    assert np.bincount(pool_y[rows], minlength=3).max() > 9


@pytest.mark.slow
def test_report_end_to_end(tmp_path):
    data, out = tmp_path / "data", tmp_path / "report"
    data.mkdir()
    published = {
        "dirichlet_alpha_to_samplesize_to_adaptername_to_metric_to_vals": {
            "0.1": {
                "2000": {"em:BCTS": {"mseweights_even": [0.001, 0.002], "delta_acc": [0.07, 0.08]}}
            }
        }
    }
    _write_demo(data, published=published)
    stream = io.StringIO()
    status = main(
        ["label-shift", "--data", str(data), "--out", str(out), "--trials", "3"]
        + ["--epochs", "0", "--cnn-epochs", "0"],
        stream,
    )
    assert status == 0
    assert stream.getvalue() == f"wrote {out / 'report.md'}\n"
    rows = read_csv(out / "trials.csv.gz")
    assert len(rows) == 3 * 4 * len(METHODS)
    assert {row["method"] for row in rows} == set(METHODS)
    values = np.array([float(row["mse weights"]) for row in rows])
    assert np.isfinite(values).all() and (values >= 0).all()
    # runs.csv: one row per setting and method, the means of the trials' rows
    means = read_csv(out / "runs.csv")
    assert len(means) == 4 * len(METHODS)
    for mean in means:
        same = [
            row
            for row in rows
            if all(row[key] == mean[key] for key in ("network", "alpha", "n", "method"))
        ]
        assert int(mean["trials"]) == len(same) == 3
        for metric in METRICS:
            expected = np.mean([float(row[metric]) for row in same])
            assert float(mean[f"mean {metric}"]) == pytest.approx(expected, rel=1e-6)
        stalled = sum(row["converged"] == "False" for row in same)
        assert int(mean["not converged"]) == stalled
    text = (out / "report.md").read_text()
    assert text.count("**CIFAR-10, Alexandari et al.'s network, α = ") == 4
    assert "Fashion-MNIST" not in text.split("## Notes")[0]
    assert "MLP (512, 512) network was left out of this run (`--epochs 0`)" in text
    assert "CNN network was left out of this run (`--cnn-epochs 0`)" in text
    assert "label-shift --data" in text
    # the published mean of EM + BCTS at α = 0.1, n = 2000, times 1000
    assert "| EM + BCTS |" in text and "| 1.50 | 7.50 |" in text
    agreement = text.split("## Agreement with the paper")[1]
    assert agreement.count("(Alexandari et al. 2020") == 3
    verdicts = re.findall(r"\| \*\*(agrees|mixed|disagrees|inconclusive)\*\* \(", agreement)
    assert len(verdicts) == 3


def test_label_shift_command_needs_two_trials(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["label-shift", "--data", str(tmp_path), "--trials", "1"])
    assert "expected --trials >= 2, got 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["label-shift", "--data", str(tmp_path), "--cnn-epochs", "-1"])
    assert "--cnn-epochs >= 0 and --train-size >= 1, got 40, -1 and 10000" in (
        capsys.readouterr().err
    )


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_report_trains_the_fashion_mnist_networks(tmp_path, monkeypatch):
    # small synthetic images in place of Fashion-MNIST (not on every machine); separable,
    # so temperature scaling's optimum lies at its bound
    rng = np.random.default_rng(1)

    def images(n, as_image):
        y = rng.integers(0, 10, size=n)
        X = rng.normal(size=(n, 784)).astype(np.float32)
        X[:, :780] += 3.0 * np.repeat(np.eye(10, dtype=np.float32)[y], 78, axis=1)
        return (X.reshape(n, 1, 28, 28) if as_image else X), y

    def fake_loader(data_home=None, return_X_y=False, as_image=True):
        assert (data_home, return_X_y) == ("fmnist", True)
        return (*images(1000, as_image), *images(2000, as_image))

    monkeypatch.setattr(_label_shift, "load_fashion_mnist", fake_loader)
    data, out = tmp_path / "data", tmp_path / "report"
    data.mkdir()
    _write_demo(data, k=10, n=2000)
    epochs = {"mlp": 3, "cnn": 8}
    path = _label_shift.write_report(
        data,
        out,
        trials=2,
        fashion_mnist={"data_home": "fmnist", "epochs": epochs, "n_train": 1000},
    )
    text = path.read_text()
    networks = [row["network"] for row in read_csv(out / "trials.csv.gz")]
    agreement = text.split("## Agreement with the paper")[1]
    for network in _label_shift.NETWORKS.values():
        assert text.count(f"**{network.label}, α = ") == 4
        assert f"{network.label}: `NetClassifier` with {network.recipe}, trained for " in text
        assert networks.count(network.label) == 2 * 4 * len(METHODS)
        # one check per network and setting in each claim
        assert agreement.count(f"{network.label}, α = 0.1, n = 500:") == 3
    assert "trained for 3 epochs on the first 1,000 training images" in text
    assert "trained for 8 epochs on the first 1,000 training images" in text
    assert text.count("scored on the 2,000 test images") == 2
    assert text.count("%, top-label ECE ") == 3
    assert "left out of this run" not in text


def test_compressed_csv_round_trips_and_is_the_same_for_the_same_rows(tmp_path):
    rows = [{"network": "a, b", "alpha": 0.1, "trial": 0, "converged": True}] * 3
    first, second = tmp_path / "first" / "rows.csv.gz", tmp_path / "second" / "rows.csv.gz"
    for path in (first, second):
        path.parent.mkdir()
        write_csv(path, rows)
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes()[4:8] == bytes(4)  # gzip's time stamp (RFC 1952) left at 0
    assert gzip.decompress(first.read_bytes()).decode().splitlines()[:2] == [
        "network,alpha,trial,converged",
        '"a, b",0.1,0,True',
    ]
    assert (
        read_csv(first)
        == [{"network": "a, b", "alpha": "0.1", "trial": "0", "converged": "True"}] * 3
    )
