"""benchmarks/scripts/gamma_control.py: the regimes of the gamma-Net's controls and their tables."""

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks._data import load_split
from benchmarks._presets import CPU_EPOCHS, make_config
from sklearn_calib.datasets import FASHION_MNIST_HOME

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "scripts" / "gamma_control.py"


@pytest.fixture(scope="module")
def gamma_control():
    spec = importlib.util.spec_from_file_location("gamma_control", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not Path(FASHION_MNIST_HOME).is_dir(), reason="needs Fashion-MNIST")
@pytest.mark.slow
def test_fashion_mnist_parts_are_the_cpu_presets_split(gamma_control):
    (X_train, y_train), (X_val, y_val), (X_test, y_test) = gamma_control.load_fashion_mnist_parts()
    data = load_split(make_config("cpu").data)
    for ours, theirs in (
        (X_train, data.X_train),
        (y_train, data.y_train),
        (X_val, data.X_val),
        (y_val, data.y_val),
        (X_test, data.X_test),
        (y_test, data.y_test),
    ):
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)
    assert len(y_train) == 10000 and len(y_val) == 5000 and len(y_test) == 10000


def test_fashion_mnist_regimes_are_the_meta_reports_recipe_summed_or_averaged(gamma_control):
    config = make_config("cpu")
    family = config.families["mukhoti2020"]
    summed = gamma_control.REGIMES["fashion_mnist_sum"]
    assert summed == {
        "module__hidden_units": tuple(config.network_params["hidden_units"]),
        "recipe": family.recipe,
        "lr": family.lr,
        "max_epochs": CPU_EPOCHS,
        "loss_reduction": family.reduction,
        "grad_clip": family.grad_clip,
    }
    assert config.network == "mlp" and family.batch_size == 128
    averaged = gamma_control.REGIMES["fashion_mnist_mean"]
    assert averaged == {**summed, "loss_reduction": "mean"}


@pytest.mark.parametrize(
    ("gamma", "best", "verdict"),
    [
        (3.4, 3.0, "reaches"),  # between the neighbours 2 and 4
        (2.0, 3.0, "moves towards"),  # on a neighbour: not between them
        (1.5, 3.0, "moves towards"),
        (1.03, 3.0, "does not"),  # within 0.05 of the start
        (0.6, 3.0, "does not"),  # the wrong way
        (0.3, 0.0, "reaches"),  # the grid's lowest value: below its upper neighbour 0.5
        (0.7, 0.0, "moves towards"),
        (1.2, 0.0, "does not"),
        (9.0, 5.0, "reaches"),  # the grid's highest value: open above
        (1.0, 1.0, "reaches"),
        (0.4, 1.0, "does not"),
    ],
)
def test_control_verdict(gamma_control, gamma, best, verdict):
    assert (
        gamma_control.control_verdict(gamma, best, [0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0]) == verdict
    )


def _record(method, seed, *, gamma=None, val_ece=None, gammas=None, params="{}"):
    args = {"method": method, "seed": seed, "gamma": gamma, "params": params}
    args["regime"] = "fashion_mnist_sum"
    epochs = len(gammas) if gammas else 2
    history = [{"val_ece": 0.5} for _ in range(epochs)]
    history[-1].update(val_ece=val_ece or 0.04, test_ece=0.03, test_acc=0.9)
    for epoch, value in zip(history, gammas or [], strict=False):
        epoch["gamma_mean"] = value
    return {"args": args, "history": history, "cpu": 10.0}


def test_control_tables_pick_the_best_gamma_per_seed_and_average_gamma_over_epochs(gamma_control):
    records = [
        _record("focal", 10, gamma=1.0, val_ece=0.05),
        _record("focal", 10, gamma=2.0, val_ece=0.02),
        _record("focal", 10, gamma=3.0, val_ece=0.03),
        _record("focal", 11, gamma=1.0, val_ece=0.05),
        _record("focal", 11, gamma=2.0, val_ece=0.04),
        _record("focal", 11, gamma=3.0, val_ece=0.01),
        _record("meta", 10, gammas=[1.0, 1.5, 2.3]),
        _record("meta", 11, gammas=[1.0, 0.9, 0.8], params='{"lookahead": "network_tuned"}'),
    ]
    text = "\n".join(gamma_control.control_tables(records))
    assert "Best fixed γ by validation ECE, per seed: 2 (seed 10), 3 (seed 11)" in text
    # final gamma, mean of the per-epoch means, and the verdict against the seed's best
    assert "| {} | 10 | 2.30 | 1.60 | 4.00 | 3.00 | 90.0 | 10 | reaches |" in text
    assert (
        '| {"lookahead": "network_tuned"} | 11 | 0.80 | 0.90 | 4.00 | 3.00 | 90.0 | 10 | does not |'
        in text
    )
    assert "### Regime `fashion_mnist_sum` (seeds 10, 11)" in text


def test_fashion_mnist_regime_runs_and_records_the_last_epochs_test_metrics(
    gamma_control, tmp_path, monkeypatch
):
    rng = np.random.default_rng(0)

    def parts(data_home=None):
        return [
            (rng.normal(size=(n, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, n))
            for n in (300, 100, 100)
        ]

    monkeypatch.setattr(gamma_control, "load_fashion_mnist_parts", parts)
    regime = {**gamma_control.REGIMES["fashion_mnist_sum"], "max_epochs": 2}
    monkeypatch.setitem(gamma_control.REGIMES, "fashion_mnist_sum", regime)
    args = argparse.Namespace(
        name="run", method="meta", gamma=1.0, params="{}", epochs=30, lr=0.05, seed=10,
        data_seed=0, regime="fashion_mnist_sum", out=str(tmp_path),
    )  # fmt: skip
    gamma_control.run(args)
    record = json.loads((tmp_path / "run.json").read_text())
    first, last = record["history"]
    assert len(record["history"]) == 2 and record["args"]["regime"] == "fashion_mnist_sum"
    assert first["test_ece"] is None and 0 <= last["test_ece"] <= 1 and last["vgamma_mean"] > 0
    assert first["gamma_mean"] > 0 and last["gamma_mean"] > 0 and "val_ece" in first
