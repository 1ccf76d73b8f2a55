"""``bins``: the Meta-Regularization submission, Figure 5 (ECE and MCE against the number
of bins).

The models of ``meta`` (same runs) scored from their stored test logits with 10, 20, 50,
100, 200, 500 and 1000 equal-width bins; CE (TS) is CE with the NLL-optimal validation
temperature.
"""

from .._methods import CE_B, FLG_DECE, FLG_SECE
from .._report import Report, pyplot
from .._uncertainty import above, below, minimum
from ._base import Experiment, run_row, setup_text
from .meta import CE_TS, CITE, GRID, METHODS, measured

BINS = (10, 20, 50, 100, 200, 500, 1000)
GAMMA_NET = [FLG_DECE.label, FLG_SECE.label]


class Bins(Experiment):
    name = "bins"
    title = f"Calibration error against the number of bins ({CITE}, Figure 5)"
    reproduces = (
        "The Meta-Regularization submission, Fig. 5: ECE and MCE of the meta-table models "
        "for 10..1000 bins"
    )
    premise = (
        "How the ECE and MCE of CE and the meta-learned losses change with the number of bins "
        "depends on how concentrated CE's confidences are, higher when CE is overconfident"
    )

    def methods(self, config):
        return list(METHODS)

    def analyze(self, context):
        names = [CE_B.label, CE_TS] + [m.label for m in METHODS[1:]]

        def estimate(name, metric, n_bins):
            return measured(context, name, metric, n_bins)

        rows = []
        for run in context.runs:
            ev = context.evaluation(run, GRID)
            if not ev.finite:
                continue
            variants = [(run.method.label, "test")]
            if run.method.label == CE_B.label:
                variants.append((CE_TS, "tsnll"))
            for label, phase in variants:
                values = {"scored_as": label}
                for n_bins in BINS:
                    for metric in ("ece", "mce"):
                        value, _ = ev.resampled(f"{phase}_{metric}", n_bins, context.n_resamples)
                        values[f"{metric}_{n_bins}"] = value
                rows.append(run_row(run, **values))
        report = Report(context.folder, self.title)
        report.csv(rows)
        for metric in ("ece", "mce"):
            report.table(
                ["method"] + [f"{n} bins" for n in BINS],
                [[name] + [estimate(name, metric, n).text(100.0) for n in BINS] for name in names],
                f"**{metric.upper()} (%)** on the test set against the number of equal-width bins.",
            )
        report.figure(
            self._figure(estimate, names),
            "bins.png",
            "Figure 5: test ECE and MCE against the number of bins (mean over seeds).",
        )
        self._claims(report, estimate, names)
        return report.write(setup_text(context, [GRID]))

    @staticmethod
    def _figure(estimate, names):
        plt = pyplot()
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
        for ax, metric in zip(axes, ("ece", "mce"), strict=True):
            for name in names:
                means = [100 * estimate(name, metric, n).point for n in BINS]
                ax.plot(BINS, means, marker="o", label=name)
            ax.set_xscale("log")
            ax.set_xlabel("number of bins")
            ax.set_ylabel(f"{metric.upper()} (%)")
        axes[1].legend(fontsize=7, ncol=2)
        return fig

    @staticmethod
    def _claims(report, estimate, names):
        report.claim(
            f"Binned ECE depends on the number of bins (the bias {CITE} sets out to avoid).",
            f"ECE at {BINS[-1]} bins minus ECE at {BINS[0]} bins (points).",
            [
                above(
                    estimate(name, "ece", BINS[-1]) - estimate(name, "ece", BINS[0]),
                    label=name,
                    scale=100.0,
                )
                for name in names
            ],
        )
        others = [name for name in names if name not in GAMMA_NET]
        report.claim(
            "The γ-Net methods (FLγ-DECE, FLγ-SECE) keep the lowest ECE at every number of "
            f"bins ({CITE}, Figure 5).",
            "Lowest ECE of the γ-Net methods minus the lowest of the others, by bins (points).",
            [
                below(
                    minimum(estimate(name, "ece", n) for name in GAMMA_NET)
                    - minimum(estimate(name, "ece", n) for name in others),
                    label=f"{n} bins",
                    scale=100.0,
                )
                for n in BINS
            ],
        )
