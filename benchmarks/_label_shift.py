"""Label-shift adaptation against Alexandari et al. (2020): ``python -m benchmarks label-shift``.

The data are the softmax outputs of three networks on 10,000 unshifted images each: the
CIFAR-10 network of Alexandari, Kundaje and Shrikumar's demo
(``../shared/data/label_shift/``), and two networks trained here on the first 10,000
Fashion-MNIST training images (scored on the 10,000 test images): the cpu regime's MLP
and the CNN of the quick preset's Fashion-MNIST runs (:data:`NETWORKS`). Trial t
permutes the rows with seed t and splits them into a calibration half (labelled source
data: every adapter is fitted there) and a pool half. For each setting (Dirichlet
concentration α, target size n), the trial draws target priors from Dirichlet(α, ..., α),
the class counts of n rows from them, and each class's rows from the pool's rows of that
class with replacement (as Alexandari et al. sample their shifted test sets). Each
adapter then estimates the target priors from the target's scores alone. Every number of
the report is a mean over the trials; its interval resamples the trials, the trials of a
network and setting drawn together for all methods, so differences are paired
(:func:`benchmarks._uncertainty.over_seeds` with the trials as seeds).
"""

import gzip
import json
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from sklearn_calib.calibrators import (
    BiasCorrectedTemperatureScaling,
    TemperatureScaling,
    VectorScaling,
)
from sklearn_calib.datasets import load_fashion_mnist
from sklearn_calib.estimators import NetClassifier
from sklearn_calib.label_shift import LabelShiftAdapter
from sklearn_calib.metrics import expected_calibration_error

from ._report import Report
from ._uncertainty import above, below, maximum, minimum, over_seeds

#: The adapters, by their names in the report, with the name of the same adapter in
#: Alexandari et al.'s published results.
METHODS = {
    "EM + BCTS": ("em:BCTS", {"calibrator": BiasCorrectedTemperatureScaling()}),
    "EM + VS": ("em:VS", {"calibrator": VectorScaling()}),
    "EM + TS": ("em:TS", {"calibrator": TemperatureScaling()}),
    "EM alone": ("em:None", {"calibrator": "passthrough"}),
    "BBSE hard": ("bbse-hard:None", {"method": "bbse", "calibrator": "passthrough"}),
    "BBSE soft + BCTS": ("bbse-soft:BCTS", {"method": "bbse", "confusion": "soft"}),
    "RLLS hard": ("rlls-hard:None", {"method": "rlls", "calibrator": "passthrough"}),
    "RLLS soft + BCTS": ("rlls-soft:BCTS", {"method": "rlls", "confusion": "soft"}),
}
CONFUSION_METHODS = ("BBSE hard", "BBSE soft + BCTS", "RLLS hard", "RLLS soft + BCTS")
ALPHAS = (0.1, 1.0)
SIZES = (500, 2000)
#: Probabilities are floored here before their logarithm (the adapters take logits).
FLOOR = 1e-12
#: The MSE of the class weights is shown times this factor.
MSE_SCALE = 1000.0
#: What each trial measures of each adapter.
METRICS = ("mse weights", "delta accuracy", "prior L1")
#: Every trial's rows, compressed; ``runs.csv`` holds their means per network, setting and
#: method.
TRIALS_FILE = "trials.csv.gz"
CIFAR = "CIFAR-10, Alexandari et al.'s network"


@dataclass(frozen=True)
class Network:
    """A Fashion-MNIST network the report trains.

    Parameters
    ----------
    label : str
        Its name in the report.
    module : str
        The network of the zoo.
    params : dict
        The other arguments of ``NetClassifier``.
    as_image : bool
        Whether it reads images (else flat rows).
    option : str
        The command line's option of its epochs (0 leaves it out).
    recipe : str
        Its training, in the words of the report's Setup.
    """

    label: str
    module: str
    params: dict
    as_image: bool
    option: str
    recipe: str


#: The Fashion-MNIST networks, by the key of their epochs, with the recipe of their
#: preset (``benchmarks/_presets.py``, family ``wang2021``): the cpu regime's MLP, and the
#: CNN of the quick preset's Fashion-MNIST runs (the recipe's lr).
NETWORKS = {
    "mlp": Network(
        "Fashion-MNIST, MLP (512, 512)",
        "mlp",
        {"module__hidden_units": (512, 512), "recipe": "wang2021", "lr": 0.1, "batch_size": 512},
        as_image=False,
        option="--epochs",
        recipe="the cpu regime's MLP and recipe (`wang2021`, lr 0.1, batch 512, seed 0)",
    ),
    "cnn": Network(
        "Fashion-MNIST, CNN",
        "cnn",
        {"recipe": "wang2021", "batch_size": 128},
        as_image=True,
        option="--cnn-epochs",
        recipe=(
            "the zoo's `cnn` (two convolutions of 16 and 32 channels, 64 hidden units) "
            "with the quick preset's Fashion-MNIST recipe (`wang2021`, lr 0.1, batch 128, "
            "seed 0)"
        ),
    ),
}
DEMO_FILES = ("demo_valid_preds.txt.gz", "demo_valid_labels.txt.gz")
PUBLISHED = "cifar10_label_shift_adaptation_results.json.gz"


def load_demo(folder):
    """The demo's validation log-probabilities and labels."""
    folder = Path(folder)
    with gzip.open(folder / DEMO_FILES[0], "rt") as handle:
        proba = np.loadtxt(handle, ndmin=2)
    with gzip.open(folder / DEMO_FILES[1], "rt") as handle:
        y = np.loadtxt(handle).astype(np.int64)
    if len(y) != len(proba):
        raise ValueError(f"Expected one label per row, got {len(y)} for {len(proba)} rows.")
    proba /= proba.sum(axis=1, keepdims=True)
    return np.log(np.maximum(proba, FLOOR)), y


def fashion_mnist_outputs(network, data_home=None, epochs=40, n_train=10_000):
    """Log-probabilities of ``network`` (a :class:`Network`), trained on the first
    ``n_train`` training images, on the test images; with the labels and the training
    seconds."""
    X_train, y_train, X_test, y_test = load_fashion_mnist(
        data_home=data_home, return_X_y=True, as_image=network.as_image
    )
    start = time.perf_counter()
    net = NetClassifier(
        network.module, max_epochs=epochs, device="cpu", random_state=0, **network.params
    ).fit(X_train[:n_train], y_train[:n_train])
    seconds = time.perf_counter() - start
    proba = net.predict_proba(X_test).astype(np.float64)
    return np.log(np.maximum(proba, FLOOR)), np.asarray(y_test, dtype=np.int64), seconds


def load_published(folder):
    """Alexandari et al.'s mean MSE of the weights and Δ accuracy per (α, n, adapter), or
    an empty dict when their results file is absent."""
    path = Path(folder) / PUBLISHED
    if not path.exists():
        return {}
    with gzip.open(path, "rt") as handle:
        results = json.load(handle)[
            "dirichlet_alpha_to_samplesize_to_adaptername_to_metric_to_vals"
        ]
    return {
        (float(alpha), int(n), adapter): (
            float(np.mean(metrics["mseweights_even"])),
            float(np.mean(metrics["delta_acc"])),
        )
        for alpha, by_size in results.items()
        for n, by_adapter in by_size.items()
        for adapter, metrics in by_adapter.items()
    }


def draw_target(pool_y, k, alpha, n, rng):
    """Rows of one shifted target (indices into the pool) and its class frequencies."""
    counts = rng.multinomial(n, rng.dirichlet(np.full(k, alpha)))
    rows = [
        rng.choice(np.flatnonzero(pool_y == c), size=count, replace=True)
        for c, count in enumerate(counts)
        if count
    ]
    return np.concatenate(rows), counts / n


def run_trial(logits, y, trial, settings):
    """Every adapter's MSE of class weights and Δ accuracy in each setting of one trial."""
    order = np.random.default_rng(trial).permutation(len(y))
    half = len(y) // 2
    fit, pool = order[:half], order[half:]
    k = logits.shape[1]
    source = np.bincount(y[fit], minlength=k) / half
    adapters = {
        name: LabelShiftAdapter(n_resamples=0, **params).fit(logits[fit], y[fit])
        for name, (_, params) in METHODS.items()
    }
    results = []
    for index, (alpha, n) in enumerate(settings):
        rng = np.random.default_rng([trial, index])
        rows, frequencies = draw_target(y[pool], k, alpha, n, rng)
        target, target_y = logits[pool][rows], y[pool][rows]
        truth = frequencies / source
        before = float(np.mean(target.argmax(axis=1) == target_y))
        for name, adapter in adapters.items():
            with warnings.catch_warnings():
                # EM alone warns that its input is uncalibrated; non-convergence is counted
                warnings.filterwarnings("ignore", message="EM estimates", category=UserWarning)
                warnings.filterwarnings("ignore", category=ConvergenceWarning)
                adapter.adapt(target)
            results.append(
                {
                    "alpha": alpha,
                    "n": n,
                    "trial": trial,
                    "method": name,
                    "mse weights": float(np.mean((adapter.target_prior_ / source - truth) ** 2)),
                    "delta accuracy": float(np.mean(adapter.predict(target) == target_y)) - before,
                    "prior L1": float(np.abs(adapter.target_prior_ - frequencies).sum()),
                    "converged": bool(adapter.converged_),
                }
            )
    return results


def _quality(logits, y):
    """A network's accuracy and top-label ECE on all its rows, in words."""
    accuracy = 100.0 * float(np.mean(logits.argmax(axis=1) == y))
    ece = 100.0 * expected_calibration_error(y, np.exp(logits), convention="top_label")
    return f"accuracy {accuracy:.1f} %, top-label ECE {ece:.2f} % (15 bins)"


def _setting_label(alpha, n):
    return f"α = {alpha:g}, n = {n}"


def _check_label(source, setting):
    return f"{source}, {_setting_label(*setting)}"


def _claims(report, estimates):
    """The paper's three claims, one check per network and setting each."""
    mse = {
        key: {name: values[name, "mse weights"] for name in METHODS}
        for key, values in estimates.items()
    }
    report.claim(
        "EM with bias-corrected temperature scaling beats BBSE and RLLS (Alexandari et al. "
        "2020, Table 1: MSE of the class weights).",
        "Per network and setting: MSE of EM + BCTS minus the lowest of BBSE and RLLS (hard, "
        f"and soft on BCTS), ×{MSE_SCALE:g} (claimed < 0).",
        [
            below(
                m["EM + BCTS"] - minimum(m[name] for name in CONFUSION_METHODS),
                label=_check_label(*key),
                scale=MSE_SCALE,
                digits=3,
            )
            for key, m in mse.items()
        ],
    )
    report.claim(
        "Temperature scaling alone is not enough for EM: without a bias per class EM is "
        "worse (Alexandari et al. 2020).",
        "Per network and setting: MSE of EM + TS minus that of EM + BCTS, "
        f"×{MSE_SCALE:g} (claimed > 0).",
        [
            above(
                m["EM + TS"] - m["EM + BCTS"],
                label=_check_label(*key),
                scale=MSE_SCALE,
                digits=3,
            )
            for key, m in mse.items()
        ],
    )
    report.claim(
        "EM without calibration is the worst of the adapters (Alexandari et al. 2020).",
        "Per network and setting: MSE of EM alone minus the highest of the other adapters', "
        f"×{MSE_SCALE:g} (claimed > 0).",
        [
            above(
                m["EM alone"] - maximum(v for name, v in m.items() if name != "EM alone"),
                label=_check_label(*key),
                scale=MSE_SCALE,
                digits=3,
            )
            for key, m in mse.items()
        ],
    )


def _table(estimates, published, setting, trials, source):
    alpha, n = setting
    rows = []
    for name, (key, _) in METHODS.items():
        paper = published.get((alpha, n, key)) if source == CIFAR else None
        rows.append(
            [
                name,
                estimates[name, "mse weights"].text(scale=MSE_SCALE, digits=3),
                estimates[name, "delta accuracy"].text(scale=100.0, digits=2),
                estimates[name, "prior L1"].text(digits=4),
                f"{MSE_SCALE * paper[0]:.2f}" if paper else "–",
                f"{100 * paper[1]:.2f}" if paper else "–",
            ]
        )
    caption = (
        f"**{source}, {_setting_label(alpha, n)}**: mean over {trials} trials [95 % "
        f"interval]. MSE of the class weights ×{MSE_SCALE:g}; Δ accuracy in points against "
        "the network's own top class; L1 error of the estimated priors. Published: "
        "Alexandari et al.'s CIFAR-10 means (100 trials, their own network and splits)."
    )
    return caption, rows


def _estimates(rows, trials):
    """Per (network, setting), every (method, metric)'s mean over the trials; the trials
    of a network and setting are drawn together for all methods (paired)."""
    values = {}
    for row in rows:
        key = (row["network"], (row["alpha"], row["n"]))
        for metric in METRICS:
            values.setdefault(key, {}).setdefault((row["method"], metric), []).append(row[metric])
    return {
        key: {name: over_seeds(_check_label(*key), series) for name, series in by_method.items()}
        for key, by_method in values.items()
    }


def setting_means(rows):
    """One row per network, setting and method: the number of trials, the mean of each
    metric over them and the number of targets where EM stopped before its tolerance."""
    groups = {}
    for row in rows:
        key = (row["network"], row["alpha"], row["n"], row["method"])
        groups.setdefault(key, []).append(row)
    return [
        {
            "network": network,
            "alpha": alpha,
            "n": n,
            "method": method,
            "trials": len(group),
            **{
                f"mean {metric}": float(np.mean([row[metric] for row in group]))
                for metric in METRICS
            },
            "not converged": sum(not row["converged"] for row in group),
        }
        for (network, alpha, n, method), group in groups.items()
    ]


def _stalled_note(rows):
    per_method = {}
    for row in rows:
        if not row["converged"]:
            per_method[row["method"]] = per_method.get(row["method"], 0) + 1
    targets = len(rows) // len(METHODS)
    counts = ", ".join(
        f"{count} of {targets} targets of {name}" for name, count in per_method.items()
    )
    return (
        f"EM stopped at its cap of 1,000 passes before its tolerance in {counts or 'no target'} "
        "(the estimate at the cap is kept)."
    )


def write_report(data_folder, out, trials=100, command="", fashion_mnist=None):
    """Run every trial, write ``report.md``, ``runs.csv`` (the means of each network, setting
    and method) and ``trials.csv.gz`` (every trial's rows); return the report's path.

    ``fashion_mnist`` holds ``data_home``, ``n_train`` and ``epochs``, the epochs of each
    network of :data:`NETWORKS` by its key (0 or a missing key leaves it out); None leaves
    them all out.
    """
    started = time.perf_counter()
    sources = {CIFAR: load_demo(data_folder)}
    fashion_mnist = fashion_mnist or {"epochs": {}}
    trained = {key: epochs for key, epochs in fashion_mnist["epochs"].items() if epochs}
    seconds = {}
    for key, epochs in trained.items():
        network = NETWORKS[key]
        logits, y, seconds[key] = fashion_mnist_outputs(
            network, fashion_mnist["data_home"], epochs, fashion_mnist["n_train"]
        )
        sources[network.label] = logits, y
    published = load_published(data_folder)
    settings = [(alpha, n) for alpha in ALPHAS for n in SIZES]
    rows = []
    for source, (logits, y) in sources.items():
        for trial in range(trials):
            for row in run_trial(logits, y, trial, settings):
                rows.append({"network": source, **row})
    estimates = _estimates(rows, trials)
    report = Report(out, "Label-shift adaptation on network outputs")
    report.csv(setting_means(rows))
    report.csv(rows, name=TRIALS_FILE)
    headers = [
        "method",
        "MSE weights ×1000",
        "Δ accuracy (points)",
        "prior L1",
        "published MSE ×1000",
        "published Δ acc.",
    ]
    for (source, setting), values in estimates.items():
        caption, table = _table(values, published, setting, trials, source)
        report.table(headers, table, caption)
    _claims(report, estimates)
    elapsed = time.perf_counter() - started
    quality = {source: _quality(logits, y) for source, (logits, y) in sources.items()}
    networks = [
        f"- {CIFAR}: the softmax outputs on {len(sources[CIFAR][1]):,} unshifted validation "
        "images (`../shared/data/label_shift/`, from kundajelab/labelshiftexperiments, "
        f"`notebooks/demo`); {quality[CIFAR]}."
    ]
    for key, epochs in trained.items():
        label = NETWORKS[key].label
        networks.append(
            f"- {label}: `NetClassifier` with {NETWORKS[key].recipe}, trained for {epochs} "
            f"epochs on the first {fashion_mnist['n_train']:,} training images "
            f"({seconds[key] / 60:.1f} min of wall time on this machine), scored on the "
            f"{len(sources[label][1]):,} test images; {quality[label]}."
        )
    setup = "\n".join(
        [
            *networks,
            f"- The adapters take the log-probabilities (floored at {FLOOR:g}).",
            f"- Trials: {trials} per network; trial t permutes the rows with seed t, fits "
            "every adapter on the first half (labelled source rows) and draws the shifted "
            "targets from the other half: priors from Dirichlet(α), class counts "
            "multinomial, rows of each class with replacement. Settings: α ∈ "
            f"{{{', '.join(f'{a:g}' for a in ALPHAS)}}}, n ∈ {{{', '.join(map(str, SIZES))}}}.",
            "- Adapters: `LabelShiftAdapter(n_resamples=0, ...)`: EM (default tolerance) on "
            "BCTS, vector scaling, temperature scaling or the network's own probabilities; "
            "BBSE and RLLS with the hard confusion matrix of the network's top classes, and "
            "with the soft one of BCTS-calibrated probabilities.",
            "- MSE of the class weights: mean over the classes of (ŵ − w)², ŵ the estimated "
            "target priors (`target_prior_`) and w the target's class frequencies, both over "
            "the calibration half's class frequencies. Δ accuracy: accuracy of the "
            "adapted prediction minus that of the network's top class on the same target.",
            "- Intervals: mean over the trials ± t · SE from 400 resamples of the trials (all "
            "methods of a network and setting drawn together: differences are paired; "
            'benchmarks/EXPERIMENTS.md, "How sure the numbers are").',
            f"- Time: {elapsed / 60:.1f} min of wall time on {os.cpu_count()} CPUs.",
            f"- Command: `{command}`",
        ]
    )
    notes = [
        _stalled_note(rows),
        "Alexandari et al.'s numbers come from their own CIFAR-10 networks and test sets "
        "(n = 2000, 100 trials); the predictions behind them are not published, so the "
        "report compares orderings and magnitudes, not the numbers on the same input. They "
        "report no n = 500.",
    ]
    notes.extend(
        f"The {network.label} network was left out of this run (`{network.option} 0`)."
        for key, network in NETWORKS.items()
        if key not in trained
    )
    return report.write(setup, notes)


def label_shift_command(args, stream):
    """``python -m benchmarks label-shift``: write the report; returns the exit status."""
    command = "python -m benchmarks label-shift " + " ".join(args.argv)
    fashion_mnist = {
        "data_home": args.data_home,
        "n_train": args.train_size,
        "epochs": {"mlp": args.epochs, "cnn": args.cnn_epochs},
    }
    path = write_report(args.data, args.out, args.trials, command.strip(), fashion_mnist)
    stream.write(f"wrote {path}\n")
    return 0
