"""``dynamics``: seed 001 Figures 4-5 and seed 002 Figure 2 (calibration during training).

Uses the tracked runs of the ``seed001`` family (the runs of ``regularizers``): after
every epoch each run evaluated the test set and a fixed subset of its training samples.

- Seed 001, Figure 4 (and Appendix Figure A): the "optimal ECE" per epoch, the test ECE at
  the temperature of seed 001's pool that minimises it on the test set itself (a lower
  bound of the ECE after temperature scaling), for every coefficient of every grid.
- Seed 001, Figure 5: histograms of the final maximum logit of the followed training
  samples, split by the epoch since which each sample stays correctly classified
  ("learned epoch"), for CE and each regulariser at its validation-chosen coefficient.
- Seed 002, Figure 2: test NLL, NLL and entropy of correctly and wrongly classified test
  samples and the norm of the last linear layer per epoch, CE against focal loss
  γ = 1, 2, 3 (here seed 001's detached-weight focal loss).
"""

import math

import numpy as np
from scipy import stats

from .._methods import focal_gra, regularizer_methods
from .._posthoc import learned_epochs
from .._report import Report, at_least, finite_mean, mean_std, pyplot, verdict
from .._tracking import EPOCH_METRICS
from ._base import Experiment, choose_coefficients, metric_rows, run_row, setup_text
from .regularizers import groups_of

FIG2 = ["CE", "Focal γ=1", "Focal γ=2", "Focal γ=3"]
FIG2_METRICS = [
    ("test_nll", "test NLL"),
    ("nll_correct", "NLL, correct"),
    ("nll_wrong", "NLL, wrong"),
    ("entropy_correct", "entropy, correct"),
    ("entropy_wrong", "entropy, wrong"),
    ("head_norm", "last-layer weight norm"),
]


def learned_groups(n_epochs):
    """Learned-epoch groups: (label, first, last) covering 1..n_epochs, then "not learned"."""
    cuts = sorted({1, max(1, math.ceil(n_epochs / 4)), max(1, math.ceil(n_epochs / 2)), n_epochs})
    groups, first = [], 1
    for last in cuts:
        if last >= first:
            groups.append((f"{first}" if first == last else f"{first}-{last}", first, last))
            first = last + 1
    groups.append(("not learned", n_epochs + 1, n_epochs + 1))
    return groups


class Dynamics(Experiment):
    name = "dynamics"
    title = "Calibration during training (seed 001 Figures 4-5, seed 002 Figure 2)"
    reproduces = "seed 001 Figs 4-5, seed 002 Fig. 2: optimal ECE, max logits, NLL per epoch"
    premise = (
        "The per-epoch claims (the optimal ECE and the test NLL growing late in training, the "
        "focal loss holding them down) describe a CE that overfits the NLL"
    )

    def methods(self, config):
        return regularizer_methods() + [focal_gra(2)]

    def _curves(self, context):
        curves = {}
        for run in context.runs:
            history = context.record(run).history
            curves.setdefault(run.method.label, []).append(history)
        return curves

    def analyze(self, context):
        curves = self._curves(context)
        rows = []
        for run in context.runs:
            history = context.record(run).history
            for epoch in range(len(history["opt_ece"])):
                values = {
                    "epoch": epoch + 1,
                    "lr": history["lr"][epoch],
                    "train_loss": history["train_loss"][epoch],
                }
                values.update({name: history[name][epoch] for name in _tracked(history)})
                rows.append(run_row(run, **values))
        report = Report(context.folder, self.title)
        report.csv(rows)
        metric = metric_rows(context, "wang2021")
        chosen = choose_coefficients(metric, groups_of(metric))
        groups = groups_of(metric)
        report.figure(
            self._optimal_ece_figure(curves, groups),
            "optimal_ece.png",
            "Figure 4 / Appendix A: optimal test ECE per epoch (T fitted on the test "
            "set each epoch); lines are means over seeds, bands the min-max range.",
        )
        report.table(
            ["method", "lowest optimal ECE (%) [epoch]", "final optimal ECE (%)", "final T (test)"],
            [
                [
                    label,
                    self._lowest(curves[label]),
                    mean_std(_final(curves[label], "opt_ece"), 100),
                    mean_std(_final(curves[label], "opt_temperature"), 1.0),
                ]
                for label in ["CE", *[lab for labs in groups.values() for lab in labs]]
            ],
            "**Optimal ECE.** Lowest over epochs (mean curve) and at the last epoch.",
        )
        histogram_methods = ["CE", *chosen.values()]
        first = context.config.seeds[0]
        tracked = {
            run.method.label: context.record(run).arrays
            for run in context.runs
            if run.seed == first and run.method.label in histogram_methods
        }
        report.figure(
            self._histogram_figure(tracked, histogram_methods),
            "max_logits.png",
            f"Figure 5: final maximum logit of {len(tracked['CE']['track_y'])} followed "
            f"training samples by learned epoch (seed {first}); regularisers at their "
            "validation-chosen coefficient.",
        )
        spread = self._spread_table(context, histogram_methods)
        report.table(
            ["method", "std of max logit", "Spearman ρ (learned epoch, max logit)"],
            [[label, mean_std(s, 1.0), mean_std(r, 1.0, 3)] for label, (s, r) in spread.items()],
            "**Max-logit spread and hardness information** (all seeds; learned epoch of wrongly "
            "classified samples = last epoch + 1).",
        )
        report.figure(
            self._fig2(curves),
            "nll_entropy.png",
            "Seed 002 Figure 2: test NLL, NLL and entropy of correct and wrong test "
            "samples and last-layer weight norm per epoch (means over seeds).",
        )
        report.table(
            ["method"] + [title for _, title in FIG2_METRICS],
            [
                [label]
                + [mean_std(_final(curves[label], name), 1.0, 3) for name, _ in FIG2_METRICS]
                for label in FIG2
            ],
            "**Seed 002 Figure 2 at the last epoch.**",
        )
        self._claims(report, curves, groups, spread, chosen)
        notes = [
            "The optimal ECE fits T on the test set at every epoch, as seed 001 does; it is a "
            "diagnostic lower bound, not a result of validation-based calibration.",
            "Followed training samples: the first "
            f"{len(tracked['CE']['track_y'])} training samples, evaluated in evaluation mode "
            "after every epoch (seed 001 uses the whole training set).",
            "Seed 002's Figure 2 trains focal loss with a differentiated weight; here the "
            "focal runs are seed 001's detached-weight variant (`focal_gra`), shared with "
            "`regularizers`.",
        ]
        return report.write(setup_text(context, ["wang2021"]), notes)

    @staticmethod
    def _lowest(histories):
        mean = np.nanmean([h["opt_ece"] for h in histories], axis=0)
        epoch = int(np.nanargmin(mean))
        return f"{100 * mean[epoch]:.2f} [{epoch + 1}]"

    def _optimal_ece_figure(self, curves, groups):
        plt = pyplot()
        fig, axes = plt.subplots(
            1, len(groups), figsize=(4.2 * len(groups), 3.6), layout="constrained", squeeze=False
        )
        for ax, (group, labels) in zip(axes[0], groups.items(), strict=True):
            for label in ["CE", *labels]:
                values = 100 * np.array([h["opt_ece"] for h in curves[label]])
                epochs = np.arange(1, values.shape[1] + 1)
                line = ax.plot(
                    epochs,
                    values.mean(axis=0),
                    label=label,
                    color="black" if label == "CE" else None,
                )[0]
                ax.fill_between(
                    epochs,
                    values.min(axis=0),
                    values.max(axis=0),
                    alpha=0.15,
                    color=line.get_color(),
                )
            ax.set_title(group)
            ax.set_xlabel("epoch")
            ax.set_ylabel("optimal ECE (%)")
            ax.legend(fontsize=7)
        return fig

    def _histogram_figure(self, tracked, labels):
        plt = pyplot()
        fig, axes = plt.subplots(
            1, len(labels), figsize=(3.6 * len(labels), 3.4), layout="constrained", squeeze=False
        )
        for ax, label in zip(axes[0], labels, strict=True):
            arrays = tracked[label]
            learned = learned_epochs(arrays["track_correct"])
            groups = learned_groups(arrays["track_correct"].shape[0])
            max_logit = arrays["track_max_logit"]
            finite = np.isfinite(max_logit)
            data = [max_logit[finite & (learned >= lo) & (learned <= hi)] for _, lo, hi in groups]
            ax.hist(data, bins=30, stacked=True, label=[name for name, _, _ in groups])
            ax.set_title(label)
            ax.set_xlabel("max logit")
        axes[0, 0].set_ylabel("training samples")
        axes[0, -1].legend(title="learned epoch", fontsize=7)
        return fig

    def _spread_table(self, context, labels):
        spread = {label: ([], []) for label in labels}
        for run in context.runs:
            if run.method.label not in spread:
                continue
            arrays = context.record(run).arrays
            max_logit = arrays["track_max_logit"].astype(np.float64)
            learned = learned_epochs(arrays["track_correct"])
            if not np.isfinite(max_logit).all():
                continue
            spread[run.method.label][0].append(float(max_logit.std()))
            rho = stats.spearmanr(learned, max_logit).statistic if np.ptp(learned) else math.nan
            spread[run.method.label][1].append(float(rho))
        return spread

    def _fig2(self, curves):
        plt = pyplot()
        fig, axes = plt.subplots(
            1, len(FIG2_METRICS), figsize=(3.4 * len(FIG2_METRICS), 3.2), layout="constrained"
        )
        for ax, (name, title) in zip(axes, FIG2_METRICS, strict=True):
            for label in FIG2:
                values = np.array([h[name] for h in curves[label]], dtype=float)
                ax.plot(
                    np.arange(1, values.shape[1] + 1),
                    np.nanmean(values, axis=0),
                    label=label,
                    color="black" if label == "CE" else None,
                )
            ax.set_title(title)
            ax.set_xlabel("epoch")
        axes[0].legend(fontsize=7)
        return fig

    def _claims(self, report, curves, groups, spread, chosen):
        ls = groups["LS"]
        rises = 0
        for label in ls:
            mean = np.nanmean([h["opt_ece"] for h in curves[label]], axis=0)
            rises += mean[-1] > np.nanmin(mean) + 1e-3
        report.claim(
            "With label smoothing the optimal ECE rises after some epochs (seed 001, Fig. 4).",
            f"Final optimal ECE above the lowest of its mean curve by more than 0.1 point for "
            f"{rises}/{len(ls)} smoothing strengths.",
            verdict(rises / len(ls)),
        )
        strengths = [float(label.split("=")[1]) for label in ls]
        final = [finite_mean(_final(curves[label], "opt_ece")) for label in ls]
        rho = stats.spearmanr(strengths, final).statistic
        report.claim(
            "Larger smoothing strengths give a worse optimal ECE (seed 001, Fig. 4).",
            "Final optimal ECE (%) for ε = "
            + ", ".join(f"{s:g}: {100 * f:.2f}" for s, f in zip(strengths, final, strict=True))
            + f"; Spearman ρ(ε, ECE) = {rho:.2f} (agrees: ρ ≥ 0.8; partly: ρ > 0).",
            "agrees" if at_least(rho, 0.8, 2) else ("partly" if round(rho, 2) > 0 else "disagrees"),
        )
        ce_std, ce_rho = finite_mean(spread["CE"][0]), finite_mean(spread["CE"][1])
        regs = [label for label in spread if label != "CE"]
        narrower = sum(finite_mean(spread[label][0]) < ce_std for label in regs)
        report.claim(
            "Regularisers compress the maximum logits; CE's cover a much larger range "
            "(seed 001, Fig. 5).",
            f"Std of the max logit: CE {ce_std:.2f}; "
            + ", ".join(f"{label} {finite_mean(spread[label][0]):.2f}" for label in regs)
            + f": {narrower}/{len(regs)} narrower than CE.",
            verdict(narrower / len(regs)),
        )
        weaker = sum(abs(finite_mean(spread[label][1])) < abs(ce_rho) for label in regs)
        report.claim(
            "CE keeps the hardness of samples (learned epoch) visible in its logits; the "
            "regularisers lose it (seed 001, Fig. 5).",
            f"|Spearman ρ| between learned epoch and max logit: CE {abs(ce_rho):.3f}; "
            + ", ".join(f"{label} {abs(finite_mean(spread[label][1])):.3f}" for label in regs)
            + f": {weaker}/{len(regs)} weaker than CE.",
            verdict(weaker / len(regs)),
        )
        ce_nll = np.nanmean([h["test_nll"] for h in curves["CE"]], axis=0)
        focal = FIG2[1:]
        focal_final = [finite_mean(_final(curves[label], "test_nll")) for label in focal]
        rise = ce_nll[-1] > 1.05 * np.nanmin(ce_nll)
        lower = sum(f < ce_nll[-1] for f in focal_final)
        report.claim(
            "The test NLL of CE rises late in training (NLL overfitting) while focal loss keeps "
            "it lower (seed 002, Fig. 2a).",
            f"CE test NLL: lowest {np.nanmin(ce_nll):.3f}, final {ce_nll[-1]:.3f}; focal final "
            + ", ".join(f"{v:.3f}" for v in focal_final)
            + f": CE rises (final > 1.05 x lowest) {'yes' if rise else 'no'}, focal lower than "
            f"CE {lower}/3.",
            verdict((rise + lower / 3) / 2),
        )
        for name, direction, text in [
            (
                "nll_correct",
                1,
                "The NLL of correctly classified test samples is higher with "
                "focal loss than with CE (seed 002, Fig. 2b).",
            ),
            (
                "nll_wrong",
                -1,
                "The NLL of misclassified test samples is lower with focal loss "
                "(seed 002, Fig. 2c).",
            ),
            (
                "entropy_wrong",
                1,
                "The entropy of misclassified test samples is higher with "
                "focal loss (seed 002, Fig. 2d).",
            ),
            (
                "head_norm",
                -1,
                "The last-layer weight norm ends lower with focal loss than with "
                "CE (seed 002, Fig. 2e).",
            ),
        ]:
            ce_value = finite_mean(_final(curves["CE"], name))
            values = [finite_mean(_final(curves[label], name)) for label in focal]
            hits = sum((v - ce_value) * direction > 0 for v in values)
            report.claim(
                text,
                f"Last epoch: CE {ce_value:.3f}; focal γ=1,2,3: "
                + ", ".join(f"{v:.3f}" for v in values)
                + f": {hits}/3 as claimed.",
                verdict(hits / 3),
            )


def _final(histories, name):
    return [h[name][-1] for h in histories]


def _tracked(history):
    return [name for name in EPOCH_METRICS if name in history]
