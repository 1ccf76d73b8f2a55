"""``validation_size``: seed 001 Figure 3 (post-hoc calibration against validation size).

The runs of ``regularizers`` (CE and each regulariser at its validation-chosen
coefficient): the stored validation logits are subsampled (uniformly, several seeded draws
per size) and temperature scaling (seed 001's
pool by ECE) and histogram binning (15 equal-size bins) are fitted on each draw; the test
ECE is averaged over the draws of a run, then reported as mean ± std over seeds.
"""

import numpy as np

from .._methods import regularizer_methods
from .._posthoc import ece_temperature, evaluate, histogram_binning, scaled_probabilities
from .._report import Report, at_most, finite_mean, mean_std, pyplot, verdict
from .._train import GRIDS
from ._base import Experiment, metric_rows, run_row, setup_text
from .regularizers import chosen_methods

SIZES = (100, 200, 500, 1000, 2000, 5000)
#: Seeded subsamples per run and size.
DRAWS = 3


def sizes_for(n_val):
    """The sizes of the sweep that fit the validation set, and the whole set."""
    return sorted({size for size in SIZES if size < n_val} | {n_val})


class ValidationSize(Experiment):
    name = "validation_size"
    title = "Post-hoc calibration against validation-set size (seed 001, Figure 3)"
    reproduces = "seed 001 Fig. 3: ECE after TS and HB against the validation-set size"
    premise = (
        "The comparison of CE's and the regularisers' ECE after TS and HB over validation sizes"
        " rests on CE being overconfident"
    )

    def methods(self, config):
        return regularizer_methods()

    def analyze(self, context):
        metric = metric_rows(context, "wang2021")
        labels = ["CE", *chosen_methods(metric).values()]
        rows = []
        for run in context.runs:
            if run.method.label not in labels:
                continue
            ev = context.evaluation(run, "wang2021")
            if not ev.finite:
                continue
            n_val = len(ev.val_y)
            for size in sizes_for(n_val):
                draws = 1 if size == n_val else DRAWS
                ts, hb, temps = [], [], []
                for draw in range(draws):
                    rng = np.random.default_rng([run.seed, size, draw])
                    index = rng.choice(n_val, size, replace=False) if size < n_val else slice(None)
                    z, y = ev.val_logits[index], ev.val_y[index]
                    t = ece_temperature(z, y, GRIDS["wang2021"], device=ev.device)
                    temps.append(t)
                    proba = scaled_probabilities(ev.test_logits, t)
                    ts.append(evaluate(ev.test_y, proba, ("ece",))["ece"])
                    proba = histogram_binning(z, y, ev.test_logits)
                    hb.append(evaluate(ev.test_y, proba, ("ece",))["ece"])
                rows.append(
                    run_row(
                        run,
                        val_size=size,
                        draws=draws,
                        ts_ece=float(np.mean(ts)),
                        hb_ece=float(np.mean(hb)),
                        temperature=float(np.mean(temps)),
                    )
                )
        report = Report(context.folder, self.title)
        report.csv(rows)
        sizes = sorted({row["val_size"] for row in rows})
        for name, title in (("ts_ece", "temperature scaling"), ("hb_ece", "histogram binning")):
            report.table(
                ["method"] + [f"n={size}" for size in sizes],
                [
                    [label] + [mean_std(_values(rows, label, size, name), 100.0) for size in sizes]
                    for label in labels
                ],
                f"**Test ECE (%) with {title}** fitted on a validation subset of n samples "
                f"(mean over {DRAWS} draws per run, then mean ± std over seeds).",
            )
        report.figure(
            self._figure(rows, labels, sizes),
            "validation_size.png",
            "Figure 3: test ECE after TS (left) and HB (right) against the validation "
            "size (mean ± std over seeds).",
        )
        self._claims(report, rows, labels, sizes)
        notes = [
            "Coefficients are those of `regularizers` (chosen on the full validation set). "
            "Subsamples are uniform without replacement, seeded by (seed, size, draw).",
        ]
        return report.write(setup_text(context, ["wang2021"]), notes)

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

    def _claims(self, report, rows, labels, sizes):
        small, full = sizes[0], sizes[-1]

        def mean(label, size, name):
            return finite_mean(_values(rows, label, size, name))

        ratio_ts = mean("CE", small, "ts_ece") / mean("CE", full, "ts_ece")
        report.claim(
            "Temperature scaling reaches a low ECE with a small validation set (seed 001).",
            f"CE with TS: ECE {100 * mean('CE', small, 'ts_ece'):.2f} % with n={small} vs "
            f"{100 * mean('CE', full, 'ts_ece'):.2f} % with n={full} (ratio {ratio_ts:.2f}; "
            "low means a ratio ≤ 1.5).",
            "agrees" if at_most(ratio_ts, 1.5, 2) else "disagrees",
        )
        needs_more = 0
        parts = []
        for label in labels:
            r_ts = mean(label, small, "ts_ece") / mean(label, full, "ts_ece")
            r_hb = mean(label, small, "hb_ece") / mean(label, full, "hb_ece")
            needs_more += r_hb > r_ts
            parts.append(f"{label} {r_ts:.2f}/{r_hb:.2f}")
        report.claim(
            "Histogram binning needs more validation samples than temperature scaling (seed 001).",
            f"ECE(n={small}) / ECE(n={full}), TS/HB: "
            + ", ".join(parts)
            + f": HB degrades more for {needs_more}/{len(labels)}.",
            verdict(needs_more / len(labels)),
        )
        best, total = 0, 0
        for name in ("ts_ece", "hb_ece"):
            for size in sizes:
                lowest = min(labels, key=lambda label: mean(label, size, name))
                best += lowest == "CE"
                total += 1
        report.claim(
            "CE stays the best calibrated across validation sizes, with TS and with HB (seed 001).",
            f"CE has the lowest ECE in {best}/{total} (size, calibrator) cases.",
            "agrees" if best >= 0.8 * total else verdict(best / total),
        )


def _values(rows, label, size, name):
    return [row[name] for row in rows if row["method"] == label and row["val_size"] == size]


def _std(values):
    values = [v for v in values if np.isfinite(v)]
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
