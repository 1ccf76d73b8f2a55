"""Label-shift adaptation against Alexandari et al. (2020): ``python -m benchmarks label-shift``.

The data are the softmax outputs of a CIFAR-10 network on 10,000 unshifted validation
images, from the demo of Alexandari, Kundaje and Shrikumar
(``../shared/data/label_shift/``). Trial t permutes the rows with seed t and splits them
into a calibration half (labelled source data: every adapter is fitted there) and a pool
half. For each setting (Dirichlet concentration α, target size n), the trial draws target
priors from Dirichlet(α, ..., α), the class counts of n rows from them, and each class's
rows from the pool's rows of that class with replacement (as Alexandari et al. sample
their shifted test sets). Each adapter then estimates the target priors from the target's
scores alone. Every number of the report is a mean over the trials; its interval resamples
the trials, the trials of a setting drawn together for all methods, so differences are
paired (:func:`benchmarks._uncertainty.over_seeds` with the trials as seeds).
"""

import gzip
import json
import time
import warnings
from pathlib import Path

import numpy as np

from sklearn_calib.calibrators import (
    BiasCorrectedTemperatureScaling,
    TemperatureScaling,
    VectorScaling,
)
from sklearn_calib.label_shift import LabelShiftAdapter

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
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="EM estimates", category=UserWarning)
                adapter.adapt(target)
            seconds = time.perf_counter() - start
            results.append(
                {
                    "alpha": alpha,
                    "n": n,
                    "trial": trial,
                    "method": name,
                    "mse weights": float(np.mean((adapter.target_prior_ / source - truth) ** 2)),
                    "delta accuracy": float(np.mean(adapter.predict(target) == target_y)) - before,
                    "prior L1": float(np.abs(adapter.target_prior_ - frequencies).sum()),
                    "adapt s": seconds,
                }
            )
    return results


def _setting_label(alpha, n):
    return f"α = {alpha:g}, n = {n}"


def _claims(report, estimates, settings):
    """The paper's three claims, one check per setting each."""
    mse = {
        setting: {name: estimates[setting][name, "mse weights"] for name in METHODS}
        for setting in settings
    }
    report.claim(
        "EM with bias-corrected temperature scaling beats BBSE and RLLS (Alexandari et al. "
        "2020, Table 1: MSE of the class weights).",
        "Per setting: MSE of EM + BCTS minus the lowest of BBSE and RLLS (hard, and soft on "
        f"BCTS), ×{MSE_SCALE:g} (claimed < 0).",
        [
            below(
                mse[s]["EM + BCTS"] - minimum(mse[s][name] for name in CONFUSION_METHODS),
                label=_setting_label(*s),
                scale=MSE_SCALE,
                digits=3,
            )
            for s in settings
        ],
    )
    report.claim(
        "Temperature scaling alone is not enough for EM: without a bias per class EM is "
        "worse (Alexandari et al. 2020).",
        f"Per setting: MSE of EM + TS minus that of EM + BCTS, ×{MSE_SCALE:g} (claimed > 0).",
        [
            above(
                mse[s]["EM + TS"] - mse[s]["EM + BCTS"],
                label=_setting_label(*s),
                scale=MSE_SCALE,
                digits=3,
            )
            for s in settings
        ],
    )
    report.claim(
        "EM without calibration is the worst of the adapters (Alexandari et al. 2020).",
        "Per setting: MSE of EM alone minus the highest of the other adapters', "
        f"×{MSE_SCALE:g} (claimed > 0).",
        [
            above(
                mse[s]["EM alone"] - maximum(v for name, v in mse[s].items() if name != "EM alone"),
                label=_setting_label(*s),
                scale=MSE_SCALE,
                digits=3,
            )
            for s in settings
        ],
    )


def _table(estimates, published, setting, trials):
    alpha, n = setting
    rows = []
    for name, (key, _) in METHODS.items():
        paper = published.get((alpha, n, key))
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
        f"**{_setting_label(alpha, n)}**: mean over {trials} trials [95 % interval]. MSE of "
        f"the class weights ×{MSE_SCALE:g}; Δ accuracy in points against the network's own "
        "top class; L1 error of the estimated priors. Published: Alexandari et al.'s "
        "CIFAR-10 means (100 trials, their own network and splits)."
    )
    return caption, rows


def write_report(data_folder, out, trials=100, command=""):
    """Run every trial, write ``runs.csv`` and ``report.md``; return the report's path."""
    started = time.perf_counter()
    logits, y = load_demo(data_folder)
    published = load_published(data_folder)
    settings = [(alpha, n) for alpha in ALPHAS for n in SIZES]
    rows = []
    for trial in range(trials):
        rows.extend(run_trial(logits, y, trial, settings))
    estimates = {}
    for setting in settings:
        values = {}
        for row in rows:
            if (row["alpha"], row["n"]) == setting:
                for metric in ("mse weights", "delta accuracy", "prior L1", "adapt s"):
                    values.setdefault((row["method"], metric), []).append(row[metric])
        label = _setting_label(*setting)
        estimates[setting] = {key: over_seeds(label, series) for key, series in values.items()}
    report = Report(out, "Label-shift adaptation on CIFAR-10 network outputs")
    report.csv(rows)
    headers = [
        "method",
        "MSE weights ×1000",
        "Δ accuracy (points)",
        "prior L1",
        "published MSE ×1000",
        "published Δ acc.",
    ]
    for setting in settings:
        caption, table = _table(estimates[setting], published, setting, trials)
        report.table(headers, table, caption)
    _claims(report, estimates, settings)
    elapsed = time.perf_counter() - started
    setup = "\n".join(
        [
            f"- Data: the softmax outputs of Alexandari et al.'s CIFAR-10 network on {len(y):,} "
            "unshifted validation images (`../shared/data/label_shift/`, from "
            "kundajelab/labelshiftexperiments, `notebooks/demo`), given to the adapters as "
            f"log-probabilities (floored at {FLOOR:g}).",
            f"- Trials: {trials}; trial t permutes the rows with seed t, fits every adapter "
            f"on the first half ({len(y) // 2:,} labelled rows) and draws the shifted targets "
            "from the other half: priors from Dirichlet(α), class counts multinomial, rows "
            "of each class with replacement. Settings: α ∈ "
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
            "methods of a setting drawn together: differences are paired; "
            'benchmarks/EXPERIMENTS.md, "How sure the numbers are").',
            f"- Time: {elapsed / 60:.1f} min on a loaded 2-core CPU.",
            f"- Command: `{command}`",
        ]
    )
    notes = [
        "Alexandari et al.'s numbers come from their own CIFAR-10 networks and test sets "
        "(n = 2000, 100 trials); the predictions behind them are not published, so the "
        "report compares orderings and magnitudes, not the numbers on the same input. They "
        "report no n = 500.",
    ]
    return report.write(setup, notes)


def label_shift_command(args, stream):
    """``python -m benchmarks label-shift``: write the report; returns the exit status."""
    command = "python -m benchmarks label-shift " + " ".join(args.argv)
    path = write_report(args.data, args.out, args.trials, command.strip())
    stream.write(f"wrote {path}\n")
    return 0
