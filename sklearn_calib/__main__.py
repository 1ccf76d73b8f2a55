"""Main job: fit scikit-learn classifiers on the digits data and report their calibration.

Run ``python -m sklearn_calib`` (or the ``sklearn-calib`` console script). It prints a
calibration report table and writes it, with a reliability diagram PNG, to ``--out``.
"""

import argparse
import pathlib
import sys

from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ._report import calibration_report, format_report

DEFAULT_OUT = "sklearn_calib_output"
REPORT_FILE = "report.txt"
FIGURE_FILE = "reliability_digits.png"


def _models():
    return {
        "LogisticRegression": make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
        "GaussianNB": GaussianNB(),
    }


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m sklearn_calib",
        description="Fit classifiers on scikit-learn's digits and report their calibration.",
    )
    parser.add_argument(
        "--out", default=DEFAULT_OUT, help=f"output directory (default: {DEFAULT_OUT})"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the train/test split")
    parser.add_argument(
        "--test-size", type=float, default=0.5, help="fraction held out for the report"
    )
    parser.add_argument("--n-bins", type=int, default=15, help="bins of the binned metrics")
    return parser


def _save_figure(predictions, y_test, n_bins, path):
    """Draw one reliability diagram per model side by side and save it as a PNG."""
    from matplotlib.figure import Figure

    from .plotting import ReliabilityDisplay

    figure = Figure(figsize=(5 * len(predictions), 6.5), layout="constrained")
    axes = figure.subplots(2, len(predictions), squeeze=False, height_ratios=[3, 1])
    for column, (name, (proba, classes)) in enumerate(predictions.items()):
        ReliabilityDisplay.from_predictions(
            y_test,
            proba,
            n_bins=n_bins,
            labels=classes,
            name=name,
            ax=axes[0, column],
            hist_ax=axes[1, column],
        )
        axes[0, column].set_title(name)
    figure.savefig(path, dpi=100)


def run_job(out=DEFAULT_OUT, *, seed=0, test_size=0.5, n_bins=15):
    """Fit the models, write the report and the reliability diagram, return the reports.

    Parameters
    ----------
    out : str or path, default="sklearn_calib_output"
        Output directory, created if needed.
    seed : int, default=0
        Seed of the stratified train/test split.
    test_size : float, default=0.5
        Fraction of the data held out for the report.
    n_bins : int, default=15
        Number of bins of the binned metrics and the diagram.

    Returns
    -------
    reports : dict of str to dict of str to float
        Model name to its calibration report on the held-out data.
    """
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=test_size, stratify=y, random_state=seed
    )
    predictions, reports = {}, {}
    for name, model in _models().items():
        model.fit(X_train, y_train)
        proba = model.predict_proba(X_test)
        predictions[name] = (proba, model.classes_)
        reports[name] = calibration_report(y_test, proba, labels=model.classes_, n_bins=n_bins)

    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    header = (
        f"digits: {len(y)} samples, {len(set(y))} classes; train {len(y_train)}, "
        f"test {len(y_test)} (seed {seed}); binned metrics use {n_bins} bins"
    )
    table = format_report(reports)
    (out / REPORT_FILE).write_text(f"{header}\n\n{table}\n")
    print(header)
    print()
    print(table)
    print()
    print(f"wrote {out / REPORT_FILE}")
    try:
        _save_figure(predictions, y_test, n_bins, out / FIGURE_FILE)
    except ImportError:
        print("matplotlib is not installed: skipped the reliability diagram")
    else:
        print(f"wrote {out / FIGURE_FILE}")
    return reports


def main(argv=None):
    """Command-line entry point.

    Parameters
    ----------
    argv : list of str, default=None
        Arguments; ``sys.argv[1:]`` when None.

    Returns
    -------
    status : int
        0 on success.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    if not 0 < args.test_size < 1:
        parser.error(f"expected --test-size in (0, 1), got {args.test_size}")
    if args.n_bins < 1:
        parser.error(f"expected --n-bins >= 1, got {args.n_bins}")
    run_job(args.out, seed=args.seed, test_size=args.test_size, n_bins=args.n_bins)
    return 0


if __name__ == "__main__":
    sys.exit(main())
