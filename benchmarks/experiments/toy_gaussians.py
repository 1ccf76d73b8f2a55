"""``toy_gaussians``: Lin et al. (2025)'s toy study of uncertainty weights against the true
error.

Five two-dimensional Gaussians N(mu_k, I) with means uniform in [-10, 10]^2 (new means
for every run), 10,000 training and 1,000 test points per class (``quick``: 2,000
training points) and 1,000 validation points per class; a two-layer network (one hidden
layer of 64 units) trained with cross-entropy for 5 epochs (AdamW, lr 1e-3, batch 128).
On the test points the true per-sample calibration error ``c(x) = ||eta(x) - p(x)||_2``
(``eta`` the true posterior) is correlated (Pearson) with the weights of focal loss
``(1 - p_y)^gamma``, dual focal loss ``(1 - p_y + p_j)^gamma`` and the generalised Brier
score ``||e_y - p||_beta^gamma``, each at the hyperparameter that correlates best on the
validation points (Lin et al. grid-search them). Paper: gBS 0.664, DFL 0.638, FL 0.550.
The data are fixed by the experiment (``--dataset`` and ``--epochs`` do not apply). Each
run draws new data, so the runs' spread holds the data's sampling noise: the intervals
resample runs (the three weights of a run together).
"""

import numpy as np

from sklearn_calib.losses import uncertainty_weights

from .._data import DataSpec, load_split
from .._methods import Method
from .._posthoc import scaled_probabilities
from .._report import Report, pyplot
from .._store import run_key
from .._train import build_spec
from .._uncertainty import above
from ._base import Experiment, Run, run_row, setup_text

PAPER = {"FL": 0.550, "DFL": 0.638, "gBS": 0.664}
GAMMAS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0)
#: Weight name -> (parameter grid, the default parameters of the papers' training losses).
WEIGHTS = {
    "FL": ([{"gamma": g} for g in GAMMAS], {"gamma": 3.0}),
    "DFL": ([{"gamma": g} for g in GAMMAS], {"gamma": 5.0}),
    # beta = 1 is left out: there ||e_y - p||_1^gamma = (2 (1 - p_y))^gamma is the focal
    # weight times a constant, so gBS would correlate exactly as FL does.
    "gBS": ([{"beta": 2.0, "gamma": g} for g in GAMMAS[:-1]], {"beta": 2.0, "gamma": 2.0}),
}
#: Weight name -> its name in :func:`sklearn_calib.losses.uncertainty_weights`.
FUNCTIONS = {"FL": "focal", "DFL": "dual_focal", "gBS": "brier"}
METHOD = Method("CE (two-layer MLP)", "toy", "ce", group="toy")
TEST_PER_CLASS = 1000
EPOCHS = 5


def pearson(a, b):
    """Pearson correlation; NaN when either side is constant."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def weight_values(name, params, proba, y):
    """The weight ``name`` on numpy probabilities (``y``: column indices)."""
    labels = np.arange(proba.shape[1])
    return uncertainty_weights(y, proba, weight=FUNCTIONS[name], labels=labels, **params)


def describe(params):
    return ", ".join(f"{k}={v:g}" for k, v in params.items())


class ToyGaussians(Experiment):
    name = "toy_gaussians"
    title = "Uncertainty weights against the true calibration error (Lin et al. 2025, toy study)"
    reproduces = "Lin et al. (2025), toy study: Pearson r of FL, DFL, gBS weights with ||eta - p||"

    def methods(self, config):
        return [METHOD]

    def describe_runs(self, config):
        return f"two-dimensional Gaussians, {config.toy_seeds} runs, {EPOCHS} epochs"

    def data_spec(self, config, seed):
        return DataSpec(
            "gaussians",
            5 * config.toy_samples,
            5 * TEST_PER_CLASS,
            5 * TEST_PER_CLASS,
            data_seed=seed,
        )

    def runs(self, config):
        training = {
            "recipe": None,
            "optimizer": "adamw",
            "lr": 1e-3,
            "epochs": EPOCHS,
            "batch_size": 128,
            "reduction": "mean",
            "grad_clip": None,
            "mixup_alpha": 0.0,
            "augment": None,
        }
        runs = []
        for seed in range(config.toy_seeds):
            spec = build_spec(
                self.data_spec(config, seed),
                "mlp",
                {"hidden_units": [64]},
                "ce",
                {},
                training,
                seed,
            )
            runs.append(Run(METHOD, seed, spec, run_key(spec)))
        return runs

    def analyze(self, context):
        rows, scatter = [], {}
        for run in context.runs:
            record = context.record(run)
            data = load_split(self.data_spec(context.config, run.seed))
            values = {}
            for split in ("val", "test"):
                logits, y = record.logits(split)
                proba = scaled_probabilities(logits)
                error = np.linalg.norm(data[f"eta_{split}"] - proba, axis=1)
                values[split] = (proba, y, error)
            row = {"accuracy": float((values["test"][0].argmax(1) == values["test"][1]).mean())}
            for name, (grid, default) in WEIGHTS.items():
                val_proba, val_y, val_error = values["val"]
                test_proba, test_y, test_error = values["test"]
                val = [pearson(weight_values(name, p, val_proba, val_y), val_error) for p in grid]
                best = grid[int(np.nanargmax(val))]
                test_weight = weight_values(name, best, test_proba, test_y)
                row[f"{name}_params"] = describe(best)
                row[f"{name}_r_val"] = float(np.nanmax(val))
                row[f"{name}_r_test"] = pearson(test_weight, test_error)
                default_weight = weight_values(name, default, test_proba, test_y)
                row[f"{name}_r_test_default"] = pearson(default_weight, test_error)
                if run is context.runs[0]:
                    scatter["error"] = test_error
                    scatter[name] = (test_weight, row[f"{name}_params"])
            rows.append(run_row(run, **row))
        report = Report(context.folder, self.title)
        report.csv(rows)
        report.table(
            [
                "weight",
                "hyperparameters chosen on validation (per run)",
                "r (validation)",
                "r (test)",
                "r (test) at the loss default",
                "paper",
            ],
            [
                [
                    name,
                    "; ".join(r[f"{name}_params"] for r in rows),
                    over_runs(context, rows, f"{name}_r_val").text(digits=3),
                    over_runs(context, rows, f"{name}_r_test").text(digits=3),
                    over_runs(context, rows, f"{name}_r_test_default").text(digits=3)
                    + f" ({describe(WEIGHTS[name][1])})",
                    f"{PAPER[name]:.3f}",
                ]
                for name in WEIGHTS
            ],
            "**Pearson correlation** between the true per-sample calibration error "
            "||η(x) − p(x)||₂ and each weight on the test points, mean over runs [interval]. "
            "Hyperparameters are chosen per run by the correlation on the validation points "
            f"(γ in {list(GAMMAS)}; gBS with β = 2, γ up to {GAMMAS[-2]:g}); the loss "
            "defaults are focal γ = 3, "
            "dual focal γ = 5 and the Brier score (β = γ = 2).",
        )
        report.text(
            "Test accuracy of the network: "
            + over_runs(context, rows, "accuracy").text(100.0)
            + " %."
        )
        report.figure(
            self._figure(scatter),
            "toy_gaussians.png",
            f"Test points of run {context.runs[0].seed}: weight against the true "
            "calibration error.",
        )
        self._claims(report, context, rows)
        notes = [
            "Weights use the true label y of each test point (as in training); η comes "
            "from the known densities (`make_gaussian_blobs`).",
            'Lin et al. say "two layer CNN" for two-dimensional inputs; we read it as two '
            "linear layers (one hidden layer of 64 ReLU units).",
            "gBS is searched with β = 2 only: with β = 1 its weight ||e_y - p||_1^γ = "
            "(2 (1 - p_y))^γ is the focal weight times a constant, so its correlation would "
            "equal focal loss's at the same γ and the comparison of the two would test nothing.",
            "The paper's ordering rests on its unstated grid; the last column shows how much "
            "the correlations depend on the hyperparameters.",
        ]
        data = self.data_spec(context.config, 0)
        own_setup = [
            f"- Data: five two-dimensional Gaussians N(mu_k, I), means uniform in "
            f"[-10, 10]^2; {data.n_train // 5:,} training, {data.n_val // 5:,} validation "
            f"and {data.n_test // 5:,} test points per class.",
            f"- Model: a two-layer MLP (64 hidden ReLU units), cross-entropy, AdamW (lr 1e-3), "
            f"batch 128, {EPOCHS} epochs; bf16 autocast on CUDA, float32 on the CPU (the "
            "device is named below).",
            f"- Runs: {len(context.runs)}, run i with data and network seed i (new means every "
            "run). Tables give the mean over runs and its 95% interval [low, high] (the runs "
            'resampled; benchmarks/EXPERIMENTS.md, "How sure the numbers are").',
        ]
        return report.write(setup_text(context, [], own_setup=own_setup), notes)

    def _figure(self, scatter):
        plt = pyplot()
        fig, axes = plt.subplots(
            1, len(WEIGHTS), figsize=(4 * len(WEIGHTS), 3.6), layout="constrained"
        )
        for ax, name in zip(axes, WEIGHTS, strict=True):
            weight, params = scatter[name]
            ax.scatter(scatter["error"], weight, s=3, alpha=0.3)
            ax.set_xlabel("true error ||η − p||₂")
            ax.set_ylabel(f"{name} weight ({params})")
            ax.set_title(f"{name}: r = {pearson(weight, scatter['error']):.3f}")
        return fig

    def _claims(self, report, context, rows):
        r = {name: over_runs(context, rows, f"{name}_r_test") for name in WEIGHTS}
        report.claim(
            "All three weights correlate positively with the true calibration error (Lin et "
            "al. 2025).",
            "Mean test r of each weight.",
            [above(value, label=name, digits=3) for name, value in r.items()],
        )
        pairs = [("gBS", "DFL"), ("gBS", "FL"), ("DFL", "FL")]
        report.claim(
            "The generalised Brier score correlates best, then dual focal, then focal "
            "(0.664 > 0.638 > 0.550, Lin et al. 2025).",
            "Differences of the mean test r (gBS with β = 2: with β = 1 it is focal's weight).",
            [above(r[a] - r[b], label=f"{a} − {b}", digits=3) for a, b in pairs],
        )


def over_runs(context, rows, column):
    """The mean of a column over the runs, as an estimate that resamples the runs (every
    column of the experiment with the same draws, so differences are paired by run)."""
    bounds = (-1.0, 1.0) if "_r_" in column else (0.0, 1.0)
    return context.over_seeds(METHOD.label, [row[column] for row in rows], bounds=bounds)
