"""Multicalibration on binary problems: MulticalibrationBoosting against MCGrad.

Settings (a data set, its base model and its group definition), each split at random
``--splits`` times into calibration and test rows (the base model's training rows, where
it has some, are drawn again per split too):

- ``synthetic``: :func:`sklearn_calib.datasets.make_miscalibrated_groups` (20,000 rows,
  four planted groups; halves); the group label is the group feature.
- ``fair_religious``, ``fair_age``, ``fair_occupation``: statsmodels' ``fair`` survey
  (6,366 women; had an affair), a logistic regression on the marriage's rating, its years,
  children, education and the husband's occupation, which does not see the group column;
  one categorical group feature (its values are the groups). A third of the rows train the
  model, a third calibrate, a third test.
- ``anes96_party``: statsmodels' ``anes96`` (944 voters; voted for Dole), a logistic
  regression on the voter's and the candidates' left-right placements, population and
  TV news, which does not see party identification, the group feature (7 values).
- ``breast_cancer``: scikit-learn's breast cancer set, a weak logistic regression
  (``C = 0.05``) trained on 40 % of the rows; group features mean radius and texture
  (numeric), audited groups radius tertiles x texture halves.
- ``digits_ink``: scikit-learn's digits, "is it a 3, 5 or 8", a logistic regression on
  5 principal components trained on 40 % of the rows; group features ink and the share
  of dark pixels (numeric), audited groups their tertiles' cells.
- ``fashion_mnist``: Fashion-MNIST, shirt against the rest; 30 principal components and
  a logistic regression trained on 20,000 images score the other 50,000; group features
  ink and area (numeric), audited groups their tertiles' cells.
- ``cifar10_lenet``, ``cifar100_densenet``: the softmax outputs of LeNet-5 on CIFAR-10
  and DenseNet-BC-100 on CIFAR-100 (``../shared/data/cifar/``); the binary problem is
  "is the predicted class right", the score the top probability; the group feature is
  the predicted class (CIFAR-10) or its coarse class (CIFAR-100, 20 superclasses).

Each calibrator is fitted on the calibration rows (scores and group features) and
scored on the test rows: log loss; the worst group's ECE (positive class, 15 bins,
:func:`sklearn_calib.metrics.calibration_audit`, groups of at least 10 test rows); the
groups whose Kolmogorov-Smirnov test rejects calibration after Holm's correction (level
0.05); the fit's CPU time. Calibrators: the uncalibrated scores, temperature scaling,
:class:`MulticalibrationBoosting` (``guard_groups=False``, and the default
``guard_groups=True``; ``random_state`` = split) and
``mcgrad.methods.MCGrad`` (defaults, ``random_state`` = split) when the ``mcgrad``
package is installed (the ``bench`` extra).

Each difference against MCGrad is paired over splits: the mean of the per-split
differences with its 95 % t interval; the verdict of a setting is a win (interval below
0), a loss (above 0) or a tie. A group is made worse by a calibrator when its per-split
ECE (or log loss) minus the uncalibrated scores' has a paired t test's p-value, Holm
adjusted over the setting's groups, at most 0.05 with a positive mean
(:func:`sklearn_calib.metrics.paired_change_test`).

Run ``OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/scripts/compare_multicalibration.py
--jobs 2`` from the repository root (about 20 minutes on 2 busy cores); ``--quick --splits
3`` (a smaller Fashion-MNIST model) for a smoke check. The report (``report.md``), the
per-run table (``runs.csv``) and the per-group one (``groups.csv``) go to ``--out``.
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
from joblib import Parallel, delayed
from scipy import stats
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_calib.calibrators import MulticalibrationBoosting, TemperatureScaling
from sklearn_calib.datasets import load_fashion_mnist, make_miscalibrated_groups
from sklearn_calib.metrics import (
    calibration_audit,
    negative_log_likelihood,
    paired_change_test,
)

try:
    import pandas as pd
    from mcgrad.methods import MCGrad
except ImportError:  # the comparison runs without MCGrad, and says so
    MCGrad = None
try:
    from statsmodels.api import datasets as statsmodels_datasets
except ImportError:  # the statsmodels settings are skipped, and the report says so
    statsmodels_datasets = None

#: MCGrad rejects probabilities of exactly 0 or 1.
_OPEN_INTERVAL = 1e-7
CIFAR = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "cifar"
#: The coarse class (of 20) of each CIFAR-100 fine class, in the fine classes' order.
CIFAR100_COARSE = np.array(
    [4, 1, 14, 8, 0, 6, 7, 7, 18, 3, 3, 14, 9, 18, 7, 11, 3, 9, 7, 11, 6, 11, 5, 10, 7]
    + [6, 13, 15, 3, 15, 0, 11, 1, 10, 12, 14, 16, 9, 11, 5, 5, 19, 8, 8, 15, 13, 14, 17]
    + [18, 10, 16, 4, 17, 4, 2, 0, 17, 4, 18, 17, 10, 3, 2, 12, 12, 16, 12, 1, 9, 19, 2]
    + [10, 0, 1, 16, 12, 9, 13, 15, 13, 16, 19, 2, 4, 6, 19, 5, 5, 8, 19, 18, 1, 2, 15]
    + [6, 0, 17, 8, 14, 13]
)
#: The groups-harm test's and the verdicts' level.
LEVEL = 0.05
#: Settings of at least this many calibration rows report the fit-time ratio.
LARGE = 10000


def calibrators():
    """Name and constructor (of the split) of each calibrator compared."""
    makers = {
        "uncalibrated": None,
        "temperature": lambda split: TemperatureScaling(input="probabilities"),
        "multicalibration": lambda split: MulticalibrationBoosting(
            input="probabilities", guard_groups=False, random_state=split
        ),
        "multicalibration_guarded": lambda split: MulticalibrationBoosting(
            input="probabilities", guard_groups=True, random_state=split
        ),
    }
    if MCGrad is not None:
        makers["mcgrad"] = lambda split: MCGrad(random_state=split)
    return makers


def quantile_cells(values, n_cells):
    """Index of each value's quantile cell (``n_cells`` equal-mass cells)."""
    edges = np.quantile(values, np.linspace(0, 1, n_cells + 1)[1:-1])
    return np.searchsorted(edges, values, side="right")


class Problem:
    """Scores, labels, group features and audited groups of one setting and split."""

    def __init__(self, name, scores, y, features, audited, calibration, test):
        self.name = name
        self.scores = np.clip(scores, _OPEN_INTERVAL, 1 - _OPEN_INTERVAL)
        self.y = y
        self.features = features
        self.audited = audited
        self.calibration = calibration
        self.test = test


def _fit_scores(model, X, y, train):
    """Positive-class probabilities of every row from ``model`` fitted on ``train``."""
    return model.fit(X[train], y[train]).predict_proba(X)[:, 1]


def _three_parts(y, split, train_size):
    """Training, calibration and test rows (stratified), the last two equal."""
    train, rest = train_test_split(
        np.arange(len(y)), train_size=train_size, stratify=y, random_state=split
    )
    calibration, test = train_test_split(rest, test_size=0.5, stratify=y[rest], random_state=split)
    return train, calibration, test


def synthetic(n_splits, quick):
    for split in range(n_splits):
        scores, groups, y, _ = make_miscalibrated_groups(20000, random_state=split)
        halves = np.arange(10000), np.arange(10000, 20000)
        yield Problem("synthetic", scores, y, groups[:, None], groups, *halves)


def _tabular(name, X, y, groups, n_splits, train_size=1 / 3):
    model = make_pipeline(StandardScaler(), LogisticRegression())
    for split in range(n_splits):
        train, calibration, test = _three_parts(y, split, train_size)
        scores = _fit_scores(model, X, y, train)
        yield Problem(name, scores, y, groups[:, None], groups, calibration, test)


def fair(column):
    def problems(n_splits, quick):
        data = statsmodels_datasets.fair.load_pandas().data
        X = data[["rate_marriage", "yrs_married", "children", "educ", "occupation_husb"]]
        y = (data["affairs"] > 0).to_numpy(np.int64)
        groups = np.unique(data[column].to_numpy(), return_inverse=True)[1]
        yield from _tabular(f"fair_{column}", X.to_numpy(), y, groups, n_splits)

    return problems


def anes96(n_splits, quick):
    data = statsmodels_datasets.anes96.load_pandas().data
    X = data[["selfLR", "ClinLR", "DoleLR", "logpopul", "TVnews"]].to_numpy()
    y = data["vote"].to_numpy(np.int64)
    groups = data["PID"].to_numpy(np.int64)
    yield from _tabular("anes96_party", X, y, groups, n_splits)


def _numeric(name, X, y, features, audited, model, n_splits):
    for split in range(n_splits):
        train, calibration, test = _three_parts(y, split, 0.4)
        scores = _fit_scores(model, X, y, train)
        yield Problem(name, scores, y, features, audited, calibration, test)


def breast_cancer(n_splits, quick):
    X, y = load_breast_cancer(return_X_y=True)
    features = X[:, [0, 1]]
    audited = quantile_cells(features[:, 0], 3) * 2 + quantile_cells(features[:, 1], 2)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.05))
    yield from _numeric("breast_cancer", X, y, features, audited, model, n_splits)


def _ink_cells(X, dark):
    features = np.column_stack([X.mean(axis=1), (X > dark).mean(axis=1)])
    return features, quantile_cells(features[:, 0], 3) * 3 + quantile_cells(features[:, 1], 3)


def digits(n_splits, quick):
    X, digit = load_digits(return_X_y=True)
    y = np.isin(digit, (3, 5, 8)).astype(np.int64)
    features, audited = _ink_cells(X, 8)
    model = make_pipeline(StandardScaler(), PCA(5, random_state=0), LogisticRegression())
    yield from _numeric("digits_ink", X, y, features, audited, model, n_splits)


def fashion_mnist(n_splits, quick):
    X_train, y_train, X_test, y_test = load_fashion_mnist(return_X_y=True, as_image=False)
    X = np.vstack([X_train, X_test])
    y = (np.concatenate([y_train, y_test]) == 6).astype(np.int64)  # shirt against the rest
    features, audited = _ink_cells(X, 0.5)
    train = np.random.RandomState(0).choice(len(X_train), 5000 if quick else 20000, replace=False)
    model = make_pipeline(PCA(30, random_state=0), LogisticRegression(max_iter=500))
    scores = _fit_scores(model, X, y, train)
    rest = np.setdiff1d(np.arange(len(y)), train)
    for split in range(n_splits):
        calibration, test = train_test_split(
            rest, test_size=0.5, stratify=y[rest], random_state=split
        )
        yield Problem("fashion_mnist", scores, y, features, audited, calibration, test)


def cifar(name, file, coarse=None):
    def problems(n_splits, quick):
        data = np.load(CIFAR / file)
        proba, labels = data["predictions"], data["ground_truth"]
        predicted = proba.argmax(axis=1)
        y = (predicted == labels).astype(np.int64)
        groups = predicted if coarse is None else coarse[predicted]
        for split in range(n_splits):
            calibration, test = train_test_split(
                np.arange(len(y)), test_size=0.5, stratify=y, random_state=split
            )
            yield Problem(name, proba.max(axis=1), y, groups[:, None], groups, calibration, test)

    return problems


def settings():
    """Every setting this machine can load, and the ones it cannot, with why."""
    loaders = {"synthetic": synthetic}
    missing = []
    if statsmodels_datasets is not None:
        for column in ("religious", "age", "occupation"):
            loaders[f"fair_{column}"] = fair(column)
        loaders["anes96_party"] = anes96
    else:
        missing.append("fair_*, anes96_party (statsmodels is not installed)")
    loaders["breast_cancer"] = breast_cancer
    loaders["digits_ink"] = digits
    loaders["fashion_mnist"] = fashion_mnist
    for name, file, coarse in (
        ("cifar10_lenet", "lenet-5-cifar-10.npz", None),
        ("cifar100_densenet", "densenet-bc-100-cifar-100.npz", CIFAR100_COARSE),
    ):
        if (CIFAR / file).exists():
            loaders[name] = cifar(name, file, coarse)
        else:
            missing.append(f"{name} ({CIFAR / file} is missing)")
    return loaders, missing


def _mcgrad_frame(problem, rows):
    frame = {"score": problem.scores[rows], "label": problem.y[rows]}
    for j in range(problem.features.shape[1]):
        frame[f"f{j}"] = problem.features[rows, j]
    return pd.DataFrame(frame)


def _mcgrad_columns(problem):
    names = [f"f{j}" for j in range(problem.features.shape[1])]
    if problem.features.dtype.kind in "iu":
        return {"categorical_feature_column_names": names}
    return {"numerical_feature_column_names": names}


def fit_and_predict(name, make, problem, split):
    """Fit a calibrator on the calibration rows; return its test probabilities and the
    fit's CPU time (steadier than the wall time on a shared machine)."""
    scores, y, features = problem.scores, problem.y, problem.features
    calibration, test = problem.calibration, problem.test
    if make is None:
        return scores[test], 0.0
    model = make(split)
    start = time.process_time()
    if name == "mcgrad":
        columns = _mcgrad_columns(problem)
        model.fit(_mcgrad_frame(problem, calibration), "score", "label", **columns)
        elapsed = time.process_time() - start
        return model.predict(_mcgrad_frame(problem, test), "score", **columns), elapsed
    if isinstance(model, MulticalibrationBoosting):
        model.fit(scores[calibration], y[calibration], groups=features[calibration])
        elapsed = time.process_time() - start
        return model.predict_proba(scores[test], groups=features[test])[:, 1], elapsed
    model.fit(scores[calibration], y[calibration])
    elapsed = time.process_time() - start
    return model.predict_proba(scores[test])[:, 1], elapsed


def evaluate(problem, split, makers):
    """One row per calibrator, and one per calibrator and audited group."""
    rows, group_rows = [], []
    y, audited = problem.y[problem.test], problem.audited[problem.test]
    for name, make in makers.items():
        proba, elapsed = fit_and_predict(name, make, problem, split)
        audit = calibration_audit(
            y, proba, audited, convention="positive_class", n_resamples=20, random_state=split
        )
        rows.append(
            {
                "setting": problem.name,
                "split": split,
                "calibrator": name,
                "n_calibration": len(problem.calibration),
                "log_loss": negative_log_likelihood(y, proba),
                "worst_group_ece": audit.worst_ece,
                "n_miscalibrated": audit.n_miscalibrated,
                "n_groups": len(audit.table["group"]),
                "fit_s": elapsed,
            }
        )
        for group, n_rows, ece in zip(
            audit.table["group"], audit.table["n_samples"], audit.table["ece"], strict=True
        ):
            mask = audited == group
            group_rows.append(
                {
                    "setting": problem.name,
                    "split": split,
                    "calibrator": name,
                    "group": group,
                    "n_test": int(n_rows),
                    "ece": float(ece),
                    "log_loss": negative_log_likelihood(y[mask], proba[mask], labels=[0, 1]),
                }
            )
    return rows, group_rows


def run_setting(name, problems, n_splits, quick):
    """Every split of one setting: its rows and group rows."""
    logging.getLogger("mcgrad").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    makers = calibrators()
    rows, group_rows = [], []
    start = time.perf_counter()
    for split, problem in enumerate(problems(n_splits, quick)):
        setting_rows, setting_groups = evaluate(problem, split, makers)
        rows += setting_rows
        group_rows += setting_groups
    print(f"{name}: {time.perf_counter() - start:.0f} s", flush=True)
    return rows, group_rows


def run(n_splits, quick, only, n_jobs):
    loaders, missing = settings()
    chosen = [(name, problems) for name, problems in loaders.items() if not only or name in only]
    results = Parallel(n_jobs=n_jobs)(
        delayed(run_setting)(name, problems, n_splits, quick) for name, problems in chosen
    )
    rows = [row for setting_rows, _ in results for row in setting_rows]
    group_rows = [row for _, setting_groups in results for row in setting_groups]
    return rows, group_rows, missing


def _values(rows, setting, name, column):
    """Per-split values, in split order."""
    chosen = [row for row in rows if row["setting"] == setting and row["calibrator"] == name]
    return np.array([row[column] for row in sorted(chosen, key=lambda row: row["split"])])


def paired_interval(differences):
    """Mean of paired differences and its 95 % t interval."""
    mean = float(np.mean(differences))
    if len(differences) < 2:
        return mean, np.nan, np.nan
    half = stats.t.ppf(1 - LEVEL / 2, len(differences) - 1) * stats.sem(differences)
    return mean, mean - half, mean + half


def verdict(low, high):
    """Win when the interval of ours minus theirs lies below 0, loss when above."""
    if high < 0:
        return "win"
    return "loss" if low > 0 else "tie"


def worse_groups(group_rows, setting, name, column):
    """Groups whose ``column`` is significantly above the uncalibrated scores' (paired over
    splits: :func:`sklearn_calib.metrics.paired_change_test`, Holm over the setting's
    groups), with their mean number of test rows and mean change."""
    by_group = {}
    for row in group_rows:
        if row["setting"] == setting and row["calibrator"] in (name, "uncalibrated"):
            splits = by_group.setdefault(row["group"], {})
            splits.setdefault(row["split"], {})[row["calibrator"]] = row
    changes, sizes = {}, {}
    for group, splits in by_group.items():
        pairs = [pair for pair in splits.values() if len(pair) == 2]
        changes[group] = [pair[name][column] - pair["uncalibrated"][column] for pair in pairs]
        sizes[group] = int(np.mean([pair[name]["n_test"] for pair in pairs])) if pairs else 0
    result = paired_change_test(changes, alpha=LEVEL, correction="holm")
    return [
        (group, sizes[group], change)
        for group, change, worse in zip(
            result.table["group"], result.table["change"], result.table["worse"], strict=True
        )
        if worse
    ]


def summary(rows, names):
    """Wins, ties and losses of each MulticalibrationBoosting variant against MCGrad."""
    settings_ = list(dict.fromkeys(row["setting"] for row in rows))
    ours = [name for name in names if name.startswith("multicalibration")]
    lines = [
        "| calibrator | metric | wins | ties | losses |",
        "|---|---|---|---|---|",
    ]
    for name in ours:
        for column, label in (("log_loss", "log loss"), ("worst_group_ece", "worst-group ECE")):
            counts = {"win": 0, "tie": 0, "loss": 0}
            for setting in settings_:
                differences = _values(rows, setting, name, column) - _values(
                    rows, setting, "mcgrad", column
                )
                counts[verdict(*paired_interval(differences)[1:])] += 1
            lines.append(
                f"| {name} | {label} | {counts['win']} | {counts['tie']} | {counts['loss']} |"
            )
    return lines


def agreement(rows, settings_):
    """MCGrad's published claims, checked setting by setting with paired intervals."""
    lines = ["| paper's claim | our numbers | verdict |", "|---|---|---|"]
    for column, label in (
        ("log_loss", "held-out log loss"),
        ("worst_group_ece", "worst-group ECE (its multicalibration error here)"),
    ):
        lowered = []
        for setting in settings_:
            differences = _values(rows, setting, "mcgrad", column) - _values(
                rows, setting, "uncalibrated", column
            )
            if verdict(*paired_interval(differences)[1:]) == "win":
                lowered.append(setting)
        if len(lowered) == len(settings_):
            headline = "agrees"
        elif lowered:
            headline = f"mixed ({len(lowered)} of {len(settings_)} settings)"
        else:
            headline = "disagrees"
        lines.append(
            f"| MCGrad lowers the {label} of the base model (Tax et al. 2026). | significantly "
            f"lower on {len(lowered)} of {len(settings_)} settings "
            f"({', '.join(lowered) or 'none'}). | **{headline}** |"
        )
    return lines


def _cell(mean, low, high):
    return f"{mean:+.4f} [{low:+.4f}, {high:+.4f}]"


def setting_lines(rows, group_rows, names, setting):
    """A setting's table of means and its differences against MCGrad."""
    subset = [row for row in rows if row["setting"] == setting]
    n_splits = len({row["split"] for row in subset})
    lines = [
        f"### {setting}: {n_splits} splits, {subset[0]['n_calibration']} calibration rows, "
        f"{subset[0]['n_groups']} audited groups",
        "",
        "| calibrator | log loss | worst-group ECE | groups rejected (Holm) | fit s (CPU) | "
        "groups made worse (ECE; log loss) |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        cells = [
            f"{_values(rows, setting, name, column).mean():.{digits}f}"
            for column, digits in (
                ("log_loss", 4),
                ("worst_group_ece", 4),
                ("n_miscalibrated", 2),
                ("fit_s", 3),
            )
        ]
        worse = "—"
        if name != "uncalibrated":
            worse = "; ".join(
                ", ".join(f"{group} ({n} rows)" for group, n, _ in groups) or "none"
                for groups in (
                    worse_groups(group_rows, setting, name, "ece"),
                    worse_groups(group_rows, setting, name, "log_loss"),
                )
            )
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {worse} |")
    if "mcgrad" not in names:
        return lines + [""]
    lines += [
        "",
        "| against MCGrad | log loss: mean difference [95 % CI] | verdict | worst-group ECE | "
        "verdict | fit-time ratio |",
        "|---|---|---|---|---|---|",
    ]
    for name in (name for name in names if name.startswith("multicalibration")):
        cells = []
        for column in ("log_loss", "worst_group_ece"):
            differences = _values(rows, setting, name, column) - _values(
                rows, setting, "mcgrad", column
            )
            mean, low, high = paired_interval(differences)
            cells += [_cell(mean, low, high), f"**{verdict(low, high)}**"]
        ratio = (
            _values(rows, setting, name, "fit_s").sum()
            / _values(rows, setting, "mcgrad", "fit_s").sum()
        )
        cells.append(f"{ratio:.2f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + [""]


def write_report(rows, group_rows, missing, out, command, elapsed):
    out.mkdir(parents=True, exist_ok=True)
    for file, table in (("runs.csv", rows), ("groups.csv", group_rows)):
        columns = list(table[0])
        with open(out / file, "w") as handle:
            handle.write(",".join(columns) + "\n")
            for row in table:
                handle.write(",".join(str(row[column]).replace(",", ";") for column in columns))
                handle.write("\n")
    names = list(dict.fromkeys(row["calibrator"] for row in rows))
    settings_ = list(dict.fromkeys(row["setting"] for row in rows))
    versions = f"scikit-learn {sklearn.__version__}, numpy {np.__version__}"
    if MCGrad is not None:
        versions += f", mcgrad {version('mcgrad')}, lightgbm {version('lightgbm')}"
    lines = [
        "# Multicalibration on binary problems: MulticalibrationBoosting and MCGrad",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs "
        "(shared with other jobs: fit times are CPU seconds, their ratios within a setting), "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; {versions}; run time "
        f"{elapsed / 60:.1f} min.  ",
        "Settings, splits, metrics and tests: `benchmarks/scripts/compare_multicalibration.py` "
        "(its docstring). Per-run values: `runs.csv`; per group: `groups.csv`.",
        "",
    ]
    if missing:
        lines += [f"Not run here: {'; '.join(missing)}.", ""]
    if "mcgrad" in names:
        lines += [
            "## Published claims checked",
            "",
            *agreement(rows, settings_),
            "",
            "## Summary against MCGrad (paired over splits, 95 % t intervals)",
            "",
            *summary(rows, names),
            "",
        ]
    else:
        lines += ["MCGrad is not installed (`pip install mcgrad`): no comparison with it.", ""]
    lines += ["## Settings (means over splits)", ""]
    for setting in settings_:
        lines += setting_lines(rows, group_rows, names, setting)
    (out / "report.md").write_text("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=10, help="random splits per setting")
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/reports/multicalibration"), metavar="DIR"
    )
    parser.add_argument("--only", nargs="*", default=None, help="run only these settings")
    parser.add_argument("--jobs", type=int, default=1, help="settings run in parallel")
    parser.add_argument(
        "--quick", action="store_true", help="a smaller Fashion-MNIST model (for a smoke check)"
    )
    args = parser.parse_args()
    command = "OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/scripts/compare_multicalibration.py"
    command = f"{command} {' '.join(sys.argv[1:])}".strip()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows, group_rows, missing = run(args.splits, args.quick, args.only, args.jobs)
    write_report(rows, group_rows, missing, args.out, command, time.perf_counter() - start)
    print(f"report: {args.out / 'report.md'}")


if __name__ == "__main__":
    main()
