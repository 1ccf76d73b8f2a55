"""The ``cpu`` preset of the experiments end to end on a tiny budget, regeneration of its
reports from the store, and the measured-step time estimate."""

import filecmp
import io
import math
import shutil

import numpy as np
import pytest
import torch

from benchmarks.__main__ import main, plan
from benchmarks._costs import REPEATS, measure, median_seconds
from benchmarks._presets import OVERCONFIDENT_T, make_config
from benchmarks._report import read_csv
from benchmarks._runner import Estimator
from benchmarks._train import build_estimator, make_spec
from benchmarks._uncertainty import VERDICTS
from benchmarks.experiments import EXPERIMENTS
from benchmarks.experiments._base import Context, Run, regime_lines

NAMES = "focal,meta,bins"


@pytest.fixture(scope="module")
def cpu_sweep(tmp_path_factory, fashion_mnist):
    """A tiny sweep of the cpu preset through the command line: its folders and output."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("cpu")
    args = [
        "run", NAMES, "--preset", "cpu", "--seeds", "1", "--epochs", "2",
        "--train-size", "300", "--device", "cpu",
        "--store", str(root / "store"), "--out", str(root / "out"),
    ]  # fmt: skip
    stream = io.StringIO()
    status = main(args, stream=stream)
    yield root, args, status, stream.getvalue()
    torch.set_num_threads(threads)


def test_cpu_preset_configuration():
    config = make_config("cpu")
    assert config.data.name == "fashion_mnist" and config.data.n_test is None
    assert config.data.n_train >= 10000 and config.data.n_val == 5000
    assert config.network == "mlp" and config.network_params == {"hidden_units": [512, 512]}
    assert len(config.seeds) == 3
    wang2021, mukhoti2020 = config.families["wang2021"], config.families["mukhoti2020"]
    assert (wang2021.batch_size, wang2021.reduction, wang2021.grad_clip) == (512, "mean", None)
    assert (mukhoti2020.batch_size, mukhoti2020.reduction, mukhoti2020.grad_clip) == (
        128,
        "sum",
        2.0,
    )
    # The per-family learning rate reaches the estimator through its public parameter.
    methods = {m.family: m for m in EXPERIMENTS["regularizers"].methods(config)}
    methods["mukhoti2020"] = EXPERIMENTS["focal"].methods(config)[0]
    for family, lr in (("wang2021", 0.1), ("mukhoti2020", 0.05)):
        spec = make_spec(config, methods[family], 0)
        assert spec["training"]["lr"] == lr
        assert build_estimator(spec, "cpu", []).lr == lr
        assert f"lr {lr:g})" in config.families[family].describe(config.epochs)
    # The quick and full presets keep the recipes' rate (and so their stored runs' keys).
    assert make_spec(make_config("quick"), methods["mukhoti2020"], 0)["training"]["lr"] is None


@pytest.mark.slow
def test_cpu_preset_end_to_end(cpu_sweep):
    root, _, status, output = cpu_sweep
    assert status == 0, output
    assert "measured here: " in output and "done in " in output
    for name in NAMES.split(","):
        text = (root / "out" / name / "report.md").read_text()
        assert (root / "out" / name / "runs.csv").exists()
        assert any((root / "out" / name).glob("*.png"))
        setup = text.split("## Results")[0]
        for piece in ("Regime of `mukhoti2020`: 2 epochs", "of training wall time",
                      "CE's test accuracy", "CE's validation temperature T_NLL = ",
                      "`mlp` (hidden_units=[512, 512])", "lr 0.05)", "300 for training",
                      "the official 10,000 test images"):  # fmt: skip
            assert piece in setup, (name, piece)
        # Two epochs on 300 images leave CE far from overconfident: the setup flags it and
        # says why verdicts may differ.
        assert f"**CE is not overconfident here (T < {OVERCONFIDENT_T:g})" in setup
        assert EXPERIMENTS[name].premise in setup
        table = text.split("## Agreement with the paper")[1]
        assert "| paper's claim | our numbers | checks | verdict |" in table
        assert any(f"**{v}** (" in table for v in VERDICTS)
        assert "Holm" in table and "partly" not in text
    # Histogram binning for the Mukhoti et al. family too, and γ's statistics per run.
    focal = read_csv(root / "out" / "focal" / "runs.csv")
    assert all(0.0 <= float(row["hb_ece"]) <= 1.0 for row in focal)
    meta = read_csv(root / "out" / "meta" / "runs.csv")
    gamma_net = [row for row in meta if row["method"].startswith("FLγ")]
    assert len(gamma_net) == 3 and all(row["hb_ece"] for row in meta)
    assert all(float(row["fit_cpu_seconds"]) > 0 for row in meta)
    for row in gamma_net:
        quantiles = [float(row[f"test_gamma_q{q}"]) for q in ("05", "25", "50", "75", "95")]
        assert quantiles == sorted(quantiles) and all(g > 0 for g in quantiles)
        assert float(row["test_gamma_std"]) >= 0 and float(row["gamma_mean_last"]) > 0
    assert not any(row["gamma_mean_last"] for row in meta if not row["method"].startswith("FLγ"))
    epochs = read_csv(root / "out" / "meta" / "gamma.csv")
    tuned = "FLγ-SECE (network_tuned)"
    assert [(row["method"], row["epoch"]) for row in epochs] == [
        (label, epoch) for label in ("FLγ-DECE", "FLγ-SECE", tuned) for epoch in ("1", "2")
    ]
    # The tuned lookahead is a row of Table 1, with its CPU seconds in the notes, and
    # no claim's number.
    text = (root / "out" / "meta" / "report.md").read_text()
    results, claims = text.split("## Agreement with the paper")
    assert f"| {tuned} | " in results and f"{tuned} " in claims.split("## Notes")[1]
    assert tuned not in claims.split("## Notes")[0]
    assert "CPU seconds of a fit (mean over seeds" in text


@pytest.mark.slow
def test_reports_regenerate_identically_from_the_store(cpu_sweep):
    root, args, status, _ = cpu_sweep
    assert status == 0
    first = root / "first"
    shutil.copytree(root / "out", first)
    stream = io.StringIO()
    assert main(args, stream=stream) == 0
    assert "0 to train" in stream.getvalue()
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert {p.suffix for p in files} == {".md", ".csv", ".png"}
    regenerated = sorted(p.relative_to(root / "out") for p in (root / "out").rglob("*"))
    assert [p for p in regenerated if (root / "out" / p).is_file()] == files
    for path in files:
        assert filecmp.cmp(first / path, root / "out" / path, shallow=False), path


@pytest.mark.slow
def test_estimate_is_epochs_times_measured_batches(one_thread_digits, monkeypatch):
    # Each piece timed once: the medians of several timings are the next test's.
    monkeypatch.setattr("benchmarks._costs.REPEATS", 1)
    monkeypatch.setattr("benchmarks._costs.STEADY_EPOCHS", 1)
    config = one_thread_digits
    runs_by_name, tasks = plan([EXPERIMENTS["focal"]], config)
    spec = tasks[0].spec
    cost = measure(spec, device="cpu")
    n_train = 1797 - 450 - 300
    assert cost.batches == math.ceil(n_train / spec["training"]["batch_size"])
    assert cost.batch > 0 and cost.setup > 0 and cost.track == 0.0
    longer = dict(spec, training=dict(spec["training"], epochs=3 * spec["training"]["epochs"]))
    per_epoch = cost.batches * cost.batch
    assert cost.run_seconds(longer) - cost.run_seconds(spec) == pytest.approx(
        2 * spec["training"]["epochs"] * per_epoch
    )
    # The estimator measures each kind of run once: it gets the step measured above (the
    # tasks are of one kind) rather than a second measurement of the same step.
    measured = []
    monkeypatch.setattr(
        "benchmarks._runner.measure", lambda spec, **kw: measured.append(spec) or cost
    )
    estimator = Estimator(prior_epoch=1000.0)
    assert estimator.measure(tasks, device="cpu") == []
    assert measured == [spec]
    assert estimator.total(tasks) < len(tasks) * 1000.0  # the measured step, not the prior
    assert estimator.analysis_seconds(runs_by_name) > 0


def test_estimate_pieces_are_medians_of_several_timings(monkeypatch):
    # One step timed while the machine was busy does not set the estimate: the median of
    # three timings, one of them 50 times slower, is a fast one.
    seconds = iter([0.0, 5.0, 5.0, 5.1, 5.1, 5.2])  # perf_counter: 5 s, then 0.1 s twice
    monkeypatch.setattr("benchmarks._costs.time.perf_counter", lambda: next(seconds))
    assert median_seconds([lambda: None] * 3) == pytest.approx(0.1)
    monkeypatch.undo()
    calls = []
    median_seconds([lambda: calls.append(1)] * REPEATS)
    assert len(calls) == REPEATS >= 3


@pytest.fixture
def one_thread_digits():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield make_config("quick", "digits", seeds=1, epochs=2)
    torch.set_num_threads(threads)


class _Record:
    """A stored run's stand-in: logits of a classifier right on 80 % of the samples."""

    def __init__(self, scale, seed):
        rng = np.random.default_rng(seed)
        self.meta = {"wall_seconds": 60.0}
        self._splits = {}
        for split in ("val", "test"):
            y = rng.integers(0, 10, 2000)
            predicted = np.where(rng.random(2000) < 0.8, y, (y + 1) % 10)
            self._splits[split] = (scale * np.eye(10, dtype=np.float32)[predicted], y)

    def logits(self, split):
        return self._splits[split]


@pytest.mark.parametrize("scale, overconfident", [(8.0, True), (1.5, False)])
def test_regime_line_states_and_flags_ces_temperature(scale, overconfident):
    config = make_config("cpu", seeds=2)
    method = EXPERIMENTS["focal"].methods(config)[0]  # CE, family mukhoti2020
    runs = [Run(method, seed, make_spec(config, method, seed), f"k{seed}") for seed in (0, 1)]
    records = {run.key: _Record(scale, run.seed) for run in runs}
    context = Context(config, runs, records, None, "cmd", "cpu", premise="Claims X rest on it")
    (line,) = regime_lines(context, ["mukhoti2020"])
    temperatures = [context.evaluation(run, "mukhoti2020").nll_temperature for run in runs]
    assert all((t >= OVERCONFIDENT_T) == overconfident for t in temperatures)
    assert f"T_NLL = {np.mean(temperatures):.2f} ± {np.std(temperatures, ddof=1):.2f}" in line
    accuracies = [
        np.mean(r.logits("test")[0].argmax(1) == r.logits("test")[1]) for r in records.values()
    ]
    assert f"CE's test accuracy {100 * np.mean(accuracies):.2f} ± " in line
    assert 0.78 < np.mean(accuracies) < 0.82
    assert "40 epochs; 2m00s of training wall time over its 2 runs (CE: 1m00s a run)" in line
    flag = f"**CE is not overconfident here (T < {OVERCONFIDENT_T:g})"
    assert (flag in line) != overconfident
    assert ("CE is overconfident here" in line) == overconfident
    assert "Claims X rest on it" in line
