"""Tests of the experiments package ``benchmarks`` (python -m benchmarks)."""

import copy
import io
import json

import numpy as np
import pytest
import torch
from scipy.special import softmax

import benchmarks._runner as runner
import sklearn_calib
from benchmarks.__main__ import EXIT_INCOMPLETE, main, plan
from benchmarks._methods import BSCE_GRA, FLG_SECE, FLG_SECE_TUNED, bsce_gra, regularizer_methods
from benchmarks._posthoc import ece_temperature, learned_epochs
from benchmarks._presets import GRID_MUKHOTI2020, make_config
from benchmarks._report import Report, read_csv
from benchmarks._store import RunStore, pack_logits, run_key, unpack_logits
from benchmarks._train import build_estimator, make_spec, train_run
from benchmarks._uncertainty import VERDICTS, over_seeds
from benchmarks.experiments import EXPERIMENTS
from benchmarks.experiments._base import choose_coefficients
from benchmarks.experiments.focal import METHODS as FOCAL_METHODS
from benchmarks.experiments.gra import chosen_pair
from benchmarks.experiments.toy_gaussians import WEIGHTS, pearson, weight_values
from sklearn_calib.calibrators import TemperatureScaling


@pytest.fixture
def one_thread():
    """Tiny CPU trainings are fastest, and bitwise reproducible, on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def count_trainings(monkeypatch):
    """Count the runs the runner trains."""
    calls = []
    original = runner.train_run

    def counting(spec, **kwargs):
        calls.append(spec)
        return original(spec, **kwargs)

    monkeypatch.setattr(runner, "train_run", counting)
    return calls


def _run(*args):
    stream = io.StringIO()
    status = main(["run", *args], stream=stream)
    return status, stream.getvalue()


def _tiny(name, tmp_path, *extra):
    return (
        name,
        "--preset", "quick",
        "--dataset", "digits",
        "--seeds", "2",
        "--epochs", "2",
        "--train-size", "300",
        "--device", "cpu",
        "--out", str(tmp_path / "out"),
        "--store", str(tmp_path / "store"),
        *extra,
    )  # fmt: skip


def test_list_prints_every_experiment():
    stream = io.StringIO()
    assert main(["list"], stream=stream) == 0
    names = [line.split()[0] for line in stream.getvalue().splitlines() if line.strip()]
    for name in EXPERIMENTS:
        assert name in names
    assert set(EXPERIMENTS) == {
        "regularizers", "calibratable", "focal", "meta", "bins", "gra",
        "toy_gaussians", "dynamics", "validation_size",
    }  # fmt: skip


@pytest.mark.slow
def test_focal_end_to_end_resume_and_corruption(tmp_path, one_thread, count_trainings):
    args = _tiny("focal", tmp_path)
    report = tmp_path / "out" / "focal" / "report.md"
    # A budget too small for one run trains nothing and writes no report.
    status, output = _run(*args, "--max-minutes", "0.0001")
    assert status == EXIT_INCOMPLETE
    assert count_trainings == [] and not report.exists()
    assert "report not written" in output

    status, output = _run(*args)
    assert status == 0
    assert len(count_trainings) == 10
    rows = read_csv(tmp_path / "out" / "focal" / "runs.csv")
    assert len(rows) == 10
    assert sorted({row["method"] for row in rows}) == sorted(m.label for m in FOCAL_METHODS)
    assert {row["seed"] for row in rows} == {"0", "1"}
    for column in ("key", "val_ece", "temperature", "test_ece", "ts_ece", "test_ada_ece",
                   "ts_cw_ece", "test_accuracy", "reduction", "grad_clip"):  # fmt: skip
        assert column in rows[0]
    for row in rows:
        assert 0.0 <= float(row["test_ece"]) <= 1.0
        assert float(row["temperature"]) in GRID_MUKHOTI2020
        assert row["reduction"] == ("mean" if row["method"] == "Brier" else "sum")
        assert float(row["grad_clip"]) == 2.0
    text = report.read_text()
    for piece in ("## Setup", "## Results", "## Agreement with the paper", "Table C.3",
                  "loss summed over the batch (Brier: averaged), gradient norm clipped to 2",
                  "Seeds: 0, 1",
                  "Command: `python -m benchmarks run focal --preset quick", "95% interval",
                  "never on test data"):  # fmt: skip
        assert piece in text
    for method in FOCAL_METHODS:
        assert f"| {method.label} |" in text
    assert any(f"**{v}**" in text for v in VERDICTS)
    first_csv = (tmp_path / "out" / "focal" / "runs.csv").read_text()

    # A second call trains nothing and writes the same CSV.
    status, _ = _run(*args)
    assert status == 0 and len(count_trainings) == 10
    assert (tmp_path / "out" / "focal" / "runs.csv").read_text() == first_csv

    # A corrupted record and a partial one (no manifest) are detected and trained again;
    # CPU training is deterministic, so the CSV is unchanged.
    store = RunStore(tmp_path / "store")
    keys = [row["key"] for row in rows]
    data = (tmp_path / "store" / f"{keys[0]}.npz").read_bytes()
    (tmp_path / "store" / f"{keys[0]}.npz").write_bytes(data[: len(data) // 2])
    (tmp_path / "store" / f"{keys[1]}.json").unlink()
    assert store.status(keys[0]) == "corrupt" and store.status(keys[1]) == "corrupt"
    status, output = _run(*args)
    assert status == 0
    assert len(count_trainings) == 12
    assert {spec["seed"] for spec in count_trainings[10:]} <= {0, 1}
    assert {run_key(spec) for spec in count_trainings[10:]} == set(keys[:2])
    assert "2 corrupt records redone" in output
    assert (tmp_path / "out" / "focal" / "runs.csv").read_text() == first_csv

    # A diverged run (non-finite logits) is named in the report, never silently averaged.
    record = store.load(keys[2])
    arrays = dict(record.arrays)
    arrays["test_logits"] = np.full_like(arrays["test_logits"], np.nan)
    store.save(keys[2], record.spec, arrays, record.history, record.meta)
    status, _ = _run(*args)
    assert status == 0 and len(count_trainings) == 12
    assert "Diverged runs" in report.read_text()
    (row,) = [r for r in read_csv(tmp_path / "out" / "focal" / "runs.csv") if r["key"] == keys[2]]
    assert row["test_ece"] == "" and row["ts_ece"] == ""


def test_store_detects_corrupt_partial_and_mismatched_records(tmp_path):
    store = RunStore(tmp_path)
    spec = {"seed": 0, "loss": "ce"}
    key = run_key(spec)
    assert store.status(key) == "missing"
    logits = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)
    store.save(key, spec, {"val_logits": logits, "val_y": np.arange(20) % 4}, {}, {"a": 1})
    record = store.load(key, spec)
    assert record is not None and record.meta == {"a": 1}
    np.testing.assert_allclose(record.logits("val")[0], logits, atol=1e-2)
    assert store.load(key, {"seed": 1, "loss": "ce"}) is None
    manifest = tmp_path / f"{key}.json"
    manifest.write_text(manifest.read_text()[:-5])
    assert store.load(key) is None and store.status(key) == "corrupt"
    store.discard(key)
    assert store.status(key) == "missing"
    assert not list(tmp_path.glob("*.tmp"))


def test_store_detects_an_altered_manifest(tmp_path):
    store = RunStore(tmp_path)
    spec = {"seed": 0, "loss": "ce"}
    key = run_key(spec)
    history = {"train_loss": [2.0, 1.5], "opt_ece": [0.1, float("nan")]}
    store.save(key, spec, {"val_logits": np.eye(3)}, history, {"device": "cpu"})
    manifest_path = tmp_path / f"{key}.json"
    text = manifest_path.read_text()
    assert store.status(key, spec) == "valid"  # NaN in the history round-trips
    # A changed value that leaves valid JSON (a per-epoch curve dynamics would read).
    manifest = json.loads(text)
    manifest["history"]["train_loss"][1] = 1.25
    manifest_path.write_text(json.dumps(manifest, indent=1))
    assert store.status(key, spec) == "corrupt" and store.load(key, spec) is None
    # Dropping the checksum of a versioned record does not make it pass as a legacy one.
    manifest = json.loads(text)
    del manifest["manifest_sha256"]
    manifest_path.write_text(json.dumps(manifest))
    assert store.status(key, spec) == "corrupt"
    manifest_path.write_text(text)
    assert store.load(key, spec).history["train_loss"] == [2.0, 1.5]


def test_packed_logits_keep_probabilities():
    rng = np.random.default_rng(1)
    logits = (rng.normal(size=(5000, 10)) * rng.uniform(0.1, 30, size=(5000, 1))).astype(np.float32)
    restored = unpack_logits(*pack_logits(logits))
    p, q = softmax(logits.astype(np.float64), 1), softmax(restored.astype(np.float64), 1)
    assert np.abs(p - q).max() < 2.5e-4
    assert np.array_equal(logits.argmax(1), restored.argmax(1))


def test_ece_temperature_is_the_library_grid_argmin():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(700, 6)) * 3
    y = rng.integers(0, 6, size=700)
    grid = np.round(np.arange(1, 61) * 0.05, 2)
    reference = TemperatureScaling(objective="ece", grid=grid).fit(logits, y).temperature_
    assert ece_temperature(logits, y, grid) == reference


def test_learned_epochs():
    correct = np.array(
        [[1, 0, 1, 0, 1], [1, 1, 0, 0, 1], [1, 1, 1, 0, 0]], dtype=bool
    )  # epochs x samples
    assert learned_epochs(correct).tolist() == [1, 2, 3, 4, 4]


def test_experiments_share_runs_and_follow_the_families():
    config = make_config("full", "fashion_mnist")
    experiments = [EXPERIMENTS[n] for n in ("regularizers", "calibratable", "dynamics",
                                              "validation_size")]  # fmt: skip
    runs, tasks = plan(experiments, config)
    assert len(tasks) == 25 * 3  # 21 regulariser runs + 3 inverse focal + focal γ=2, 3 seeds
    regularizer_keys = {run.key for run in runs["regularizers"]}
    assert regularizer_keys <= {run.key for run in runs["calibratable"]}
    assert regularizer_keys == {run.key for run in runs["validation_size"]}
    spec = make_spec(config, regularizer_methods()[0], 0)
    assert spec["training"]["batch_size"] == 512 and spec["training"]["reduction"] == "mean"
    assert spec["training"]["grad_clip"] is None and spec["track"] is not None
    focal = make_spec(config, FOCAL_METHODS[-1], 0)
    assert focal["training"]["reduction"] == "sum" and focal["training"]["grad_clip"] == 2.0
    assert run_key(make_spec(config, FOCAL_METHODS[0], 1)) != run_key(
        make_spec(config, FOCAL_METHODS[0], 0)
    )


@pytest.mark.slow
def test_tracked_run_records_per_epoch_metrics(one_thread):
    config = make_config("quick", "digits", epochs=3, train_size=200)
    spec = make_spec(config, regularizer_methods()[0], 0)
    arrays, history, meta = train_run(spec, device="cpu")
    assert meta["epochs"] == 3 and len(history["opt_ece"]) == 3
    assert np.all(np.array(history["opt_ece"]) <= np.array(history["test_ece"]) + 1e-12)
    assert arrays["track_correct"].shape == (3, 200)
    final_accuracy = (arrays["test_logits"].argmax(1) == arrays["test_y"]).mean()
    assert history["test_acc"][-1] == pytest.approx(final_accuracy)
    assert history["track_acc"][-1] == pytest.approx(arrays["track_correct"][-1].mean())


@pytest.mark.slow
def test_parallel_jobs_train_the_same_runs(tmp_path, one_thread):
    args = ("focal", "--preset", "quick", "--seeds", "1", "--epochs", "1", "--train-size",
            "200", "--device", "cpu")  # fmt: skip
    serial = tmp_path / "serial"
    parallel = tmp_path / "parallel"
    assert _run(*args, "--out", str(serial), "--store", str(serial / "store"))[0] == 0
    status, output = _run(*args, "--jobs", "2", "--out", str(parallel), "--store",
                          str(parallel / "store"))  # fmt: skip
    assert status == 0 and "trained 5 runs" in output
    a, b = read_csv(serial / "focal" / "runs.csv"), read_csv(parallel / "focal" / "runs.csv")
    assert [r["key"] for r in a] == [r["key"] for r in b]
    for ra, rb in zip(a, b, strict=True):
        for column in ("test_ece", "ts_ece", "test_nll", "test_accuracy"):
            assert float(ra[column]) == pytest.approx(float(rb[column]), abs=1e-5)


@pytest.mark.slow
def test_toy_gaussians_quick(tmp_path, one_thread):
    status, _ = _run("toy_gaussians", "--seeds", "1", "--out", str(tmp_path / "out"),
                     "--store", str(tmp_path / "store"), "--device", "cpu")  # fmt: skip
    assert status == 0
    (row,) = read_csv(tmp_path / "out" / "toy_gaussians" / "runs.csv")
    for name in ("FL", "DFL", "gBS"):
        assert 0.0 < float(row[f"{name}_r_test"]) <= 1.0
        assert -1.0 <= float(row[f"{name}_r_test_default"]) <= 1.0
    text = (tmp_path / "out" / "toy_gaussians" / "report.md").read_text()
    assert "0.664" in text and "Pearson" in text
    setup = text.split("## Results")[0]
    assert "two-dimensional Gaussians" in setup and "Runs: 1," in setup
    assert "bf16 autocast on CUDA, float32 on the CPU" in setup and "Trained on cpu" in setup
    assert "digits" not in setup and "Fashion-MNIST" not in setup


def test_brier_weight_with_beta_one_correlates_like_focal():
    rng = np.random.default_rng(3)
    proba = softmax(rng.normal(size=(300, 5)) * 2, 1)
    y = rng.integers(0, 5, 300)
    target = rng.uniform(size=300)
    for gamma in (0.5, 2.0):
        focal = weight_values("FL", {"gamma": gamma}, proba, y)
        brier = weight_values("gBS", {"beta": 1.0, "gamma": gamma}, proba, y)
        np.testing.assert_allclose(brier, (2 * (1 - proba[np.arange(300), y])) ** gamma)
        assert pearson(brier, target) == pytest.approx(pearson(focal, target), abs=1e-12)


@pytest.mark.slow
def test_meta_learned_run_records_gamma(one_thread):
    config = make_config("quick", "digits", epochs=2, train_size=300)
    spec = make_spec(config, FLG_SECE, 0)
    assert spec["estimator"]["params"]["train_split"] is None
    # The lookahead is named, so runs of a former default (unnamed) get other keys.
    assert spec["estimator"]["params"]["lookahead"] == "bohdal2021"
    former = copy.deepcopy(spec)
    del former["estimator"]["params"]["lookahead"]
    assert run_key(former) != run_key(spec)
    tuned = make_spec(config, FLG_SECE_TUNED, 0)["estimator"]["params"]
    assert tuned == {**spec["estimator"]["params"], "lookahead": "network_tuned"}
    arrays, history, meta = train_run(spec, device="cpu")
    assert meta["epochs"] == 2 and len(history["gamma_mean"]) == 2
    assert all(g > 0 for g in history["gamma_mean"]) and len(history["meta_loss"]) == 2
    assert np.isfinite(arrays["test_logits"]).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_tracked_run_on_cuda():
    config = make_config("quick", "digits", epochs=2, train_size=200)
    spec = make_spec(config, regularizer_methods()[0], 0)
    arrays, history, meta = train_run(spec, device="cuda")
    assert meta["device"].startswith("cuda")
    assert np.isfinite(history["opt_ece"]).all() and np.isfinite(arrays["test_logits"]).all()


def test_coefficients_are_chosen_on_validation():
    rows = [
        {"method": "A", "val_ece": 0.01, "test_ece": 0.05},
        {"method": "B", "val_ece": 0.02, "test_ece": 0.01},
    ]
    assert choose_coefficients(rows, {"g": ["A", "B"]}) == {"g": "A"}
    assert choose_coefficients(rows, {"g": ["A", "B"]}, by="test_ece") == {"g": "B"}


def _fake_training(monkeypatch):
    """Replace training by a tiny fixed record (for tests of the store and the runner)."""
    calls = []

    def fake(spec, **kwargs):
        calls.append(spec)
        logits = np.eye(3, dtype=np.float32)
        arrays = {"val_logits": logits, "val_y": np.arange(3), "test_logits": logits,
                  "test_y": np.arange(3)}  # fmt: skip
        meta = {"device": "cpu", "fit_seconds": 0.1, "wall_seconds": 0.1, "epochs": 1}
        return arrays, {"train_loss": [1.0], "lr": [0.1], "dur": [0.1]}, meta

    monkeypatch.setattr(runner, "train_run", fake)
    return calls


def test_records_of_another_library_version_are_trained_again(tmp_path, monkeypatch):
    calls = _fake_training(monkeypatch)
    specs = [
        {"seed": seed, "network": {"name": "mlp"}, "estimator": {"name": "net", "params": {}},
         "data": {"name": "digits"}, "training": {"epochs": 1, "batch_size": 8}, "track": None}
        for seed in range(3)
    ]  # fmt: skip
    tasks = [runner.Task(run_key(spec), spec, f"run {i}") for i, spec in enumerate(specs)]
    old = RunStore(tmp_path, version="0.0.1")
    for task in tasks:
        old.save(task.key, task.spec, {"val_logits": np.eye(3)}, {}, {})
    store = RunStore(tmp_path)
    assert store.version == sklearn_calib.__version__
    assert old.status(tasks[0].key, specs[0]) == "valid"
    assert store.status(tasks[0].key, specs[0]) == "outdated"
    assert store.load(tasks[0].key, specs[0]) is None
    # A record written before versions were recorded (no version, no manifest checksum)
    # is accepted.
    manifest_path = tmp_path / f"{tasks[2].key}.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["sklearn_calib"], manifest["manifest_sha256"]
    manifest_path.write_text(json.dumps(manifest))
    assert store.load(tasks[2].key, specs[2]).legacy
    stream = io.StringIO()
    summary = runner.execute(tasks, store, stream=stream)
    assert [spec["seed"] for spec in calls] == [0, 1]
    assert summary.redone == summary.outdated == [tasks[0].key, tasks[1].key]
    assert "2 records of another sklearn_calib version redone" in stream.getvalue()
    record = store.load(tasks[0].key, specs[0])
    assert record.manifest["sklearn_calib"] == sklearn_calib.__version__ and not record.legacy


def _claims_of(experiment, tmp_path, *args):
    """The (ours, verdict) of each claim ``experiment._claims`` makes from ``args``."""
    report = Report(tmp_path, "test")
    experiment._claims(report, *args)
    return [(claim.ours, claim.verdict) for claim in report.claims]


class _Context:
    """What the toy study's claims read: a mean over its runs."""

    n_resamples = 200

    def over_seeds(self, label, values, bounds=(-1.0, 1.0)):
        return over_seeds(label, values, n_resamples=self.n_resamples, bounds=bounds)


def test_toy_gaussians_ties_are_not_ordered(tmp_path):
    # Two weights that correlate alike: a tie (an interval [0, 0]), not an order.
    toy = EXPERIMENTS["toy_gaussians"]
    rows = [
        {"FL_r_test": 0.821 + d, "DFL_r_test": 0.842 + d, "gBS_r_test": 0.821 + d}
        for d in (0.0, 0.01, -0.01)
    ]
    report = Report(tmp_path, "test")
    toy._claims(report, _Context(), rows)
    claim = report.claims[1]
    assert any(line.startswith("gBS − FL: 0.000 [0.000, 0.000]") for line in claim.checks)
    assert claim.counts == "1 holds, 1 fails, 1 open" and claim.verdict == "mixed"
    rows = [
        {"FL_r_test": 0.550 + d, "DFL_r_test": 0.638 + d, "gBS_r_test": 0.664 + d}
        for d in (0.0, 0.01, -0.01)
    ]
    assert _claims_of(toy, tmp_path, _Context(), rows)[1][1] == "agrees"


def test_toy_gaussians_gbs_is_not_searched_where_it_is_focal():
    # With beta = 1 the gBS weight is the focal weight times 2^gamma: it would tie with FL.
    grid, default = WEIGHTS["gBS"]
    assert {params["beta"] for params in grid} == {2.0} and default["beta"] == 2.0


def test_plan_line_describes_each_experiments_runs(tmp_path, monkeypatch):
    # No measured step here: it would time ResNet-20 on the CPU (the estimate is tested
    # in test_benchmarks_cpu.py); the preset's prior stands and the plan line says so.
    monkeypatch.setattr(runner.Estimator, "measure", lambda self, tasks, **kwargs: [])
    store = ("--store", str(tmp_path / "store"), "--dry-run")
    status, output = _run("toy_gaussians", "--preset", "full", *store)
    assert status == 0
    assert output.startswith(
        "5 runs for toy_gaussians (full, two-dimensional Gaussians, 5 runs, 5 epochs): 5 to train"
    )
    _, output = _run("focal,toy_gaussians", "--preset", "full", *store)
    assert output.startswith(
        "20 runs for focal, toy_gaussians (full, focal: fashion_mnist, 3 seeds, 10 epochs; "
        "toy_gaussians: two-dimensional Gaussians, 5 runs, 5 epochs)"
    )
    assert "not measured, the preset's prior: 0.78 s/epoch + 2 s/run" in output
    assert not (tmp_path / "store").exists()


def test_gra_tunes_bsce_gra_over_its_grid_on_validation_ece():
    config = make_config("cpu")
    gra = EXPERIMENTS["gra"]
    labels = [m.label for m in gra.methods(config)]
    grid = [label for label in labels if label.startswith("BSCE-GRA")]
    assert len(grid) == 12 and "BSCE-GRA β=3, γ=4" in grid
    runs, tasks = plan([gra], config)
    assert len(tasks) == 20 * 3
    # the grid's (1, 1) is BSCE-GRA at the loss's defaults: the run of Lin et al.'s Table 2
    assert make_spec(config, BSCE_GRA, 0)["loss"] == {"name": "bsce_gra", "params": {}}
    spec = make_spec(config, bsce_gra(2.0, 4.0), 0)
    assert spec["loss"]["params"] == {"beta": 2.0, "gamma": 4.0}
    assert build_estimator(spec, "cpu", []).criterion__gamma == 4.0
    rows = [
        {"method": label, "val_ece": 0.05 - 0.001 * index, "seed": seed}
        for index, label in enumerate(grid)
        for seed in range(3)
    ]
    rows[-1]["val_ece"] = float("nan")  # a diverged run is left out of its pair's mean
    assert chosen_pair(rows) == "BSCE-GRA β=3, γ=4"
    rows[0]["val_ece"] = rows[1]["val_ece"] = rows[2]["val_ece"] = 0.001
    assert chosen_pair(rows) == "BSCE-GRA β=1, γ=1"
