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
from scipy import stats

from .._posthoc import (
    METRICS,
    ece_temperature,
    evaluate,
    histogram_binning,
    nll_temperature,
    scaled_probabilities,
)
from .._presets import OVERCONFIDENT_T
from .._report import finite_mean, format_duration, mean_std
from .._store import run_key
from .._train import GRIDS, make_spec


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

    def record(self, run):
        return self.records[run.key]

    def evaluation(self, run, grid):
        """The cached :class:`RunEvaluation` of ``run`` with the temperature grid ``grid``."""
        return _evaluation(self.record(run), grid, str(self.device))


class RunEvaluation:
    """Metrics of one stored run on the test set: before and after post-hoc calibration.

    Temperatures are chosen on the validation set (never on test data): by ECE over
    ``grid`` (the seeds' way) or by NLL (exact). Histogram binning (15 equal-size bins on
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
    def hb(self):
        """Test metrics after histogram binning fitted on the validation set."""
        names = ("accuracy", "ece", "mce", "ada_ece")

        def compute():
            proba = histogram_binning(self.val_logits, self.val_y, self.test_logits)
            return evaluate(self.test_y, proba, names)

        return self._metrics(compute, names)


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


def cell(rows, method, name, scale=100.0, digits=2):
    """``mean ± std`` of a column for one method."""
    return mean_std(column(rows, method, name), scale, digits)


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


def ttest(values, reference):
    """Two-sample t-test (``scipy.stats.ttest_ind``) p-value.

    NaN with fewer than two finite values on a side or with no variance on either side
    (the test is undefined there).
    """
    values = [v for v in values if math.isfinite(v)]
    reference = [v for v in reference if math.isfinite(v)]
    if len(values) < 2 or len(reference) < 2:
        return math.nan
    if np.ptp(values) == 0 and np.ptp(reference) == 0:
        return math.nan
    return float(stats.ttest_ind(values, reference).pvalue)


def significantly(values, reference, higher, alpha=0.05):
    """Whether ``values`` are higher (``higher=True``) or lower than ``reference`` on
    average, with a two-sample t-test p-value below ``alpha`` (:func:`ttest`; an undefined
    test is not significant)."""
    difference = finite_mean(values) - finite_mean(reference)
    return (difference > 0 if higher else difference < 0) and ttest(values, reference) < alpha


def mark(values, reference, alpha=0.05):
    """Seed 001's marks against CE: ▲/▼ significantly higher/lower, △/▽ not significant."""
    p = ttest(values, reference)
    higher = finite_mean(values) > finite_mean(reference)
    if not math.isfinite(p):
        return ("△" if higher else "▽") + " (n/a)"
    symbol = ("▲" if higher else "▼") if p < alpha else ("△" if higher else "▽")
    return f"{symbol} (p={p:.2g})"


def pct(value, digits=2):
    """A fraction as a percentage string."""
    return "–" if not math.isfinite(value) else f"{100 * value:.{digits}f}"


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
            "order; the data split is the same for all seeds). Tables give mean ± std over "
            "seeds (sample std)."
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
            f"T = {mean_std(temperature)} (NLL-optimal; T > 1: overconfident). "
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

