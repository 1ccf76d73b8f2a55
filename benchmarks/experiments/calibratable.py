"""``calibratable``: seed 001 Table 2 and Figure 6.

The regularised losses of ``regularizers`` (same runs, same validation-chosen
coefficients) after temperature scaling (T from seed 001's pool 0.01..10 by validation
ECE) and after histogram binning (15 equal-size bins on the top-1 confidence, fitted on
the validation set), each compared with CE by a two-sample t-test over seeds; and the
curve from focal loss gamma = 3 through CE to inverse focal loss gamma = 3.
"""

import math

from .._methods import focal_gra, inverse_focal, regularizer_methods
from .._report import Report, finite_mean, pyplot, reliability_figure, verdict
from ._base import (
    Experiment,
    cell,
    column,
    mark,
    mean_of,
    metric_rows,
    pct,
    reliability_panels,
    setup_text,
    significantly,
    std_of,
    ttest,
)
from .regularizers import chosen_methods

CURVE = [
    focal_gra(3),
    focal_gra(2),
    focal_gra(1),
    None,
    inverse_focal(1),
    inverse_focal(2),
    inverse_focal(3),
]
CURVE_LABELS = [m.label if m is not None else "CE" for m in CURVE]


class Calibratable(Experiment):
    name = "calibratable"
    title = "Calibrated is not calibratable (seed 001, Table 2 and Figure 6)"
    reproduces = "seed 001 Table 2, Fig. 6: after TS and HB, t-test vs CE; inverse focal"
    premise = (
        "The claims that the regularised losses are less calibratable than CE (a higher ECE "
        "after TS and HB, a temperature below CE's) rest on CE overfitting the NLL"
    )

    def methods(self, config):
        methods = regularizer_methods()
        labels = {m.label for m in methods}
        return methods + [m for m in CURVE if m is not None and m.label not in labels]

    def analyze(self, context):
        rows = metric_rows(context, "wang2021", hb=True)
        report = Report(context.folder, self.title)
        report.csv(rows)
        chosen = chosen_methods(rows)
        compared = ["CE", *chosen.values()]
        ce = {name: column(rows, "CE", name) for name in ("ts_ece", "hb_ece")}
        table = []
        for label in compared:
            is_ce = label == "CE"
            table.append(
                [
                    label,
                    cell(rows, label, "test_ece"),
                    cell(rows, label, "ts_ece")
                    + ("" if is_ce else " " + mark(column(rows, label, "ts_ece"), ce["ts_ece"])),
                    cell(rows, label, "temperature", 1.0),
                    cell(rows, label, "hb_ece")
                    + ("" if is_ce else " " + mark(column(rows, label, "hb_ece"), ce["hb_ece"])),
                ]
            )
        report.table(
            ["method", "ECE (%)", "ECE with TS (%)", "T", "ECE with HB (%)"],
            table,
            "**Table 2.** Test ECE (M = 15) before post-hoc calibration, with temperature "
            "scaling (T chosen on validation ECE) and with histogram binning. Marks against "
            "CE (two-sample t-test over seeds, `scipy.stats.ttest_ind`): ▲/▼ higher/lower at "
            "the 0.05 level, △/▽ higher/lower but not significant.",
        )
        curve_rows = [
            [
                label,
                cell(rows, label, "test_accuracy"),
                cell(rows, label, "test_ece"),
                cell(rows, label, "temperature", 1.0),
                cell(rows, label, "ts_ece"),
                cell(rows, label, "hb_ece"),
            ]
            for label in CURVE_LABELS
        ]
        report.table(
            ["method", "accuracy (%)", "ECE (%)", "T", "ECE with TS (%)", "ECE with HB (%)"],
            curve_rows,
            "**Figure 6 data.** From focal loss γ = 3 through CE to inverse focal loss γ = 3.",
        )
        report.figure(
            self._curve_figure(rows),
            "inverse_focal.png",
            "Figure 6(b-f): accuracy, ECE, validation temperature, ECE with TS and "
            "with HB along focal γ=3 → CE → inverse focal γ=3 (mean ± std).",
        )
        report.figure(
            reliability_figure(reliability_panels(context, compared, "wang2021")),
            "reliability.png",
            f"Figure 2: reliability diagrams on the test set (seed {context.runs[0].seed}, 15 "
            "bins) before and after temperature scaling.",
        )
        self._claims(report, rows, chosen)
        notes = [
            "Coefficients are those of `regularizers`: chosen by the mean validation ECE "
            "before calibration (seed 001 chose them on the test ECE).",
            "Seed 001's focal loss is `focal_gra` (weight detached). Its inverse focal loss "
            "-(1 + p_y)^γ log p_y is trained here with the weight detached too (the same "
            "mechanism as its focal loss; the paper does not say).",
            "Histogram binning: 15 equal-size bins on the top-1 confidence, each bin's value "
            "the validation accuracy in it (`HistogramBinning(strategy='uniform', "
            "mode='top_label')`).",
        ]
        return report.write(setup_text(context, ["wang2021"]), notes)

    def _curve_figure(self, rows):
        plt = pyplot()
        panels = [
            ("test_accuracy", 100, "accuracy (%)"),
            ("test_ece", 100, "ECE (%)"),
            ("temperature", 1, "T (validation)"),
            ("ts_ece", 100, "ECE with TS (%)"),
            ("hb_ece", 100, "ECE with HB (%)"),
        ]
        fig, axes = plt.subplots(
            1, len(panels), figsize=(4 * len(panels), 3.4), layout="constrained"
        )
        x = range(len(CURVE_LABELS))
        short = ["FL3", "FL2", "FL1", "CE", "IFL1", "IFL2", "IFL3"]
        for ax, (name, scale, ylabel) in zip(axes, panels, strict=True):
            means = [scale * mean_of(rows, label, name) for label in CURVE_LABELS]
            stds = [scale * std_of(rows, label, name) for label in CURVE_LABELS]
            ax.errorbar(x, means, yerr=stds, marker="o", capsize=3)
            ax.set_xticks(list(x), short)
            ax.set_ylabel(ylabel)
        return fig

    def _claims(self, report, rows, chosen):
        ce_pre, ce_ts = mean_of(rows, "CE", "test_ece"), mean_of(rows, "CE", "ts_ece")
        ce_hb = mean_of(rows, "CE", "hb_ece")
        before = after_ts = after_hb = 0
        parts = []
        for group, label in chosen.items():
            pre, ts, hb = (mean_of(rows, label, n) for n in ("test_ece", "ts_ece", "hb_ece"))
            before += pre < ce_pre
            after_ts += ts > ce_ts
            after_hb += hb > ce_hb
            parts.append(f"{group} {pct(pre)}→{pct(ts)} (HB {pct(hb)})")
        n = len(chosen)
        report.claim(
            "Regularised losses are better calibrated before post-hoc calibration but less "
            "calibratable after it (seed 001, Tables 1-2).",
            f"ECE before→after TS (%): CE {pct(ce_pre)}→{pct(ce_ts)} (HB {pct(ce_hb)}); "
            + ", ".join(parts)
            + f". Better than CE before: {before}/{n}; worse than CE after TS: {after_ts}/{n}, "
            f"after HB: {after_hb}/{n}.",
            verdict((before + after_ts) / (2 * n)),
        )
        compared = ["CE", *chosen.values()]
        best_ts = min(compared, key=lambda label: mean_of(rows, label, "ts_ece"))
        best_hb = min(compared, key=lambda label: mean_of(rows, label, "hb_ece"))
        report.claim(
            "With post-hoc calibration, CE gives the best calibration in most cases (seed 001).",
            f"Lowest ECE with TS: {best_ts}; with HB: {best_hb}.",
            verdict(((best_ts == "CE") + (best_hb == "CE")) / 2),
        )
        ce_t = column(rows, "CE", "temperature")
        higher, parts = 0, []
        for group, label in chosen.items():
            values = column(rows, label, "temperature")
            higher += significantly(ce_t, values, higher=True)
            parts.append(f"{group} {finite_mean(values):.2f} (p={ttest(values, ce_t):.2g})")
        report.claim(
            "The temperatures found for CE are significantly higher than for the regularised "
            "losses (seed 001).",
            f"T of CE {mean_of(rows, 'CE', 'temperature'):.2f}; "
            + ", ".join(parts)
            + f": CE significantly higher (two-sample t-test, p < 0.05) than {higher}/{n}.",
            verdict(higher / n),
        )
        inverse = CURVE_LABELS[4:]
        worse = sum(mean_of(rows, label, "test_ece") > ce_pre for label in inverse)
        report.claim(
            "Inverse focal loss has a larger ECE than CE before post-hoc calibration "
            "(seed 001, Fig. 6c).",
            ", ".join(f"{label} {pct(mean_of(rows, label, 'test_ece'))} %" for label in inverse)
            + f" vs CE {pct(ce_pre)} %: {worse}/3 larger.",
            verdict(worse / 3),
        )
        better = sum(mean_of(rows, label, "ts_ece") < ce_ts for label in inverse)
        report.claim(
            "With TS, inverse focal loss beats CE on CIFAR-10/100 (seed 001, Fig. 6e).",
            ", ".join(f"{label} {pct(mean_of(rows, label, 'ts_ece'))} %" for label in inverse)
            + f" vs CE {pct(ce_ts)} %: {better}/3 lower.",
            verdict(better / 3),
        )
        curve = [mean_of(rows, label, "ts_ece") for label in CURVE_LABELS]
        lowest = min(range(len(curve)), key=lambda i: curve[i])
        interior = 0 < lowest < len(curve) - 1
        report.claim(
            "With TS, the ECE descends then ascends from focal γ=3 through CE to inverse focal "
            "γ=3 (seed 001, Fig. 6e).",
            "ECE with TS along the curve (%): "
            + ", ".join(pct(v) for v in curve)
            + f"; lowest at {CURVE_LABELS[lowest]}"
            + (" (inside the curve)." if interior else " (an end of the curve)."),
            "agrees" if interior else "disagrees",
        )
        temps = [mean_of(rows, label, "temperature") for label in inverse]
        increasing = all(a < b for a, b in zip(temps, temps[1:], strict=False))
        finite = all(math.isfinite(t) for t in temps)
        report.claim(
            "The temperature found grows with the inverse focal γ (seed 001, Fig. 6d).",
            "T: " + ", ".join(f"{t:.2f}" for t in temps) + ".",
            "agrees" if increasing and finite else "disagrees",
        )
