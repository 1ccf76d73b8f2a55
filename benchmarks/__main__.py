"""Command line of the experiments: ``python -m benchmarks list|run|summary ...``.

``run NAME[,NAME...]|all`` trains the runs the named experiments need that the store does
not hold yet (shared between experiments), then writes each experiment's ``runs.csv``,
``report.md`` and figures under ``OUT/NAME/``. With ``--max-minutes`` no run is started
that would end past the budget; the reports of experiments whose runs are not all stored
are then left for a later call, and the exit status is 75 ("call again"). ``--dry-run``
prints the plan and its time estimate without training. ``summary`` writes the one-page
summary of the committed reports (``benchmarks/reports/README.md``); with ``--check`` it
only says whether that page is current (exit status 1 when not). ``venn-abers`` writes the
report of Venn-Abers predictors on the shared CIFAR network outputs (no training).
``label-shift`` writes the report of label-shift adaptation on the shared CIFAR-10 network
outputs and on a Fashion-MNIST MLP and CNN that it trains first (``--epochs 0`` leaves the
MLP out, ``--cnn-epochs 0`` the CNN).
"""

import argparse
import shlex
import sys
import time
import traceback
from pathlib import Path

from sklearn_calib.estimators import resolve_device

from ._costs import parallel_jobs
from ._label_shift import label_shift_command
from ._presets import DATASETS, PRESETS, make_config
from ._report import format_duration
from ._runner import Estimator, Task, execute
from ._store import RunStore
from ._summary import write_summary
from ._venn_abers import venn_abers_command
from .experiments import EXPERIMENTS
from .experiments._base import Context

#: Exit status when the time budget stopped the sweep before every run was trained.
EXIT_INCOMPLETE = 75
#: Exit status when an experiment's analysis raised (its traceback is printed; the stored
#: runs are kept, so a later call only redoes the analysis).
EXIT_FAILED = 1

DEFAULT_STORE = "benchmarks/results/store"
DEFAULT_OUT = "benchmarks/results/reports"
DEFAULT_REPORTS = "benchmarks/reports"
DEFAULT_CIFAR = "../shared/data/cifar"
DEFAULT_VENN_ABERS = "benchmarks/reports/venn_abers"
DEFAULT_LABEL_SHIFT_DATA = "../shared/data/label_shift"
DEFAULT_LABEL_SHIFT = "benchmarks/reports/label_shift"
#: Epochs of the label-shift report's Fashion-MNIST CNN (about 2 minutes of training on 2
#: loaded cores).
CNN_EPOCHS = 10


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Reproduce the calibration papers' tables and figures with sklearn_calib.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list the experiments")
    run = commands.add_parser("run", help="train what is missing and write the reports")
    run.add_argument("names", help="experiment name(s), comma-separated, or 'all'")
    run.add_argument(
        "--preset",
        choices=PRESETS,
        default="quick",
        help="quick (digits, seconds), cpu (the 2-core reproduction regime), full (GPU)",
    )
    run.add_argument(
        "--dataset",
        choices=DATASETS,
        default=None,
        help="default: digits (quick), fashion_mnist (full, cpu)",
    )
    run.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="number of training seeds (default: 2 quick, 3 full and cpu)",
    )
    run.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="training epochs (default: 12 quick, 10 full, 40 cpu)",
    )
    run.add_argument(
        "--train-size",
        type=int,
        default=None,
        help="use only this many training samples (smoke tests)",
    )
    run.add_argument("--device", default="auto", help="'auto', 'cpu', 'cuda', ...")
    run.add_argument("--data-home", default=None, help="folder of the Fashion-MNIST files")
    run.add_argument("--out", default=DEFAULT_OUT, help=f"reports folder ({DEFAULT_OUT})")
    run.add_argument("--store", default=DEFAULT_STORE, help=f"run store ({DEFAULT_STORE})")
    run.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="start no run expected to end after this many minutes",
    )
    run.add_argument("--jobs", type=int, default=1, help="runs trained at the same time")
    run.add_argument("--dry-run", action="store_true", help="print the plan, train nothing")
    summary = commands.add_parser(
        "summary", help="write the claim-by-regime summary of the committed reports"
    )
    summary.add_argument(
        "--reports", default=DEFAULT_REPORTS, help=f"reports folder ({DEFAULT_REPORTS})"
    )
    summary.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the summary is stale"
    )
    venn_abers = commands.add_parser(
        "venn-abers", help="Venn-Abers against TS, SMS and isotonic on CIFAR network outputs"
    )
    venn_abers.add_argument(
        "--data", default=DEFAULT_CIFAR, help=f"folder of the CIFAR outputs ({DEFAULT_CIFAR})"
    )
    venn_abers.add_argument(
        "--out", default=DEFAULT_VENN_ABERS, help=f"report folder ({DEFAULT_VENN_ABERS})"
    )
    venn_abers.add_argument("--repeats", type=int, default=20, help="random splits (20)")
    venn_abers.add_argument(
        "--calibration", type=int, default=5000, help="calibration rows of a split (5000)"
    )
    label_shift = commands.add_parser(
        "label-shift", help="EM, BBSE and RLLS under Dirichlet label shift of network outputs"
    )
    label_shift.add_argument(
        "--data",
        default=DEFAULT_LABEL_SHIFT_DATA,
        help=f"folder of Alexandari et al.'s demo outputs ({DEFAULT_LABEL_SHIFT_DATA})",
    )
    label_shift.add_argument(
        "--out", default=DEFAULT_LABEL_SHIFT, help=f"report folder ({DEFAULT_LABEL_SHIFT})"
    )
    label_shift.add_argument("--trials", type=int, default=100, help="shifted targets (100)")
    label_shift.add_argument(
        "--epochs", type=int, default=40, help="epochs of the Fashion-MNIST MLP (40; 0 skips it)"
    )
    label_shift.add_argument(
        "--cnn-epochs",
        type=int,
        default=CNN_EPOCHS,
        help=f"epochs of the Fashion-MNIST CNN ({CNN_EPOCHS}; 0 skips it)",
    )
    label_shift.add_argument(
        "--train-size", type=int, default=10_000, help="training images of each (10000)"
    )
    label_shift.add_argument("--data-home", default=None, help="folder of the Fashion-MNIST files")
    return parser


def _names(text, parser):
    if text == "all":
        return list(EXPERIMENTS)
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in EXPERIMENTS]
    if unknown or not names:
        parser.error(f"unknown experiment(s) {unknown}; choose from {list(EXPERIMENTS)} or all")
    return names


def list_experiments(stream=sys.stdout):
    """Print every experiment's name and what it reproduces."""
    width = max(map(len, EXPERIMENTS))
    for name, experiment in EXPERIMENTS.items():
        stream.write(f"{name:<{width}}  {experiment.reproduces}\n")


def plan(experiments, config):
    """The runs of each experiment and the unique tasks of the sweep, in order."""
    runs_by_name, tasks = {}, {}
    for experiment in experiments:
        runs = experiment.runs(config)
        runs_by_name[experiment.name] = runs
        for run in runs:
            if run.key not in tasks:
                label = f"{experiment.name}: {run.method.label} seed {run.seed}"
                tasks[run.key] = Task(run.key, run.spec, label)
    return runs_by_name, list(tasks.values())


def _estimate_text(estimator, missing, training, analysis, jobs, config):
    """The plan line's estimate and what it rests on: measured steps or the preset's prior."""
    if not missing:
        return "nothing to train"
    steps = [step for step in estimator.steps.values() if step is not None]
    basis = (
        f"measured here: {len(steps)} kinds of run, "
        + ", ".join(f"{1000 * step.batch:.1f} ms/batch" for step in steps)
        if steps
        else f"not measured, the preset's prior: {config.epoch_seconds:g} s/epoch + "
        f"{config.run_overhead:g} s/run"
    )
    return (
        f"about {format_duration(training + analysis)} ({format_duration(training)} of "
        f"training with {parallel_jobs(jobs)} at a time, {format_duration(analysis)} of "
        f"analysis; {basis})"
    )


def run_command(args, argv, stream=sys.stdout):
    """Train what is missing and write the reports; return the exit status."""
    config = make_config(
        args.preset,
        args.dataset,
        seeds=args.seeds,
        epochs=args.epochs,
        train_size=args.train_size,
        device=args.device,
        data_home=args.data_home,
    )
    experiments = [EXPERIMENTS[name] for name in args.names]
    store = RunStore(args.store)
    runs_by_name, tasks = plan(experiments, config)
    estimator = Estimator(config.epoch_seconds, config.run_overhead)
    stored = {t.key: store.load(t.key, t.spec) for t in tasks}
    missing = [t for t in tasks if stored[t.key] is None]
    legacy = sum(record.legacy for record in stored.values() if record is not None)
    described = {}
    for experiment in experiments:
        described.setdefault(experiment.describe_runs(config), []).append(experiment.name)
    if len(described) == 1:
        setup = next(iter(described))
    else:
        setup = "; ".join(f"{', '.join(names)}: {text}" for text, names in described.items())
    failures = estimator.measure(
        missing, device=args.device, data_home=args.data_home, jobs=args.jobs
    )
    started = time.monotonic()
    training = estimator.total(missing, args.jobs)
    analysis = estimator.analysis_seconds(runs_by_name)
    stream.write(
        f"{len(tasks)} runs for {', '.join(args.names)} ({config.preset}, {setup}): "
        f"{len(missing)} to train, "
        f"{_estimate_text(estimator, missing, training, analysis, args.jobs, config)}\n"
    )
    for failure in failures:
        stream.write(f"  not measured, the preset's prior stands: {failure}\n")
    if legacy:
        stream.write(
            f"  {legacy} stored records predate the version check (no sklearn_calib version "
            "recorded) and are used as they are; a fresh --store trains them again\n"
        )
    if args.dry_run:
        counted = set()
        for experiment in experiments:
            keys = [run.key for run in runs_by_name[experiment.name]]
            new = [t for t in missing if t.key in set(keys) - counted]
            counted.update(keys)
            stream.write(
                f"  {experiment.name}: {len(keys)} runs, {len(new)} to train beyond the "
                f"experiments above, about {format_duration(estimator.total(new, args.jobs))}\n"
            )
        return 0
    device = resolve_device(args.device)
    summary = execute(
        tasks,
        store,
        device=args.device,
        data_home=args.data_home,
        max_minutes=args.max_minutes,
        jobs=args.jobs,
        estimator=estimator,
        stream=stream,
    )
    stream.write(
        f"trained {len(summary.trained)} runs in {format_duration(summary.seconds)}"
        + (f", {len(summary.remaining)} left for a later call" if summary.remaining else "")
        + "\n"
    )
    command = "python -m benchmarks " + shlex.join(argv)
    records, failed = {}, []
    for experiment in experiments:
        runs = runs_by_name[experiment.name]
        for run in runs:
            if run.key not in records:
                record = store.load(run.key, run.spec)
                if record is not None:
                    records[run.key] = record
        if not all(run.key in records for run in runs):
            stream.write(f"{experiment.name}: runs missing, report not written (call again)\n")
            continue
        folder = Path(args.out) / experiment.name
        context = Context(config, runs, records, folder, command, device, experiment.premise)
        try:
            path = experiment.analyze(context)
        except Exception:  # one failed analysis must not cost the other reports
            failed.append(experiment.name)
            stream.write(f"{experiment.name}: analysis failed\n{traceback.format_exc()}")
            continue
        stream.write(f"{experiment.name}: wrote {path}\n")
    stream.write(
        f"done in {format_duration(time.monotonic() - started)}"
        + (f" (estimated {format_duration(training + analysis)})" if missing else "")
        + "\n"
    )
    if failed:
        return EXIT_FAILED
    return 0 if summary.complete else EXIT_INCOMPLETE


def summary_command(args, stream=sys.stdout):
    """Write (or check) the reports' summary page; return the exit status."""
    if not Path(args.reports).is_dir():
        stream.write(f"expected --reports to be a folder of reports, got {args.reports!r}\n")
        return EXIT_FAILED
    path, current = write_summary(args.reports, check=args.check)
    if args.check:
        stream.write(
            f"{path} is current\n"
            if current
            else f"{path} is stale: run python -m benchmarks summary\n"
        )
        return 0 if current else EXIT_FAILED
    stream.write(f"{path} {'unchanged' if current else 'written'}\n")
    return 0


def main(argv=None, stream=sys.stdout):
    """Entry point; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "list":
        list_experiments(stream)
        return 0
    if args.command == "summary":
        return summary_command(args, stream)
    if args.command == "venn-abers":
        args.argv = argv[1:]
        return venn_abers_command(args, stream)
    if args.command == "label-shift":
        if args.trials < 2:
            parser.error(f"expected --trials >= 2, got {args.trials}")
        if min(args.epochs, args.cnn_epochs) < 0 or args.train_size < 1:
            parser.error(
                "expected --epochs >= 0, --cnn-epochs >= 0 and --train-size >= 1, got "
                f"{args.epochs}, {args.cnn_epochs} and {args.train_size}"
            )
        args.argv = argv[1:]
        return label_shift_command(args, stream)
    args.names = _names(args.names, parser)
    if args.jobs < 1:
        parser.error(f"expected --jobs >= 1, got {args.jobs}")
    if args.max_minutes is not None and args.max_minutes <= 0:
        parser.error(f"expected --max-minutes > 0, got {args.max_minutes}")
    return run_command(args, argv, stream)


if __name__ == "__main__":
    sys.exit(main())
