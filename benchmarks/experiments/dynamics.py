"""``dynamics``: Wang et al. (2021), Figures 4-5, and Mukhoti et al. (2020), Figure 2
(calibration during training).

Uses the tracked runs of the ``wang2021`` family (the runs of ``regularizers``): after
every epoch each run evaluated the test set and a fixed subset of its training samples.

- Wang et al., Figure 4 (and Appendix Figure A): the "optimal ECE" per epoch, the test ECE
  at the temperature of their pool that minimises it on the test set itself (a lower
  bound of the ECE after temperature scaling), for every coefficient of every grid.
- Wang et al., Figure 5: histograms of the final maximum logit of the followed training
  samples, split by the epoch since which each sample stays correctly classified
  ("learned epoch"), for CE and each regulariser at its validation-chosen coefficient.
- Mukhoti et al., Figure 2: test NLL, NLL and entropy of correctly and wrongly classified
  test samples and the norm of the last linear layer per epoch, CE against focal loss
  γ = 1, 2, 3 (here Wang et al.'s detached-weight focal loss).

The tracker keeps per-epoch numbers, not per-row values: the intervals of per-epoch
numbers and of the followed training samples' statistics vary the seeds only; the final
epoch's test ECE and NLL are recomputed from the stored final logits with the test rows
resampled too.
"""

import math

import numpy as np
from scipy import stats

from .._methods import focal_gra, regularizer_methods
from .._posthoc import learned_epochs, resampled_metric, scaled_probabilities
from .._report import Report, pyplot
from .._tracking import EPOCH_METRICS
from .._uncertainty import above, below, increasing
from ._base import Experiment, choose_coefficients, metric_rows, run_row, setup_text
from .regularizers import groups_of

GRID = "wang2021"
#: The range of a non-negative number (a temperature, a norm, an NLL, an entropy, a std).
POSITIVE = (0.0, math.inf)
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
    title = (
        "Calibration during training (Wang et al. 2021, Figures 4-5; Mukhoti et al. 2020, Figure 2)"
    )
    reproduces = (
        "Wang et al. (2021), Figs 4-5, Mukhoti et al. (2020), Fig. 2: optimal ECE, max logits, "
        "NLL per epoch"
    )
    premise = (
        "The per-epoch claims (the optimal ECE and the test NLL growing late in training, the "
        "focal loss holding them down) describe a CE that overfits the NLL"
    )

    def methods(self, config):
        return regularizer_methods() + [focal_gra(2)]

    @staticmethod
    def _curves(context):
        """The per-epoch histories of each method's runs, in seed order."""
        labels = dict.fromkeys(run.method.label for run in context.runs)
        return {
            label: [context.record(run).history for run in context.runs_of(label)]
            for label in labels
        }

    @staticmethod
    def _final_ece(context, label):
        """The last epoch's optimal ECE from the stored logits, at the tracker's last
        test-optimal temperature, with the test rows resampled."""
        values, replicates = [], []
        for run in context.runs_of(label):
            ev = context.evaluation(run, GRID)
            temperature = context.record(run).history["opt_temperature"][-1]
            proba = scaled_probabilities(ev.test_logits, temperature)
            value, resampled = resampled_metric("ece", ev.test_y, proba, 15, context.n_resamples)
            values.append(value)
            replicates.append(resampled)
        return context.over_seeds(label, values, np.array(replicates), (0.0, 1.0))

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
        metric = metric_rows(context, GRID)
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
                    self._final_ece(context, label).text(100.0),
                    context.over_seeds(
                        label, _final(curves[label], "opt_temperature"), bounds=POSITIVE
                    ).text(),
                ]
                for label in ["CE", *[lab for labs in groups.values() for lab in labs]]
            ],
            "**Optimal ECE.** Lowest over epochs (mean curve) and at the last epoch (test rows "
            "resampled at the final test-optimal T, which is held).",
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
            [
                [
                    label,
                    context.over_seeds(label, s, bounds=POSITIVE).text(),
                    context.over_seeds(label, r, bounds=(-1.0, 1.0)).text(digits=3),
                ]
                for label, (s, r) in spread.items()
            ],
            "**Max-logit spread and hardness information** (all seeds; learned epoch of wrongly "
            "classified samples = last epoch + 1).",
        )
        report.figure(
            self._fig2(curves),
            "nll_entropy.png",
            "Mukhoti et al. (2020), Figure 2: test NLL, NLL and entropy of correct and wrong "
            "test samples and last-layer weight norm per epoch (means over seeds).",
        )
        report.table(
            ["method"] + [title for _, title in FIG2_METRICS],
            [
                [label]
                + [
                    context.over_seeds(label, _final(curves[label], name), bounds=POSITIVE).text(
                        digits=3
                    )
                    for name, _ in FIG2_METRICS
                ]
                for label in FIG2
            ],
            "**Mukhoti et al. (2020), Figure 2, at the last epoch.**",
        )
        self._claims(report, context, curves, groups, spread)
        notes = [
            "The optimal ECE fits T on the test set at every epoch, as Wang et al. do; it is a "
            "diagnostic lower bound, not a result of validation-based calibration.",
            "Followed training samples: the first "
            f"{len(tracked['CE']['track_y'])} training samples, evaluated in evaluation mode "
            "after every epoch (Wang et al. use the whole training set).",
            "Mukhoti et al.'s Figure 2 trains focal loss with a differentiated weight; here the "
            "focal runs are Wang et al.'s detached-weight variant (`focal_gra`), shared with "
            "`regularizers`.",
            'A rise "late in training" is measured per run from the epoch where the other '
            "seeds' mean curve is lowest to the last epoch (leave one seed out: the epoch is "
            "not chosen on the run's own noise, which would make any noisy curve rise).",
        ]
        return report.write(setup_text(context, [GRID]), notes)

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

    def _claims(self, report, context, curves, groups, spread):
        ls = groups["LS"]
        report.claim(
            "With label smoothing the optimal ECE rises after some epochs (Wang et al. 2021, "
            "Fig. 4).",
            "Rise of the optimal ECE to the last epoch (points).",
            [
                above(
                    context.over_seeds(label, late_rise(curves[label], "opt_ece")),
                    label=label,
                    scale=100.0,
                )
                for label in ls
            ],
        )
        strengths = [float(label.split("=")[1]) for label in ls]
        final = [self._final_ece(context, label) for label in ls]
        check, _ = increasing(final, strengths, label="slope (ECE per unit of ε)")
        report.claim(
            "Larger smoothing strengths give a worse optimal ECE (Wang et al. 2021, Fig. 4).",
            "Final optimal ECE (%) for ε = "
            + ", ".join(f"{s:g}: {f.text(100.0)}" for s, f in zip(strengths, final, strict=True))
            + " (the check also needs no step between neighbours significantly down).",
            [check],
        )
        regs = [label for label in spread if label != "CE"]

        def spread_of(label, index):
            return context.over_seeds(label, spread[label][index])

        report.claim(
            "Regularisers compress the maximum logits; CE's cover a much larger range "
            "(Wang et al. 2021, Fig. 5).",
            f"Std of the max logit: CE {spread_of('CE', 0).text()}; each regulariser's minus CE's.",
            [below(spread_of(label, 0) - spread_of("CE", 0), label=label) for label in regs],
        )
        report.claim(
            "CE keeps the hardness of samples (learned epoch) visible in its logits; the "
            "regularisers lose it (Wang et al. 2021, Fig. 5).",
            f"Absolute Spearman ρ between learned epoch and max logit: CE "
            f"{abs(spread_of('CE', 1)).text(digits=3)}; each regulariser's minus CE's.",
            [
                below(abs(spread_of(label, 1)) - abs(spread_of("CE", 1)), label=label, digits=3)
                for label in regs
            ],
        )
        rise = context.over_seeds("CE", late_rise(curves["CE"], "test_nll"))
        focal = FIG2[1:]
        checks = [above(rise, label="rise of CE's NLL", digits=3)]
        ce_nll = context.estimate("CE", "test_nll", GRID)
        checks += [
            below(
                context.estimate(label, "test_nll", GRID) - ce_nll, label=f"{label} − CE", digits=3
            )
            for label in focal
        ]
        report.claim(
            "The test NLL of CE rises late in training (NLL overfitting) while focal loss keeps "
            "it lower (Mukhoti et al. 2020, Fig. 2a).",
            "Rise of CE's test NLL to the last epoch; final NLL of focal minus CE's.",
            checks,
        )
        for name, direction, text in [
            (
                "nll_correct",
                1,
                "The NLL of correctly classified test samples is higher with "
                "focal loss than with CE (Mukhoti et al. 2020, Fig. 2b).",
            ),
            (
                "nll_wrong",
                -1,
                "The NLL of misclassified test samples is lower with focal loss "
                "(Mukhoti et al. 2020, Fig. 2c).",
            ),
            (
                "entropy_wrong",
                1,
                "The entropy of misclassified test samples is higher with "
                "focal loss (Mukhoti et al. 2020, Fig. 2d).",
            ),
            (
                "head_norm",
                -1,
                "The last-layer weight norm ends lower with focal loss than with "
                "CE (Mukhoti et al. 2020, Fig. 2e).",
            ),
        ]:
            ce = context.over_seeds("CE", _final(curves["CE"], name))
            check = above if direction > 0 else below
            report.claim(
                text,
                f"Last epoch: CE {ce.text(digits=3)}; focal minus CE.",
                [
                    check(
                        context.over_seeds(label, _final(curves[label], name)) - ce,
                        label=f"{label} − CE",
                        digits=3,
                    )
                    for label in focal
                ],
            )


def late_rise(histories, name):
    """Per run, how much ``name`` rises from the epoch where the other runs' mean curve is
    lowest to the last epoch (leave one seed out, so the epoch is not chosen on the run's
    own noise; a single run is measured from its own lowest epoch)."""
    curves = np.array([h[name] for h in histories], dtype=np.float64)
    rises = []
    for index, curve in enumerate(curves):
        others = np.delete(curves, index, axis=0) if len(curves) > 1 else curves
        epoch = int(np.nanargmin(np.nanmean(others, axis=0)))
        rises.append(float(curve[-1] - curve[epoch]))
    return rises


def _final(histories, name):
    return [h[name][-1] for h in histories]


def _tracked(history):
    return [name for name in EPOCH_METRICS if name in history]
