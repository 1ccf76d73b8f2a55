"""What every experiment shares: its interface, its runs, per-run evaluation and helpers.

An experiment lists the methods it needs (:meth:`Experiment.methods`); every method is
trained once per seed, and the runs are shared through the store with every other
experiment that lists the same method under the same preset. Once all its runs are
stored, :meth:`Experiment.analyze` reads their logits and writes the CSV, report and
figures.
"""

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._posthoc import (
    METRICS,
    ece_temperature,
    evaluate,
    histogram_binning,
    nll_temperature,
    resampled_metric,
    scaled_probabilities,
)
from .._presets import OVERCONFIDENT_T
from .._report import finite_mean, format_duration, mean_std
from .._store import run_key
from .._train import GRIDS, make_spec
from .._uncertainty import CONFIDENCE, FEW, FEW_DF, N_RESAMPLES, over_seeds

#: Columns of a run that do not depend on the test rows (chosen on validation data).
VALIDATION_COLUMNS = ("temperature", "nll_temperature", "val_ece")
#: What the tables' intervals are (the Setup says it).
INTERVALS = (
    f"Tables give the mean over seeds and its {CONFIDENCE:.0%} interval [low, high]: seeds "
    "and test rows resampled together, t quantile with Satterthwaite's degrees of freedom, "
    f"clipped to the quantity's range (an ECE is not below 0); {FEW} marks an interval with "
    f"fewer than {FEW_DF:g} degrees of freedom (2 seeds: t above 4.3), too wide to say much "
    '(benchmarks/EXPERIMENTS.md, "How sure the numbers are").'
)
#: What "T" is in the tables and in the Setup (both appear in a report).
TEMPERATURES = (
    "T in the tables is the temperature of the recipe's grid with the lowest validation "
    "ECE, the one temperature scaling uses here (as the papers choose it); T_NLL in the "
    "Setup is the NLL-optimal validation temperature, the measure of over-confidence."
)
#: The range of a metric of :data:`~benchmarks._posthoc.METRICS` (others lie in [0, 1]).
METRIC_RANGES = {"nll": (0.0, math.inf), "brier": (0.0, 2.0)}
#: The test probabilities a column is computed from, by its prefix.
PHASES = ("test", "ts", "tsnll", "hb")


@dataclass(frozen=True)
class Run:
    """One trained model an experiment needs.

    Parameters
    ----------
    method : Method
    seed : int
    spec : dict
    key : str
    """

    method: object
    seed: int
    spec: dict = field(repr=False, compare=False)
    key: str = ""


@dataclass
class Context:
    """What :meth:`Experiment.analyze` works with.

    Parameters
    ----------
    config : Config
    runs : list of Run
    records : dict of str to Record
        The stored record of every run, by key.
    folder : Path
        Output folder of the experiment.
    command : str
        The command line that produced the report.
    device : torch.device
        Where the vectorised temperature search runs.
    premise : str
        The experiment's :attr:`Experiment.premise`.
    """

    config: object
    runs: list
    records: dict
    folder: Path
    command: str
    device: object = None
    premise: str = ""
    n_resamples: int = N_RESAMPLES
    _estimates: dict = field(default_factory=dict, repr=False)

    def record(self, run):
        return self.records[run.key]

    def evaluation(self, run, grid):
        """The cached :class:`RunEvaluation` of ``run`` with the temperature grid ``grid``."""
        return _evaluation(self.record(run), grid, str(self.device))

    def runs_of(self, label):
        """The runs of the method ``label``, in seed order."""
        return sorted((run for run in self.runs if run.method.label == label), key=_seed)

    def estimate(self, label, column, grid, *, n_bins=15):
        """The mean over seeds of a CSV column of the method ``label``, with its replicates.

        Parameters
        ----------
        label : str
            Method label.
        column : str
            ``"temperature"``, ``"nll_temperature"``, ``"val_ece"`` (chosen on validation
            data: the seeds vary, not the test rows) or ``PHASE_METRIC`` with a phase of
            :data:`PHASES` and a metric of :data:`~benchmarks._posthoc.METRICS` ("ts_ece").
        grid : str
            Temperature grid of the "ts" phase.
        n_bins : int, default=15
            Bins of a binned metric.

        Returns
        -------
        Estimate
        """
        key = (label, column, grid, n_bins)
        if key not in self._estimates:
            evaluations = [self.evaluation(run, grid) for run in self.runs_of(label)]
            bounds = column_range(column)
            if column in VALIDATION_COLUMNS:
                values = [getattr(ev, column) for ev in evaluations]
                estimate = over_seeds(label, values, n_resamples=self.n_resamples, bounds=bounds)
            else:
                pairs = [ev.resampled(column, n_bins, self.n_resamples) for ev in evaluations]
                replicates = np.array([r for _, r in pairs])
                estimate = over_seeds(label, [p for p, _ in pairs], replicates, bounds=bounds)
            self._estimates[key] = estimate
        return self._estimates[key]

    def values(self, label, column, grid):
        """The per-seed values of a validation column (:data:`VALIDATION_COLUMNS`) of the
        method ``label``, in seed order (for the checks of a number chosen on a grid)."""
        return [getattr(self.evaluation(run, grid), column) for run in self.runs_of(label)]

    def over_seeds(self, label, values, replicates=None, bounds=(-math.inf, math.inf)):
        """The mean over seeds of per-run numbers of the method ``label`` computed by the
        experiment (one per seed; with ``replicates``, their values on the resamples of
        the test rows), as an estimate (:func:`~benchmarks._uncertainty.over_seeds`)."""
        return over_seeds(label, values, replicates, n_resamples=self.n_resamples, bounds=bounds)

    def cell(self, label, column, grid, scale=100.0, digits=2):
        """``"mean [low, high]"`` of :meth:`estimate`, times ``scale``."""
        return self.estimate(label, column, grid).text(scale, digits)


def _seed(run):
    return run.seed


def column_range(column):
    """The range of a column of :meth:`Context.estimate`: a temperature above 0, the NLL
    above 0, the Brier score in [0, 2], any other metric in [0, 1]."""
    if column in ("temperature", "nll_temperature"):
        return (0.0, math.inf)
    return METRIC_RANGES.get(column.split("_", 1)[-1], (0.0, 1.0))


#: The metrics of histogram-binned probabilities (a binned map gives probabilities of 0:
#: no NLL or Brier score).
HB_METRICS = ("accuracy", "ece", "mce", "ada_ece")


class RunEvaluation:
    """Metrics of one stored run on the test set: before and after post-hoc calibration.

    Temperatures are chosen on the validation set (never on test data): by ECE over
    ``grid`` (the papers' way) or by NLL (exact). Histogram binning (15 equal-size bins on
    the top-1 confidence) is fitted on the validation set. A run whose logits are not all
    finite (a diverged training) gets NaN everywhere; tables show it as "–" and the
    report's setup names it.

    Parameters
    ----------
    record : Record
    grid : str
        Name of the temperature grid ("wang2021" or "mukhoti2020").
    device : str
    """

    def __init__(self, record, grid, device):
        self.record = record
        self.grid = grid
        self.device = device
        self.val_logits, self.val_y = record.logits("val")
        self.test_logits, self.test_y = record.logits("test")
        self.finite = bool(
            np.isfinite(self.val_logits).all() and np.isfinite(self.test_logits).all()
        )
        self._resampled = {}

    def _metrics(self, compute, names=tuple(METRICS)):
        return compute() if self.finite else dict.fromkeys(names, math.nan)

    @functools.cached_property
    def pre(self):
        """Test metrics of the raw model."""
        return self._metrics(lambda: evaluate(self.test_y, scaled_probabilities(self.test_logits)))

    @functools.cached_property
    def val_ece(self):
        """Validation ECE of the raw model (for choosing coefficients)."""
        proba = scaled_probabilities(self.val_logits)
        return self._metrics(lambda: evaluate(self.val_y, proba, ("ece",)), ("ece",))["ece"]

    @functools.cached_property
    def temperature(self):
        """Temperature with the lowest validation ECE on the grid."""
        if not self.finite:
            return math.nan
        return ece_temperature(self.val_logits, self.val_y, GRIDS[self.grid], device=self.device)

    @functools.cached_property
    def post(self):
        """Test metrics after temperature scaling with :attr:`temperature`."""
        return self._metrics(
            lambda: evaluate(self.test_y, scaled_probabilities(self.test_logits, self.temperature))
        )

    @functools.cached_property
    def nll_temperature(self):
        """NLL-optimal validation temperature."""
        return nll_temperature(self.val_logits, self.val_y) if self.finite else math.nan

    @functools.cached_property
    def post_nll(self):
        """Test metrics after temperature scaling with :attr:`nll_temperature`."""
        return self._metrics(
            lambda: evaluate(
                self.test_y, scaled_probabilities(self.test_logits, self.nll_temperature)
            )
        )

    @functools.cached_property
    def hb_probabilities(self):
        """Test probabilities after histogram binning fitted on the validation set."""
        return histogram_binning(self.val_logits, self.val_y, self.test_logits)

    @functools.cached_property
    def hb(self):
        """Test metrics after histogram binning fitted on the validation set."""
        names = HB_METRICS
        return self._metrics(lambda: evaluate(self.test_y, self.hb_probabilities, names), names)

    def probabilities(self, phase):
        """Test probabilities of a phase of :data:`PHASES`: raw, after TS with the
        ECE-chosen or the NLL-optimal temperature, after histogram binning."""
        if phase == "hb":
            return self.hb_probabilities
        temperature = {"test": 1.0, "ts": self.temperature, "tsnll": self.nll_temperature}
        return scaled_probabilities(self.test_logits, temperature[phase])

    def resampled(self, column, n_bins, n_resamples):
        """A test metric ``PHASE_METRIC`` and its values on bootstrap resamples of the test
        rows (the same resamples for every run: see :mod:`benchmarks._uncertainty`).

        Returns
        -------
        value : float
        replicates : ndarray of shape (n_resamples,)
        """
        key = (column, n_bins, n_resamples)
        if key not in self._resampled:
            phase, metric = column.split("_", 1)
            if phase not in PHASES or metric not in METRICS:
                raise ValueError(
                    f"Expected a column PHASE_METRIC with a phase in {PHASES} and a metric in "
                    f"{METRICS}, got {column!r}."
                )
            if phase == "hb" and metric not in HB_METRICS:
                raise ValueError(
                    f"Expected a metric of {HB_METRICS} after binning, got {metric!r}."
                )
            if self.finite:
                value, replicates = resampled_metric(
                    metric, self.test_y, self.probabilities(phase), n_bins, n_resamples
                )
            else:
                value, replicates = math.nan, np.full(n_resamples, math.nan)
            self._resampled[key] = (value, replicates)
        return self._resampled[key]


@functools.lru_cache(maxsize=1024)
def _evaluation(record, grid, device):
    return RunEvaluation(record, grid, device)


class Experiment:
    """Base class: ``name``, ``title``, ``reproduces``, :meth:`methods`, :meth:`analyze`."""

    #: Command-line name.
    name = ""
    #: Report title.
    title = ""
    #: Which table or figure of which seed it reproduces (one line for ``list``).
    reproduces = ""
    #: Which of its claims rest on cross-entropy ending overconfident, the papers' regime
    #: (the report's setup says so when CE's validation temperature shows the regime).
    premise = ""

    def methods(self, config):
        """Every method the experiment reports, meta-learned ones included."""
        raise NotImplementedError

    def describe_runs(self, config):
        """What the runs train on, for the plan line: data set, seeds and epochs."""
        return f"{config.data.name}, {len(config.seeds)} seeds, {config.epochs} epochs"

    def runs(self, config):
        """The runs to train: every method with every seed."""
        runs = []
        for method in self.methods(config):
            for seed in config.seeds:
                spec = make_spec(config, method, seed)
                runs.append(Run(method, seed, spec, run_key(spec)))
        return runs

    def analyze(self, context):
        """Write the CSV, report and figures; return the report's path."""
        raise NotImplementedError


def reliability_panels(context, labels, grid, phases=("before TS", "after TS")):
    """Rows of :func:`~benchmarks._report.reliability_figure`: each method's first run.

    The first run is that of the lowest seed whose logits are finite.

    Parameters
    ----------
    context : Context
    labels : list of str
        Method labels, one panel each.
    grid : str
        Temperature grid of the "after TS" row (T chosen on validation ECE).
    phases : tuple of str, default=("before TS", "after TS")

    Returns
    -------
    rows : list of (str, list of (str, ndarray, ndarray))
    """
    runs = {}
    for run in sorted(context.runs, key=lambda run: run.seed):
        if run.method.label not in runs and context.evaluation(run, grid).finite:
            runs[run.method.label] = run
    rows = []
    for phase in phases:
        panels = []
        for label in [label for label in labels if label in runs]:
            ev = context.evaluation(runs[label], grid)
            temperature = ev.temperature if phase == "after TS" else 1.0
            panels.append((label, ev.test_y, scaled_probabilities(ev.test_logits, temperature)))
        rows.append((phase, panels))
    return rows


def run_row(run, **values):
    """The identifying columns of a run's CSV row, followed by ``values``."""
    method = run.method
    training = run.spec["training"]
    row = {
        "method": method.label,
        "group": method.group,
        "loss": method.loss,
        "loss_params": ";".join(f"{k}={v}" for k, v in method.params),
        "coefficient": method.coefficient,
        "seed": run.seed,
        "family": method.family,
        "epochs": training["epochs"],
        "batch_size": training["batch_size"],
        "reduction": training["reduction"],
        "grad_clip": training["grad_clip"],
        "key": run.key,
    }
    row.update(values)
    return row


def metric_rows(context, grid, *, hb=False, nll_ts=False):
    """One CSV row per run with the val ECE, T, and test metrics before/after calibration."""
    rows = []
    for run in context.runs:
        ev = context.evaluation(run, grid)
        values = {"val_ece": ev.val_ece, "temperature": ev.temperature}
        values.update({f"test_{k}": v for k, v in ev.pre.items()})
        values.update({f"ts_{k}": v for k, v in ev.post.items()})
        if hb:
            values.update({f"hb_{k}": v for k, v in ev.hb.items()})
        if nll_ts:
            values["nll_temperature"] = ev.nll_temperature
            values.update({f"tsnll_{k}": v for k, v in ev.post_nll.items()})
        rows.append(run_row(run, **values))
    return rows


def column(rows, method, name):
    """The values of column ``name`` of the rows of ``method``, in seed order."""
    return [row[name] for row in rows if row["method"] == method]


def mean_of(rows, method, name):
    """Mean over seeds of column ``name`` for ``method`` (finite values only)."""
    return finite_mean(column(rows, method, name))


def std_of(rows, method, name):
    """Sample std over seeds of column ``name`` for ``method`` (0 for a single seed)."""
    values = [v for v in column(rows, method, name) if math.isfinite(v)]
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def choose_coefficients(rows, groups, by="val_ece"):
    """For each group, the method with the lowest mean ``by`` over seeds.

    Parameters
    ----------
    rows : list of dict
    groups : dict of str to list of str
        Group name to its method labels.
    by : str, default="val_ece"

    Returns
    -------
    chosen : dict of str to str
        Group name to the chosen method label.
    """
    return {
        group: min(labels, key=lambda label: _nan_last(mean_of(rows, label, by)))
        for group, labels in groups.items()
    }


def _nan_last(value):
    return math.inf if not math.isfinite(value) else value


def mark(difference):
    """A mark of a difference to a reference: ▲/▼ when its interval lies above/below zero,
    △/▽ (the sign of the difference) when the interval holds zero."""
    low, high = difference.interval()
    if low > 0 or high < 0:
        return "▲" if low > 0 else "▼"
    return "△" if difference.point > 0 else "▽"


def setup_text(context, families, extra=(), *, own_setup=None):
    """The report's setup section: data, model, recipes, seeds, device, time, command.

    ``own_setup`` (lines) replaces the preset's data, model and seed lines for an
    experiment that fixes its own data and network.
    """
    config = context.config
    records = [context.record(run) for run in context.runs]
    devices = sorted({f"{r.meta['device']} ({r.meta['device_name']})" for r in records})
    fit = sum(r.meta["fit_seconds"] for r in records)
    epochs = config.epochs
    lines = (
        list(own_setup)
        if own_setup is not None
        else [
            f"- Data: {config.describe_data()}.",
            f"- Model: {config.describe_model()}; bf16 autocast on CUDA, float32 on the CPU; "
            "the stored logits are computed in float32 after training.",
        ]
    )
    for name in families:
        family = config.families[name]
        reductions = {
            run.method.label: run.spec["training"]["reduction"]
            for run in context.runs
            if run.method.family == name and run.spec["training"]["reduction"] != family.reduction
        }
        lines.append(f"- Recipe `{name}` family: {family.describe(epochs, reductions)}.")
    diverged = [
        f"{run.method.label} seed {run.seed}"
        for run, record in zip(context.runs, records, strict=True)
        if not all(np.isfinite(record.logits(split)[0]).all() for split in ("val", "test"))
    ]
    if diverged:
        lines.append(
            f"- Diverged runs (non-finite logits; their metrics are left out, shown as –): "
            f"{', '.join(diverged)}."
        )
    if own_setup is None:
        lines.append(
            f"- Seeds: {', '.join(map(str, config.seeds))} (weight initialisation and batch "
            "order; the data split is the same for all seeds). " + INTERVALS + " " + TEMPERATURES
        )
        lines += regime_lines(context, families)
    lines += [
        *extra,
        f"- Trained on {', '.join(devices) or 'n/a'}; {len(records)} runs, "
        f"{format_duration(fit)} of training in total (runs shared with other experiments "
        "are counted here too).",
        f"- Command: `{context.command}`",
    ]
    return "\n".join(lines)


def is_plain_ce(method):
    """Whether ``method`` is plain cross-entropy (no mixup, no meta-learning)."""
    return method.loss == "ce" and method.estimator == "net" and not method.mixup_alpha


def ce_regime(context, family):
    """CE's test accuracies, NLL-optimal validation temperatures and training wall seconds
    in ``family``, one per seed (empty lists without a CE run)."""
    runs = [r for r in context.runs if r.method.family == family and is_plain_ce(r.method)]
    evaluations = [context.evaluation(run, family) for run in runs]
    return (
        [ev.pre["accuracy"] for ev in evaluations],
        [ev.nll_temperature for ev in evaluations],
        [context.record(run).meta["wall_seconds"] for run in runs],
    )


def regime_lines(context, families):
    """Setup lines with the regime's own numbers, per family: CE's test accuracy and
    validation temperature, the epochs and the training wall time; whether CE is
    overconfident (T >= :data:`~benchmarks._presets.OVERCONFIDENT_T`), flagged when not,
    and why verdicts may then differ from other regimes (the experiment's premise)."""
    lines = []
    for family in families:
        accuracy, temperature, wall = ce_regime(context, family)
        runs = [r for r in context.runs if r.method.family == family]
        total = sum(context.record(run).meta["wall_seconds"] for run in runs)
        epochs = sorted({run.spec["training"]["epochs"] for run in runs})
        text = (
            f"- Regime of `{family}`: {', '.join(map(str, epochs))} epochs; "
            f"{format_duration(total)} of training wall time over its {len(runs)} runs"
        )
        if not temperature:
            lines.append(text + " (no CE run in this experiment).")
            continue
        mean_t = finite_mean(temperature)
        overconfident = math.isfinite(mean_t) and round(mean_t, 2) >= OVERCONFIDENT_T
        text += (
            f" (CE: {format_duration(finite_mean(wall))} a run); CE's test accuracy "
            f"{mean_std(accuracy, 100.0)} %, CE's validation temperature "
            f"T_NLL = {mean_std(temperature)} (NLL-optimal; T > 1: overconfident; the "
            "tables' T is the grid temperature with the lowest validation ECE). "
        )
        if overconfident:
            text += f"CE is overconfident here (T ≥ {OVERCONFIDENT_T:g}), as in the papers" + (
                f". {context.premise}: where CE's T is near 1 (an underfit regime, as "
                "in the quick Fashion-MNIST reports) that premise fails and verdicts may differ."
                if context.premise
                else "."
            )
        else:
            text += (
                f"**CE is not overconfident here (T < {OVERCONFIDENT_T:g}), unlike in the "
                "papers**"
                + (
                    f". {context.premise}: verdicts here may differ from the papers' and "
                    "from a regime where CE overfits the NLL for that reason."
                    if context.premise
                    else "."
                )
            )
        lines.append(text)
    return lines
