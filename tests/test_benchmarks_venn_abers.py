"""The Venn-Abers report (``python -m benchmarks venn-abers``) on small synthetic outputs:
one split's metrics, and the whole report with its claims."""

import io

import numpy as np
import pytest

from benchmarks import _venn_abers
from benchmarks.__main__ import main


def _softmax(logits):
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return exp / exp.sum(axis=1, keepdims=True)


def _outputs(n, k, seed):
    """An overconfident network: labels drawn from softmax(z), outputs softmax(3 z)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 2
    truth = _softmax(logits)
    y = (truth.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1)
    return _softmax(3 * logits).astype(np.float32), np.minimum(y, k - 1)


def test_one_split_measures_every_calibrator():
    proba, y = _outputs(600, 4, 0)
    results = _venn_abers.evaluate_split(np.log(proba), y, calibration=300, seed=0)
    assert list(results) == ["uncalibrated", *_venn_abers.CALIBRATORS]
    for name in _venn_abers.VENN_ABERS:
        row = results[name]
        assert 0 < row["width"] < 1
        for gap in ("top: acc − p0", "top: p1 − acc", "classes: freq − p0", "classes: p1 − freq"):
            assert -0.2 < row[gap] < 0.3
        assert (
            np.isfinite(row["log loss"]) and row["log loss"] < results["uncalibrated"]["log loss"]
        )
    assert "width" not in results["TS"]
    assert "fit + predict s" not in results["uncalibrated"]


@pytest.fixture
def small_networks(tmp_path, monkeypatch):
    """Two synthetic networks standing in for the CIFAR files (the last one is the one the
    CalArena claim and the figure read)."""
    networks = {"small-a.npz": ("A", 3), "densenet-bc-100-cifar-100.npz": ("B", 4)}
    for seed, (name, (_, k)) in enumerate(networks.items()):
        proba, y = _outputs(500, k, seed)
        np.savez(tmp_path / name, predictions=proba, ground_truth=y)
    monkeypatch.setattr(_venn_abers, "NETWORKS", networks)
    monkeypatch.setattr(_venn_abers, "FIGURE_NETWORK", "densenet-bc-100-cifar-100.npz")
    return tmp_path


@pytest.mark.slow
def test_report_states_its_claims_with_verdicts(small_networks):
    out = small_networks / "report"
    stream = io.StringIO()
    status = main(
        [
            "venn-abers",
            "--data",
            str(small_networks),
            "--out",
            str(out),
            "--repeats",
            "3",
            "--calibration",
            "250",
        ],
        stream=stream,
    )
    assert status == 0 and "report.md" in stream.getvalue()
    text = (out / "report.md").read_text()
    assert text.count("**A**") == 1 and text.count("**B**") == 1
    claims = text.split("## Agreement with the paper")[1].split("## Notes")[0]
    verdicts = [line.rsplit("|", 2)[1] for line in claims.splitlines() if line.startswith("| ")]
    assert verdicts[0].strip() == "verdict" and len(verdicts) == 5
    assert all(v.strip().startswith("**") and "(" in v for v in verdicts[1:])
    for citation in ("Vovk and Petej 2014", "Vovk et al. 2015", "Manokhin 2017", "CalArena 2026"):
        assert citation in text
    assert (out / "reliability.png").exists()
    rows = (out / "runs.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 3 * (1 + len(_venn_abers.CALIBRATORS))
