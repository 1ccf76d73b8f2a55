"""Main job: train small networks, calibrate them post hoc and report their calibration.

Run ``python -m sklearn_calib`` (or the ``sklearn-calib`` console script). On digits (or
Fashion-MNIST) it trains a network with cross-entropy and with focal loss, calibrates each
with temperature scaling and histogram binning on a held-out calibration split, prints a
calibration report table and writes it, with the reliability diagrams as a PNG, to
``--out``. The data sets, splits and models are in :mod:`sklearn_calib._experiment`; the
post-hoc calibration and the report table are those of :mod:`sklearn_calib.evaluation`.
"""

import argparse
import math
import pathlib
import sys

from ._experiment import (
    DATASETS,
    HB_BINS,
    build_models,
    default_n_train,
    fit_and_calibrate,
    load_data,
    save_reliability_diagrams,
)
from .estimators import resolve_device
from .evaluation import _interval_column, evaluation_table, format_table
from .metrics import REPORT_METRICS

DEFAULT_OUT = "sklearn_calib_output"
REPORT_FILE = "report.txt"
FIGURE_FILE = "reliability_{dataset}.png"
NETWORKS = ("mlp", "cnn")
#: Metrics of the report that get a bootstrap interval over the test images: the proper
#: score the calibrators fit and the error readers compare.
INTERVALS = ("nll", "ece")
CONFIDENCE_LEVEL = 0.95
N_RESAMPLES = 1000


def _size(text):
    """Parse a split size: a fraction in (0, 1) or a number of samples >= 1."""
    value = float(text)
    if 0 < value < 1:
        return value
    if value >= 1 and value.is_integer():
        return int(value)
    raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1) or a count >= 1, got {text}")


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m sklearn_calib",
        description=(
            "Train a network with cross-entropy and with focal loss, calibrate each with "
            "temperature scaling (TS) and histogram binning (HB) on a held-out split, and "
            "report their calibration on the test split."
        ),
    )
    parser.add_argument(
        "--dataset",
        choices=sorted(DATASETS),
        default="digits",
        help="scikit-learn's digits (default; also fits LogisticRegression and GaussianNB) "
        "or Fashion-MNIST (needs the Debian package dataset-fashion-mnist or --data-home)",
    )
    parser.add_argument("--data-home", help="folder of the Fashion-MNIST IDX files")
    parser.add_argument(
        "--out", default=DEFAULT_OUT, help=f"output directory (default: {DEFAULT_OUT})"
    )
    parser.add_argument("--network", choices=NETWORKS, default="mlp", help="network (default: mlp)")
    parser.add_argument("--epochs", type=int, default=30, help="training epochs (default: 30)")
    parser.add_argument(
        "--lr", type=float, default=0.01, help="AdamW learning rate (default: 0.01)"
    )
    parser.add_argument("--gamma", type=float, default=3.0, help="focal loss gamma (default: 3)")
    parser.add_argument(
        "--n-train",
        type=int,
        help="largest number of training images (default: all on CUDA; on the CPU all of "
        "digits and 5000 of Fashion-MNIST)",
    )
    parser.add_argument(
        "--calibration-size",
        type=_size,
        help="fraction or number of the non-test images that calibrate "
        "(default: 0.25 of digits, 5000 of Fashion-MNIST)",
    )
    parser.add_argument(
        "--test-size",
        type=float,
        default=0.4,
        help="fraction of digits held out for the report (Fashion-MNIST has its own test set)",
    )
    parser.add_argument(
        "--device", default="auto", help="torch device of the networks (default: auto, CUDA if any)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the splits and networks")
    parser.add_argument("--n-bins", type=int, default=15, help="bins of the binned metrics")
    return parser


def run_job(
    data,
    out=DEFAULT_OUT,
    *,
    network="mlp",
    epochs=30,
    lr=0.01,
    gamma=3.0,
    device="cpu",
    seed=0,
    n_bins=15,
):
    """Fit and calibrate the models, write the report and the diagrams, return the reports.

    Parameters
    ----------
    data : Bunch
        Splits from :func:`sklearn_calib._experiment.load_data`.
    out : str or path, default="sklearn_calib_output"
        Output directory, created if needed.
    network, epochs, lr, gamma, device, seed
        The networks' parameters, see :func:`sklearn_calib._experiment.build_models`.
    n_bins : int, default=15
        Number of bins of the binned metrics and the diagrams.

    Returns
    -------
    reports : dict of str to dict of str to float or tuple
        Row name to column to value: the metrics of the test split, with 95 % bootstrap
        intervals of the NLL and the ECE, see
        :func:`sklearn_calib.evaluation.evaluation_table`.
    """
    models = build_models(
        data.name, network=network, epochs=epochs, lr=lr, gamma=gamma, device=device, seed=seed
    )
    predictions = fit_and_calibrate(models, data)
    reports = evaluation_table(
        predictions,
        data.y_test,
        labels=data.classes,
        n_bins=n_bins,
        intervals=INTERVALS,
        confidence_level=CONFIDENCE_LEVEL,
        n_resamples=N_RESAMPLES,
        random_state=seed,
    )
    titles = " and ".join(
        _interval_column(metric.label, CONFIDENCE_LEVEL)
        for metric in REPORT_METRICS
        if metric.name in INTERVALS
    )
    header = (
        f"{data.description}\n"
        f"networks: {network}, {epochs} epochs of AdamW (lr {lr:g}) on {device}; focal loss "
        f"gamma {gamma:g}\n"
        "calibrated on the calibration split: TS = temperature scaling (T: its temperature), "
        f"HB = histogram binning ({HB_BINS} bins)\n"
        f"metrics on the test split; binned metrics use {n_bins} bins\n"
        f"{titles}: percentile bootstrap intervals over the {len(data.y_test)} test images "
        f"({N_RESAMPLES} replicates), how much each value would vary over another test "
        "split of that size"
    )
    table = format_table(reports)
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_FILE).write_text(f"{header}\n\n{table}\n")
    print()
    print(header)
    print()
    print(table)
    print()
    print(f"wrote {out / REPORT_FILE}")
    figure = out / FIGURE_FILE.format(dataset=data.name)
    try:
        save_reliability_diagrams(
            predictions, data.y_test, figure, labels=data.classes, n_bins=n_bins
        )
    except ImportError:
        print("matplotlib is not installed: skipped the reliability diagrams")
    else:
        print(f"wrote {figure}")
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
        0 on success, 1 when the data set is not installed.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    if not 0 < args.test_size < 1:
        parser.error(f"expected --test-size in (0, 1), got {args.test_size}")
    for name in ("n_bins", "epochs"):
        if getattr(args, name) < 1:
            parser.error(f"expected --{name.replace('_', '-')} >= 1, got {getattr(args, name)}")
    if not (args.lr > 0 and math.isfinite(args.lr)):
        parser.error(f"expected a finite --lr > 0, got {args.lr}")
    if not (args.gamma >= 0 and math.isfinite(args.gamma)):
        parser.error(f"expected a finite --gamma >= 0, got {args.gamma}")
    out = pathlib.Path(args.out)
    if out.exists() and not out.is_dir():
        parser.error(f"expected --out to be a directory, got the file {out}")
    try:
        device = resolve_device(args.device)
    except ValueError as exc:
        parser.error(str(exc))
    n_train = args.n_train if args.n_train is not None else default_n_train(args.dataset, device)
    try:
        data = load_data(
            args.dataset,
            data_home=args.data_home,
            test_size=args.test_size,
            calibration_size=args.calibration_size,
            n_train=n_train,
            seed=args.seed,
        )
    except FileNotFoundError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        parser.error(str(exc))
    run_job(
        data,
        args.out,
        device=device,
        n_bins=args.n_bins,
        network=args.network,
        epochs=args.epochs,
        lr=args.lr,
        gamma=args.gamma,
        seed=args.seed,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
