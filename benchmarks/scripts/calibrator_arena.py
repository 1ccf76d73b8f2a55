"""Every post-hoc calibrator of sklearn_calib on real logit sets, in the spirit of CalArena.

Berta, Holzmüller, Jordan and Bach's comparison of post-hoc calibrators (AISTATS 2026)
ranks them by held-out log loss: structured matrix scaling (SMS) first on multiclass
tabular and vision problems, with structured vector scaling (SVS) and temperature scaling
(TS) close; on binary problems quadratic scaling, beta calibration and Platt scaling
lead; histogram binning and isotonic regression fall below the uncalibrated model. This
script checks that ranking on the logit sets this machine can produce:

- scikit-learn's bundled sets (digits, 10 classes; breast cancer, binary; wine, 3
  classes), each with five classifiers (logistic regression and histogram gradient
  boosting feed their decision function as logits; Gaussian naive Bayes, a random forest
  and an MLP their probabilities). Each split draws a stratified train / calibration /
  test partition (50 / 25 / 25 %) and refits the classifier on its train part.
- Fashion-MNIST: two MLPs (``NetClassifier("mlp")``, cross-entropy, trained once on
  20,000 training images for 4 and 30 epochs: a mildly and a strongly overconfident
  network). Their logits on the 10,000 test images and 10,000 further training images are
  split at random, per split, into calibration and test halves (stratified).

Every calibrator is fitted on the calibration scores (told whether they are logits or
probabilities) and scored on the test scores: log loss (probabilities clipped at 1e-15),
top-label ECE (15 equal-width bins) and the Brier score. Ranks are by log loss within each
(logit set, split), ties sharing the mean rank. The report (Markdown) and the per-run
table (CSV) are written to ``--out``; the Markdown states the command, the machine, the
run time and whether each claim of the published ranking holds here.

Run ``PYTHONPATH=. python benchmarks/scripts/calibrator_arena.py`` from the repository root (about
10 minutes on 2 cores with the default 5 splits), or add ``--splits 1 --quick`` for a smoke
check.
"""

import argparse
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from scipy.special import softmax
from scipy.stats import rankdata
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_calib.calibrators import (
    BetaCalibration,
    CalibratorSelector,
    DirichletCalibration,
    EnsembleTemperatureScaling,
    HistogramBinning,
    IsotonicCalibration,
    MatrixScaling,
    PlattScaling,
    QuadraticScaling,
    ScalingBinning,
    StructuredMatrixScaling,
    StructuredVectorScaling,
    TemperatureScaling,
    VectorScaling,
)
from sklearn_calib.datasets import load_fashion_mnist
from sklearn_calib.estimators import NetClassifier
from sklearn_calib.scoring import (
    brier_score,
    expected_calibration_error,
    negative_log_likelihood,
)

#: Calibrators compared: name -> factory (``input`` is set per logit set).
CALIBRATORS = {
    "SMS": StructuredMatrixScaling,
    "SVS": StructuredVectorScaling,
    "TS": TemperatureScaling,
    "ETS": EnsembleTemperatureScaling,
    "vector": VectorScaling,
    "matrix": MatrixScaling,
    "Dirichlet": DirichletCalibration,
    "Platt": PlattScaling,
    "quadratic": QuadraticScaling,
    "beta": BetaCalibration,
    "isotonic": IsotonicCalibration,
    "HB": HistogramBinning,
    "scaling-binning": ScalingBinning,
    "selector": CalibratorSelector,
}
UNCALIBRATED = "uncalibrated"

#: scikit-learn classifiers: name -> (factory, method giving the scores, kind of scores).
CLASSIFIERS = {
    "logreg": (
        lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
        "decision_function",
        "logits",
    ),
    "hgb": (
        lambda: HistGradientBoostingClassifier(max_iter=100, random_state=0),
        "decision_function",
        "logits",
    ),
    "naive-bayes": (GaussianNB, "predict_proba", "probabilities"),
    "forest": (
        lambda: RandomForestClassifier(n_estimators=200, random_state=0, n_jobs=1),
        "predict_proba",
        "probabilities",
    ),
    "mlp": (
        lambda: make_pipeline(
            StandardScaler(),
            MLPClassifier(hidden_layer_sizes=(64,), max_iter=500, random_state=0),
        ),
        "predict_proba",
        "probabilities",
    ),
}

TABULAR = {"digits": load_digits, "breast_cancer": load_breast_cancer, "wine": load_wine}


def _two_columns(scores, kind):
    """1-D binary scores as two columns: logits (0, d), probabilities (1 - p, p)."""
    if scores.ndim == 2:
        return scores
    if kind == "logits":
        return np.column_stack([np.zeros_like(scores), scores])
    return np.column_stack([1 - scores, scores])


def _uncalibrated(scores, kind):
    return softmax(scores, axis=1) if kind == "logits" else scores


def _evaluate(y, proba, n_classes):
    labels = np.arange(n_classes)
    return {
        "nll": negative_log_likelihood(y, proba, labels=labels),
        "ece": expected_calibration_error(y, proba, labels=labels),
        "brier": brier_score(y, proba, labels=labels),
    }


def calibrate_and_score(logit_set, split, scores, kind, y, calibration, test):
    """Rows of the results table: every calibrator fitted on one split and scored."""
    n_classes = scores.shape[1]
    classes = np.arange(n_classes)
    rows = []
    proba = _uncalibrated(scores[test], kind)
    rows.append({"calibrator": UNCALIBRATED, "fit_s": 0.0, **_evaluate(y[test], proba, n_classes)})
    for name, factory in CALIBRATORS.items():
        calibrator = factory().set_params(input=kind)
        start = time.process_time()
        calibrator.fit(scores[calibration], y[calibration], classes=classes)
        fit_time = time.process_time() - start
        proba = calibrator.predict_proba(scores[test])
        rows.append({"calibrator": name, "fit_s": fit_time, **_evaluate(y[test], proba, n_classes)})
    for row in rows:
        row.update(logit_set=logit_set, split=split, n_classes=n_classes, kind=kind)
    return rows


def tabular_runs(n_splits, quick):
    """Rows for scikit-learn's bundled sets with every classifier."""
    rows = []
    classifiers = dict(list(CLASSIFIERS.items())[:2]) if quick else CLASSIFIERS
    for set_name, loader in TABULAR.items():
        X, y = loader(return_X_y=True)
        for clf_name, (factory, method, kind) in classifiers.items():
            for split in range(n_splits):
                train, rest = train_test_split(
                    np.arange(len(y)), train_size=0.5, stratify=y, random_state=split
                )
                calibration, test = train_test_split(
                    rest, train_size=0.5, stratify=y[rest], random_state=split
                )
                classifier = factory().fit(X[train], y[train])
                scores = _two_columns(getattr(classifier, method)(X), kind)
                rows += calibrate_and_score(
                    f"{set_name}/{clf_name}", split, scores, kind, y, calibration, test
                )
            print(f"  {set_name}/{clf_name}: {n_splits} splits", flush=True)
    return rows


def fashion_mnist_logits(quick):
    """Logits of two Fashion-MNIST MLPs on 20,000 images neither was trained on."""
    X_train, y_train, X_test, y_test = load_fashion_mnist(return_X_y=True, as_image=False)
    n_train = 5_000 if quick else 20_000
    held_out_X = np.concatenate([X_test, X_train[n_train : n_train + 10_000]])
    held_out_y = np.concatenate([y_test, y_train[n_train : n_train + 10_000]])
    logit_sets = {}
    for epochs in (2, 4) if quick else (4, 30):
        net = NetClassifier(
            "mlp",
            module__hidden_units=(256,),
            max_epochs=epochs,
            lr=0.05,
            batch_size=128,
            random_state=0,
            device="cpu",
        ).fit(X_train[:n_train], y_train[:n_train])
        logit_sets[f"fashion_mnist/mlp-{epochs}ep"] = net.decision_function(held_out_X)
        print(f"  fashion_mnist/mlp-{epochs}ep trained", flush=True)
    return logit_sets, held_out_y


def fashion_mnist_runs(n_splits, quick):
    """Rows for the Fashion-MNIST networks' held-out logits."""
    logit_sets, y = fashion_mnist_logits(quick)
    rows = []
    for name, logits in logit_sets.items():
        for split in range(n_splits):
            calibration, test = train_test_split(
                np.arange(len(y)), train_size=0.5, stratify=y, random_state=split
            )
            rows += calibrate_and_score(name, split, logits, "logits", y, calibration, test)
    return rows


def add_ranks(rows):
    """Rank calibrators by log loss within each (logit set, split); 1 is the best."""
    groups = {}
    for row in rows:
        groups.setdefault((row["logit_set"], row["split"]), []).append(row)
    for group in groups.values():
        ranks = rankdata([row["nll"] for row in group], method="average")
        for row, rank in zip(group, ranks, strict=True):
            row["rank"] = float(rank)


def _mean_std(values):
    return f"{np.mean(values):.4f} ± {np.std(values):.4f}"


def summary(rows, names):
    """Per calibrator over the given rows: mean rank and mean metrics."""
    table = {}
    for name in names:
        chosen = [row for row in rows if row["calibrator"] == name]
        table[name] = {
            "rank": np.mean([row["rank"] for row in chosen]),
            "nll": np.mean([row["nll"] for row in chosen]),
            "ece": np.mean([row["ece"] for row in chosen]),
            "brier": np.mean([row["brier"] for row in chosen]),
            "fit_s": np.mean([row["fit_s"] for row in chosen]),
        }
    return table


def verdicts(multiclass, binary):
    """Whether each claim of the published ranking holds on these logit sets."""
    lines = []
    if multiclass:
        order = sorted(multiclass, key=lambda name: multiclass[name]["rank"])
        lines.append(
            f"- Multiclass: SMS has the best mean rank by log loss: "
            f"{'holds' if order[0] == 'SMS' else 'does not hold'} (best: {order[0]}, "
            f"{multiclass[order[0]]['rank']:.2f}; SMS {multiclass['SMS']['rank']:.2f}, "
            f"SVS {multiclass['SVS']['rank']:.2f}, TS {multiclass['TS']['rank']:.2f})."
        )
        structured = min(multiclass["SMS"]["rank"], multiclass["SVS"]["rank"])
        lines.append(
            f"- Multiclass: SMS or SVS ranks ahead of temperature scaling: "
            f"{'holds' if structured < multiclass['TS']['rank'] else 'does not hold'}."
        )
    if binary:
        order = sorted(binary, key=lambda name: binary[name]["rank"])
        leaders = ("quadratic", "beta", "Platt")
        lines.append(
            f"- Binary: quadratic scaling, beta calibration or Platt scaling has the best mean "
            f"rank: {'holds' if order[0] in leaders else 'does not hold'} (top three: "
            f"{', '.join(order[:3])}; "
            + ", ".join(f"{name} {binary[name]['rank']:.2f}" for name in leaders)
            + ")."
        )
    for label, table in (("multiclass", multiclass), ("binary", binary)):
        if not table:
            continue
        base = table[UNCALIBRATED]["nll"]
        below = [name for name in ("HB", "isotonic") if table[name]["nll"] > base]
        verdict = {2: "holds", 1: f"holds for {''.join(below)} only", 0: "does not hold"}
        lines.append(
            f"- {label.capitalize()}: histogram binning and isotonic regression have a higher "
            f"mean log loss than the uncalibrated model: {verdict[len(below)]} "
            f"(uncalibrated {base:.4f}, HB {table['HB']['nll']:.4f}, isotonic "
            f"{table['isotonic']['nll']:.4f})."
        )
    return lines


def _summary_table(table):
    lines = [
        "| calibrator | mean rank | log loss | ECE | Brier | fit s (CPU) |",
        "|---|---|---|---|---|---|",
    ]
    for name in sorted(table, key=lambda name: table[name]["rank"]):
        row = table[name]
        lines.append(
            f"| {name} | {row['rank']:.2f} | {row['nll']:.4f} | {row['ece']:.4f} | "
            f"{row['brier']:.4f} | {row['fit_s']:.3f} |"
        )
    return lines


def _per_set_table(rows, names, metric):
    sets = sorted({row["logit_set"] for row in rows})
    lines = [
        "| calibrator | " + " | ".join(sets) + " |",
        "|---|" + "---|" * len(sets),
    ]
    for name in names:
        cells = [
            _mean_std([r[metric] for r in rows if r["calibrator"] == name and r["logit_set"] == s])
            for s in sets
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def write_report(rows, out, command, elapsed, n_splits):
    out.mkdir(parents=True, exist_ok=True)
    columns = ["logit_set", "split", "n_classes", "kind", "calibrator", "nll", "ece", "brier"]
    columns += ["rank", "fit_s"]
    with open(out / "calibrator_arena.csv", "w") as handle:
        handle.write(",".join(columns) + "\n")
        for row in rows:
            handle.write(",".join(str(row[column]) for column in columns) + "\n")
    names = [UNCALIBRATED, *CALIBRATORS]
    multiclass_rows = [row for row in rows if row["n_classes"] > 2]
    binary_rows = [row for row in rows if row["n_classes"] == 2]
    multiclass = summary(multiclass_rows, names) if multiclass_rows else {}
    binary = summary(binary_rows, names) if binary_rows else {}
    n_sets = len({row["logit_set"] for row in rows})
    lines = [
        "# Post-hoc calibrators on real logit sets (CalArena-style comparison)",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), numpy "
        f"{np.__version__}; run time {elapsed / 60:.1f} min.  ",
        f"{n_sets} logit sets x {n_splits} splits; generator and protocol: "
        "`benchmarks/scripts/calibrator_arena.py` (its docstring). Per-run values: "
        "`calibrator_arena.csv`.",
        "",
        "## Does the published ranking hold here?",
        "",
        *verdicts(multiclass, binary),
        "",
    ]
    for label, table, subset in (
        ("Multiclass logit sets", multiclass, multiclass_rows),
        ("Binary logit sets", binary, binary_rows),
    ):
        if not table:
            continue
        lines += [
            f"## {label}: mean rank by log loss and mean metrics",
            "",
            *_summary_table(table),
            "",
            f"### {label}: log loss per set (mean ± std over splits)",
            "",
            *_per_set_table(subset, names, "nll"),
            "",
            f"### {label}: ECE per set (mean ± std over splits)",
            "",
            *_per_set_table(subset, names, "ece"),
            "",
            f"### {label}: Brier score per set (mean ± std over splits)",
            "",
            *_per_set_table(subset, names, "brier"),
            "",
        ]
    (out / "calibrator_arena.md").write_text("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5, help="random splits per logit set")
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/reports/calibrator_arena"), metavar="DIR"
    )
    parser.add_argument(
        "--quick", action="store_true", help="two classifiers, small short-trained networks"
    )
    parser.add_argument(
        "--skip-fashion-mnist", action="store_true", help="only scikit-learn's bundled sets"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    command = "PYTHONPATH=. python benchmarks/scripts/calibrator_arena.py " + " ".join(sys.argv[1:])
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = tabular_runs(args.splits, args.quick)
        if not args.skip_fashion_mnist:
            rows += fashion_mnist_runs(args.splits, args.quick)
    add_ranks(rows)
    write_report(rows, args.out, command.strip(), time.perf_counter() - start, args.splits)
    print(f"report: {args.out / 'calibrator_arena.md'}")


if __name__ == "__main__":
    main()
