"""``bins``: seed 003 Figure 5 (ECE and MCE against the number of bins).

The models of ``meta`` (same runs) scored from their stored test logits with 10, 20, 50,
100, 200, 500 and 1000 equal-width bins; CE (TS) is CE with the NLL-optimal validation
temperature.
"""

import numpy as np

from sklearn_calib.scoring import expected_calibration_error, maximum_calibration_error

from .._methods import CE_B, FLG_DECE, FLG_SECE
from .._posthoc import scaled_probabilities
from .._report import Report, finite_mean, mean_std, pyplot, verdict
from ._base import Experiment, run_row, setup_text
from .meta import CE_TS, METHODS

BINS = (10, 20, 50, 100, 200, 500, 1000)


class Bins(Experiment):
    name = "bins"
    title = "Calibration error against the number of bins (seed 003, Figure 5)"
    reproduces = "seed 003 Fig. 5: ECE and MCE of the meta-table models for 10..1000 bins"
    premise = (
        "How the ECE and MCE of CE and the meta-learned losses change with the number of bins "
        "depends on how concentrated CE's confidences are, higher when CE is overconfident"
    )

    def methods(self, config):
        return list(METHODS)

    def analyze(self, context):
        rows = []
        for run in context.runs:
            ev = context.evaluation(run, "mukhoti2020")
            if not ev.finite:
                continue
            variants = [(run.method.label, scaled_probabilities(ev.test_logits))]
            if run.method.label == CE_B.label:
                variants.append((CE_TS, scaled_probabilities(ev.test_logits, ev.nll_temperature)))
            labels = np.arange(ev.test_logits.shape[1])
            for label, proba in variants:
                values = {"scored_as": label}
                for n_bins in BINS:
                    values[f"ece_{n_bins}"] = expected_calibration_error(
                        ev.test_y, proba, n_bins=n_bins, labels=labels
                    )
                    values[f"mce_{n_bins}"] = maximum_calibration_error(
                        ev.test_y, proba, n_bins=n_bins, labels=labels
                    )
                rows.append(run_row(run, **values))
        report = Report(context.folder, self.title)
        report.csv(rows)
        names = list(dict.fromkeys(row["scored_as"] for row in rows))
        for metric in ("ece", "mce"):
            report.table(
                ["method"] + [f"{n} bins" for n in BINS],
                [
                    [name] + [mean_std(self._values(rows, name, metric, n), 100.0) for n in BINS]
                    for name in names
                ],
                f"**{metric.upper()} (%)** on the test set against the number of equal-width bins.",
            )
        report.figure(
            self._figure(rows, names),
            "bins.png",
            "Figure 5: test ECE and MCE against the number of bins (mean over seeds).",
        )
        self._claims(report, rows, names)
        return report.write(setup_text(context, ["mukhoti2020"]))

    @staticmethod
    def _values(rows, name, metric, n_bins):
        return [row[f"{metric}_{n_bins}"] for row in rows if row["scored_as"] == name]

    def _figure(self, rows, names):
        plt = pyplot()
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
        for ax, metric in zip(axes, ("ece", "mce"), strict=True):
            for name in names:
                means = [100 * finite_mean(self._values(rows, name, metric, n)) for n in BINS]
                ax.plot(BINS, means, marker="o", label=name)
            ax.set_xscale("log")
            ax.set_xlabel("number of bins")
            ax.set_ylabel(f"{metric.upper()} (%)")
        axes[1].legend(fontsize=7, ncol=2)
        return fig

    def _claims(self, report, rows, names):
        grows = [
            name
            for name in names
            if finite_mean(self._values(rows, name, "ece", BINS[-1]))
            > 1.1 * finite_mean(self._values(rows, name, "ece", BINS[0]))
        ]
        report.claim(
            "Binned ECE depends on the number of bins (the bias seed 003 sets out to avoid).",
            f"ECE at {BINS[-1]} bins exceeds ECE at {BINS[0]} bins by more than 10 % for "
            f"{len(grows)}/{len(names)} methods.",
            verdict(len(grows) / len(names)),
        )
        gamma_net = [FLG_DECE.label, FLG_SECE.label]
        lowest = 0
        for n_bins in BINS:
            best = min(names, key=lambda name: finite_mean(self._values(rows, name, "ece", n_bins)))
            lowest += best in gamma_net
        report.claim(
            "The γ-Net methods (FLγ-DECE, FLγ-SECE) keep the lowest ECE at every number of "
            "bins (seed 003, Figure 5).",
            f"A γ-Net method has the lowest ECE at {lowest}/{len(BINS)} bin counts.",
            verdict(lowest / len(BINS)),
        )
