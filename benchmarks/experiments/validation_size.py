"""``validation_size``: Wang et al. (2021), Figure 3 (post-hoc calibration against
validation size).

The runs of ``regularizers`` (CE and each regulariser at its validation-chosen
coefficient): the stored validation logits are subsampled (uniformly, several seeded draws
per size) and temperature scaling (Wang et al.'s pool by ECE) and histogram binning (15
equal-size bins) are fitted on each draw; the test ECE is averaged over the draws of a run
(on every bootstrap resample of the test rows too), then over seeds.
"""

import numpy as np

from .._methods import regularizer_methods
from .._posthoc import (
    ece_temperature,
    histogram_binning,
    resampled_metric,
    scaled_probabilities,
)
from .._report import Report, finite_mean, pyplot
from .._train import GRIDS
from .._uncertainty import above, below, minimum
from ._base import Experiment, metric_rows, run_row, setup_text
from .regularizers import chosen_methods

SIZES = (100, 200, 500, 1000, 2000, 5000)
#: Seeded subsamples per run and size.
DRAWS = 3
#: "A low ECE with a small validation set": the ECE with the smallest size at most this
#: many times the ECE with the whole validation set.
LOW_RATIO = 1.5
GRID = "wang2021"
CALIBRATORS = (("ts_ece", "temperature scaling"), ("hb_ece", "histogram binning"))


def sizes_for(n_val):
    """The sizes of the sweep that fit the validation set, and the whole set."""
    return sorted({size for size in SIZES if size < n_val} | {n_val})


class ValidationSize(Experiment):
    name = "validation_size"
    title = "Post-hoc calibration against validation-set size (Wang et al. 2021, Figure 3)"
    reproduces = "Wang et al. (2021), Fig. 3: ECE after TS and HB against the validation-set size"
    premise = (
        "The comparison of CE's and the regularisers' ECE after TS and HB over validation sizes"
        " rests on CE being overconfident"
    )

    def methods(self, config):
        return regularizer_methods()

    def analyze(self, context):
        metric = metric_rows(context, GRID)
        labels = ["CE", *chosen_methods(metric).values()]
        rows, series = [], {}
        for run in context.runs:
            if run.method.label not in labels:
                continue
            ev = context.evaluation(run, GRID)
            if not ev.finite:
                continue
            for size in sizes_for(len(ev.val_y)):
                values, temperature = _fitted(ev, run.seed, size, context.n_resamples)
                series[run.method.label, size, run.seed] = values
                rows.append(
                    run_row(
                        run,
                        val_size=size,
                        draws=1 if size == len(ev.val_y) else DRAWS,
                        ts_ece=values["ts_ece"][0],
                        hb_ece=values["hb_ece"][0],
                        temperature=temperature,
                    )
                )
        report = Report(context.folder, self.title)
        report.csv(rows)
        sizes = sorted({row["val_size"] for row in rows})

        def estimate(label, size, name):
            seeds = sorted(seed for lab, n, seed in series if (lab, n) == (label, size))
            pairs = [series[label, size, seed][name] for seed in seeds]
            return context.over_seeds(
                label, [value for value, _ in pairs], np.array([r for _, r in pairs]), (0.0, 1.0)
            )

        for name, title in CALIBRATORS:
            report.table(
                ["method"] + [f"n={size}" for size in sizes],
                [
                    [label] + [estimate(label, size, name).text(100.0) for size in sizes]
                    for label in labels
                ],
                f"**Test ECE (%) with {title}** fitted on a validation subset of n samples "
                f"(mean over {DRAWS} draws per run, then over seeds).",
            )
        report.figure(
            self._figure(rows, labels, sizes),
            "validation_size.png",
            "Figure 3: test ECE after TS (left) and HB (right) against the validation "
            "size (mean ± std over seeds).",
        )
        self._claims(report, estimate, labels, sizes)
        notes = [
            "Coefficients are those of `regularizers` (chosen on the full validation set). "
            "Subsamples are uniform without replacement, seeded by (seed, size, draw).",
        ]
        return report.write(setup_text(context, [GRID]), notes)

    def _figure(self, rows, labels, sizes):
        plt = pyplot()
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
        for ax, (name, title) in zip(
            axes, (("ts_ece", "with TS"), ("hb_ece", "with HB")), strict=True
        ):
            for label in labels:
                means = [100 * finite_mean(_values(rows, label, s, name)) for s in sizes]
                stds = [100 * _std(_values(rows, label, s, name)) for s in sizes]
                ax.errorbar(sizes, means, yerr=stds, marker="o", capsize=3, label=label)
            ax.set_xscale("log")
            ax.set_xlabel("validation samples")
            ax.set_ylabel(f"ECE {title} (%)")
        axes[0].legend(fontsize=8)
        return fig

    def _claims(self, report, estimate, labels, sizes):
        small, full = sizes[0], sizes[-1]

        def ratio(label, name):
            return estimate(label, small, name) / estimate(label, full, name)

        report.claim(
            "Temperature scaling reaches a low ECE with a small validation set (Wang et al. 2021).",
            f"CE with TS: ECE with n={small} over ECE with n={full} (low: below {LOW_RATIO:g}).",
            [below(ratio("CE", "ts_ece"), LOW_RATIO, label="CE")],
        )
        report.claim(
            "Histogram binning needs more validation samples than temperature scaling (Wang "
            "et al. 2021).",
            f"ECE(n={small}) / ECE(n={full}) with HB minus the same with TS.",
            [
                above(ratio(label, "hb_ece") - ratio(label, "ts_ece"), label=label)
                for label in labels
            ],
        )
        checks = []
        for name, title in CALIBRATORS:
            for size in sizes:
                others = minimum(estimate(label, size, name) for label in labels[1:])
                difference = estimate("CE", size, name) - others
                checks.append(below(difference, label=f"{title}, n={size}", scale=100.0))
        report.claim(
            "CE stays the best calibrated across validation sizes, with TS and with HB (Wang "
            "et al. 2021).",
            "CE's ECE minus the lowest regulariser's, per calibrator and validation size (points).",
            checks,
        )


def _fitted(ev, seed, size, n_resamples):
    """Test ECE with TS and HB fitted on ``size`` validation samples (mean over the draws),
    each as ``(value, replicates)``, and the mean temperature."""
    n_val = len(ev.val_y)
    draws = 1 if size == n_val else DRAWS
    fitted = {"ts_ece": [], "hb_ece": []}
    temperatures = []
    for draw in range(draws):
        rng = np.random.default_rng([seed, size, draw])
        index = rng.choice(n_val, size, replace=False) if size < n_val else slice(None)
        z, y = ev.val_logits[index], ev.val_y[index]
        temperature = ece_temperature(z, y, GRIDS[GRID], device=ev.device)
        temperatures.append(temperature)
        for name, proba in (
            ("ts_ece", scaled_probabilities(ev.test_logits, temperature)),
            ("hb_ece", histogram_binning(z, y, ev.test_logits)),
        ):
            fitted[name].append(resampled_metric("ece", ev.test_y, proba, 15, n_resamples))
    values = {
        name: (
            float(np.mean([value for value, _ in pairs])),
            np.mean([replicates for _, replicates in pairs], axis=0),
        )
        for name, pairs in fitted.items()
    }
    return values, float(np.mean(temperatures))


def _values(rows, label, size, name):
    return [row[name] for row in rows if row["method"] == label and row["val_size"] == size]


def _std(values):
    values = [v for v in values if np.isfinite(v)]
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
