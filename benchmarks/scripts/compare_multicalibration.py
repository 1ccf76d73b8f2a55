"""Multicalibration on binary problems: MulticalibrationBoosting against MCGrad.

Three binary problems whose scores are miscalibrated differently in groups of samples:

- ``synthetic``: :func:`sklearn_calib.datasets.make_miscalibrated_groups` (20,000
  samples, four groups of 40/30/20/10 %; the truth is shifted by +0.7 and -0.7 in
  log-odds in two groups, twice as flat in the smallest); the true probabilities are
  known. Per split a new draw, halved into calibration and test parts. The group label
  is the one (categorical) group feature.
- ``breast_cancer``: scikit-learn's breast cancer set; a logistic regression (``C =
  0.05``, standardised features) fitted on 40 % of the samples scores the rest, split
  per split into calibration and test halves (stratified). Group features: mean radius
  and mean texture (numeric); the audited groups: radius tertiles x texture halves.
- ``fashion_mnist``: Fashion-MNIST, shirt against every other class; 30 principal
  components and a logistic regression fitted once on 20,000 training images score the
  other 50,000 images, split per split into calibration and test halves (stratified).
  Group features: the image's mean intensity (ink) and the share of pixels above 0.5
  (area), numeric; the audited groups: ink tertiles x area tertiles (the cells that hold
  images: ties at the area's tertiles leave 7).

Each calibrator is fitted on the calibration part (probabilities, and the group
features) and scored on the test part: log loss; the worst group's ECE (positive class,
15 equal-width bins, :func:`sklearn_calib.metrics.calibration_audit`), with the value a
multicalibrated model's worst group stays below with 95 % (consistency resampling); the
number of groups whose Kolmogorov-Smirnov test rejects calibration after Holm's
correction (level 0.05); and the fit's CPU time (one thread). Calibrators: the uncalibrated
scores, temperature scaling, :class:`MulticalibrationBoosting` (defaults,
``random_state`` = split) and ``mcgrad.methods.MCGrad`` (defaults, ``random_state`` =
split) when the ``mcgrad`` package is installed (the ``bench`` extra).

Run ``OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/scripts/compare_multicalibration.py``
from the repository root (about 5 minutes on 2 cores); ``--quick`` for a smoke check. The
report (``report.md``) and the per-run table (``runs.csv``) go to ``--out``.
"""

import argparse
import logging
import os
import platform
import sys
import time
import warnings
from importlib.metadata import version
from pathlib import Path

import numpy as np
import sklearn
from sklearn.datasets import load_breast_cancer
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_calib.calibrators import MulticalibrationBoosting, TemperatureScaling
from sklearn_calib.datasets import load_fashion_mnist, make_miscalibrated_groups
from sklearn_calib.metrics import calibration_audit, negative_log_likelihood

try:
    import pandas as pd
    from mcgrad.methods import MCGrad
except ImportError:  # the comparison runs without MCGrad, and says so
    MCGrad = None

#: MCGrad rejects probabilities of exactly 0 or 1.
_OPEN_INTERVAL = 1e-7
CALIBRATORS = ("uncalibrated", "temperature", "multicalibration", "mcgrad")


def quantile_cells(values, n_cells):
    """Index of each value's quantile cell (``n_cells`` equal-mass cells)."""
    edges = np.quantile(values, np.linspace(0, 1, n_cells + 1)[1:-1])
    return np.searchsorted(edges, values, side="right")


class Problem:
    """Scores, labels, group features and audited groups of one binary problem."""

    def __init__(self, name, scores, y, features, audited, truth=None):
        self.name = name
        self.scores = scores
        self.y = y
        self.features = features
        self.audited = audited
        self.truth = truth


def synthetic(split):
    scores, groups, y, truth = make_miscalibrated_groups(20000, random_state=split)
    problem = Problem("synthetic", scores, y, groups[:, None], groups, truth)
    return problem, np.arange(10000), np.arange(10000, 20000)


def breast_cancer_problems(n_splits):
    X, y = load_breast_cancer(return_X_y=True)
    features = X[:, [0, 1]]
    audited = quantile_cells(features[:, 0], 3) * 2 + quantile_cells(features[:, 1], 2)
    for split in range(n_splits):
        train, rest = train_test_split(
            np.arange(len(y)), test_size=0.6, stratify=y, random_state=split
        )
        model = make_pipeline(StandardScaler(), LogisticRegression(C=0.05)).fit(X[train], y[train])
        scores = model.predict_proba(X)[:, 1]
        calibration, test = train_test_split(
            rest, test_size=0.5, stratify=y[rest], random_state=split
        )
        yield Problem("breast_cancer", scores, y, features, audited), calibration, test


def fashion_mnist_problems(n_splits, n_train):
    X_train, y_train, X_test, y_test = load_fashion_mnist(return_X_y=True, as_image=False)
    X = np.vstack([X_train, X_test])
    y = (np.concatenate([y_train, y_test]) == 6).astype(np.int64)  # shirt against the rest
    features = np.column_stack([X.mean(axis=1), (X > 0.5).mean(axis=1)])
    audited = quantile_cells(features[:, 0], 3) * 3 + quantile_cells(features[:, 1], 3)
    train = np.random.RandomState(0).choice(len(X_train), n_train, replace=False)
    model = make_pipeline(PCA(30, random_state=0), LogisticRegression(max_iter=500))
    scores = model.fit(X[train], y[train]).predict_proba(X)[:, 1]
    rest = np.setdiff1d(np.arange(len(y)), train)
    problem = Problem("fashion_mnist", scores, y, features, audited)
    for split in range(n_splits):
        calibration, test = train_test_split(
            rest, test_size=0.5, stratify=y[rest], random_state=split
        )
        yield problem, calibration, test


def _mcgrad_frame(problem, rows):
    frame = {"score": np.clip(problem.scores[rows], _OPEN_INTERVAL, 1 - _OPEN_INTERVAL)}
    frame["label"] = problem.y[rows]
    for j in range(problem.features.shape[1]):
        frame[f"f{j}"] = problem.features[rows, j]
    return pd.DataFrame(frame)


def _mcgrad_columns(problem):
    names = [f"f{j}" for j in range(problem.features.shape[1])]
    if problem.features.dtype.kind in "iu":
        return {"categorical_feature_column_names": names}
    return {"numerical_feature_column_names": names}


def fit_and_predict(name, problem, calibration, test, split):
    """Fit a calibrator on the calibration rows; return its test probabilities and the
    fit's CPU time (steadier than the wall time on a shared machine)."""
    scores, y, features = problem.scores, problem.y, problem.features
    start = time.process_time()
    if name == "uncalibrated":
        return scores[test], 0.0
    if name == "temperature":
        model = TemperatureScaling(input="probabilities").fit(scores[calibration], y[calibration])
        elapsed = time.process_time() - start
        return model.predict_proba(scores[test])[:, 1], elapsed
    if name == "multicalibration":
        model = MulticalibrationBoosting(input="probabilities", random_state=split)
        model.fit(scores[calibration], y[calibration], groups=features[calibration])
        elapsed = time.process_time() - start
        return model.predict_proba(scores[test], groups=features[test])[:, 1], elapsed
    columns = _mcgrad_columns(problem)
    model = MCGrad(random_state=split).fit(
        _mcgrad_frame(problem, calibration), "score", "label", **columns
    )
    elapsed = time.process_time() - start
    return model.predict(_mcgrad_frame(problem, test), "score", **columns), elapsed


def evaluate(problem, calibration, test, split, names):
    """One row per calibrator: log loss, worst-group ECE and its noise bound, rejections."""
    rows = []
    for name in names:
        proba, elapsed = fit_and_predict(name, problem, calibration, test, split)
        audit = calibration_audit(
            problem.y[test],
            proba,
            problem.audited[test],
            convention="positive_class",
            n_resamples=200,
            random_state=split,
        )
        row = {
            "problem": problem.name,
            "split": split,
            "calibrator": name,
            "n_calibration": len(calibration),
            "log_loss": negative_log_likelihood(problem.y[test], proba),
            "worst_group_ece": audit.worst_ece,
            "worst_group_ece_null": audit.worst_ece_null_high,
            "n_miscalibrated": audit.n_miscalibrated,
            "n_groups": len(audit.table["group"]),
            "fit_s": elapsed,
            "truth_error": np.nan,
        }
        if problem.truth is not None:
            row["truth_error"] = float(np.abs(proba - problem.truth[test]).mean())
        rows.append(row)
    return rows


def run(n_splits, quick):
    names = [name for name in CALIBRATORS if name != "mcgrad" or MCGrad is not None]
    rows = []
    for split in range(n_splits):
        rows += evaluate(*synthetic(split), split, names)
    for split, (problem, calibration, test) in enumerate(breast_cancer_problems(4 * n_splits)):
        rows += evaluate(problem, calibration, test, split, names)
    for split, (problem, calibration, test) in enumerate(
        fashion_mnist_problems(n_splits, 5000 if quick else 20000)
    ):
        rows += evaluate(problem, calibration, test, split, names)
    return rows


def _mean(rows, problem, name, column):
    values = [
        row[column] for row in rows if row["problem"] == problem and row["calibrator"] == name
    ]
    return float(np.mean(values)), float(np.std(values))


def _verdict(count, total):
    """The headline of a claim that holds on ``count`` of ``total`` problems ("mixed"
    carries the counts, as the experiments' headlines do)."""
    if count == total:
        return "agrees"
    return "disagrees" if count == 0 else f"mixed ({count} of {total} problems)"


def _lowers(rows, problems, name, column):
    """Problems on which ``name``'s mean ``column`` is below the uncalibrated scores'."""
    return [
        problem
        for problem in problems
        if _mean(rows, problem, name, column)[0] < _mean(rows, problem, "uncalibrated", column)[0]
    ]


def agreement(rows, names):
    """The published claims this comparison checks, as an agreement table."""
    problems = list(dict.fromkeys(row["problem"] for row in rows))
    lines = ["| paper's claim | our numbers | verdict |", "|---|---|---|"]
    if "mcgrad" in names:
        for column, label in (
            ("log_loss", "held-out log loss"),
            ("worst_group_ece", "worst-group ECE (its multicalibration error here)"),
        ):
            lowered = _lowers(rows, problems, "mcgrad", column)
            lines.append(
                f"| MCGrad lowers the {label} of the base model (Tax et al. 2026). | lower on "
                f"{len(lowered)} of {len(problems)} problems ({', '.join(lowered) or 'none'}). "
                f"| **{_verdict(len(lowered), len(problems))}** |"
            )
    synthetic_rows = [row for row in rows if row["problem"] == "synthetic"]
    counts = {}
    for name in ("multicalibration", "temperature"):
        mine = [row for row in synthetic_rows if row["calibrator"] == name]
        counts[name] = sum(row["worst_group_ece"] <= row["worst_group_ece_null"] for row in mine)
    n_splits = len({row["split"] for row in synthetic_rows})
    fixed = min(counts["multicalibration"], n_splits - counts["temperature"])
    lines.append(
        "| One global map (temperature scaling) leaves opposite per-group biases; "
        "multicalibration removes them (Hébert-Johnson et al. 2018). | synthetic: worst-group "
        f"ECE within the 95 % bound of a multicalibrated model's in {counts['multicalibration']} "
        f"of {n_splits} splits for MulticalibrationBoosting, in {counts['temperature']} of "
        f"{n_splits} for temperature scaling. | **{_verdict(fixed, n_splits)}** |"
    )
    return lines


def comparison(rows, names):
    """MulticalibrationBoosting against MCGrad, problem by problem."""
    if "mcgrad" not in names:
        return ["- MCGrad is not installed (`pip install mcgrad`): no comparison with it."]
    lines = []
    for column, label in (
        ("log_loss", "held-out log loss"),
        ("worst_group_ece", "worst-group ECE"),
    ):
        for problem in dict.fromkeys(row["problem"] for row in rows):
            ours, _ = _mean(rows, problem, "multicalibration", column)
            theirs, _ = _mean(rows, problem, "mcgrad", column)
            holds = "holds" if ours <= theirs else "does not hold"
            lines.append(
                f"- {problem}: mean {label} of MulticalibrationBoosting at most MCGrad's: "
                f"{holds} ({ours:.4f} against {theirs:.4f})."
            )
    return lines


def _table(rows, names, problem):
    header = (
        "| calibrator | log loss | worst-group ECE | its 95 % null bound | groups rejected "
        "(Holm) | mean abs. error to truth | fit s (CPU) |"
    )
    lines = [header, "|---|---|---|---|---|---|---|"]
    for name in names:
        cells = []
        for column, digits in (
            ("log_loss", 4),
            ("worst_group_ece", 4),
            ("worst_group_ece_null", 4),
            ("n_miscalibrated", 2),
            ("truth_error", 4),
            ("fit_s", 3),
        ):
            mean, std = _mean(rows, problem, name, column)
            if np.isnan(mean):
                cells.append("n/a")
            elif column in ("log_loss", "worst_group_ece"):
                cells.append(f"{mean:.{digits}f} ± {std:.{digits}f}")
            else:
                cells.append(f"{mean:.{digits}f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def write_report(rows, names, out, command, elapsed):
    out.mkdir(parents=True, exist_ok=True)
    columns = list(rows[0])
    with open(out / "runs.csv", "w") as handle:
        handle.write(",".join(columns) + "\n")
        for row in rows:
            handle.write(",".join(str(row[column]) for column in columns) + "\n")
    problems = list(dict.fromkeys(row["problem"] for row in rows))
    versions = f"scikit-learn {sklearn.__version__}, numpy {np.__version__}"
    if MCGrad is not None:
        versions += f", mcgrad {version('mcgrad')}, lightgbm {version('lightgbm')}"
    lines = [
        "# Multicalibration on binary problems: MulticalibrationBoosting and MCGrad",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; {versions}; run time "
        f"{elapsed / 60:.1f} min.  ",
        "Problems, splits and metrics: `benchmarks/scripts/compare_multicalibration.py` (its "
        "docstring). Per-run values: `runs.csv`.",
        "",
        "## Published claims checked",
        "",
        *agreement(rows, names),
        "",
        "## MulticalibrationBoosting against MCGrad",
        "",
        *comparison(rows, names),
        "",
    ]
    for problem in problems:
        subset = [row for row in rows if row["problem"] == problem]
        n_splits = len({row["split"] for row in subset})
        n_groups = subset[0]["n_groups"]
        lines += [
            f"## {problem}: {n_splits} splits, {subset[0]['n_calibration']} calibration "
            f"samples, {n_groups} audited groups (mean ± std over splits)",
            "",
            *_table(rows, names, problem),
            "",
        ]
    (out / "report.md").write_text("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--splits",
        type=int,
        default=5,
        help="splits of the synthetic and Fashion-MNIST problems (breast cancer: 4 times as many)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/reports/multicalibration"), metavar="DIR"
    )
    parser.add_argument("--quick", action="store_true", help="a smaller Fashion-MNIST model")
    args = parser.parse_args()
    command = "OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/scripts/compare_multicalibration.py"
    command = f"{command} {' '.join(sys.argv[1:])}".strip()
    logging.getLogger("mcgrad").setLevel(logging.ERROR)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = run(args.splits, args.quick)
    names = list(dict.fromkeys(row["calibrator"] for row in rows))
    write_report(rows, names, args.out, command, time.perf_counter() - start)
    print(f"report: {args.out / 'report.md'}")


if __name__ == "__main__":
    main()
