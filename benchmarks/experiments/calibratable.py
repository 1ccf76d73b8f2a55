"""``calibratable``: Wang et al. (2021), Table 2 and Figure 6.

The regularised losses of ``regularizers`` (same runs, same validation-chosen
coefficients) after temperature scaling (T from Wang et al.'s pool 0.01..10 by validation
ECE) and after histogram binning (15 equal-size bins on the top-1 confidence, fitted on
the validation set), each compared with CE by the interval of its difference; and the
curve from focal loss gamma = 3 through CE to inverse focal loss gamma = 3.
"""

from .._methods import focal_gra, inverse_focal, regularizer_methods
from .._report import Report, pyplot, reliability_figure
from .._uncertainty import above, below, increasing, minimum, u_shape
from ._base import (
    Experiment,
    mark,
    mean_of,
    metric_rows,
    reliability_panels,
    setup_text,
    std_of,
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
GRID = "wang2021"


class Calibratable(Experiment):
    name = "calibratable"
    title = "Calibrated is not calibratable (Wang et al. 2021, Table 2 and Figure 6)"
    reproduces = "Wang et al. (2021), Table 2, Fig. 6: after TS and HB against CE; inverse focal"
    premise = (
        "The claims that the regularised losses are less calibratable than CE (a higher ECE "
        "after TS and HB, a temperature below CE's) rest on CE overfitting the NLL"
    )

    def methods(self, config):
        methods = regularizer_methods()
        labels = {m.label for m in methods}
        return methods + [m for m in CURVE if m is not None and m.label not in labels]

    def analyze(self, context):
        rows = metric_rows(context, GRID, hb=True)
        report = Report(context.folder, self.title)
        report.csv(rows)
        chosen = chosen_methods(rows)
        compared = ["CE", *chosen.values()]

        def estimate(label, column):
            return context.estimate(label, column, GRID)

        table = []
        for label in compared:
            line = [label, context.cell(label, "test_ece", GRID)]
            for column in ("ts_ece", "temperature", "hb_ece"):
                scale = 1.0 if column == "temperature" else 100.0
                text = context.cell(label, column, GRID, scale)
                if label != "CE" and column != "temperature":
                    text += " " + mark(estimate(label, column) - estimate("CE", column))
                line.append(text)
            table.append(line)
        report.table(
            ["method", "ECE (%)", "ECE with TS (%)", "T (val. ECE)", "ECE with HB (%)"],
            table,
            "**Table 2.** Test ECE (M = 15) before post-hoc calibration, with temperature "
            "scaling (T chosen on validation ECE) and with histogram binning. Marks against "
            "CE: ▲/▼ higher/lower (the interval of the difference excludes 0), △/▽ higher/"
            "lower but the interval holds 0.",
        )
        report.table(
            [
                "method",
                "accuracy (%)",
                "ECE (%)",
                "T (val. ECE)",
                "ECE with TS (%)",
                "ECE with HB (%)",
            ],
            [
                [
                    label,
                    context.cell(label, "test_accuracy", GRID),
                    context.cell(label, "test_ece", GRID),
                    context.cell(label, "temperature", GRID, 1.0),
                    context.cell(label, "ts_ece", GRID),
                    context.cell(label, "hb_ece", GRID),
                ]
                for label in CURVE_LABELS
            ],
            "**Figure 6 data.** From focal loss γ = 3 through CE to inverse focal loss γ = 3.",
        )
        report.figure(
            self._curve_figure(rows),
            "inverse_focal.png",
            "Figure 6(b-f): accuracy, ECE, validation temperature, ECE with TS and "
            "with HB along focal γ=3 → CE → inverse focal γ=3 (mean ± std over seeds).",
        )
        report.figure(
            reliability_figure(reliability_panels(context, compared, GRID)),
            "reliability.png",
            f"Figure 2: reliability diagrams on the test set (seed {context.runs[0].seed}, 15 "
            "bins) before and after temperature scaling.",
        )
        self._claims(report, estimate, chosen)
        notes = [
            "Coefficients are those of `regularizers`: chosen by the mean validation ECE "
            "before calibration (Wang et al. chose them on the test ECE).",
            "Wang et al.'s focal loss is `focal_gra` (weight detached). Their inverse focal "
            "loss -(1 + p_y)^γ log p_y is trained here with the weight detached too (the same "
            "mechanism as their focal loss; the paper does not say).",
            "Histogram binning: 15 equal-size bins on the top-1 confidence, each bin's value "
            "the validation accuracy in it (`HistogramBinning(strategy='uniform', "
            "multi_class='top_label')`).",
        ]
        return report.write(setup_text(context, [GRID]), notes)

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

    def _claims(self, report, estimate, chosen):
        checks = []
        for group, label in chosen.items():
            before = estimate(label, "test_ece") - estimate("CE", "test_ece")
            checks.append(below(before, label=f"{group} before", scale=100.0))
            for column, name in (("ts_ece", "with TS"), ("hb_ece", "with HB")):
                after = estimate(label, column) - estimate("CE", column)
                checks.append(above(after, label=f"{group} {name}", scale=100.0))
        report.claim(
            "Regularised losses are better calibrated before post-hoc calibration but less "
            "calibratable after it (Wang et al. 2021, Tables 1-2).",
            "ECE of each regulariser minus CE's (points): lower than CE before, higher with TS "
            "and with HB.",
            checks,
        )
        compared = ["CE", *chosen.values()]
        checks = []
        for column, name in (("ts_ece", "TS"), ("hb_ece", "HB")):
            gap = estimate("CE", column) - minimum(
                estimate(label, column) for label in compared[1:]
            )
            checks.append(below(gap, label=f"with {name}", scale=100.0))
        report.claim(
            "With post-hoc calibration, CE gives the best calibration in most cases (Wang et "
            "al. 2021).",
            "ECE of CE minus the lowest regulariser's (points).",
            checks,
        )
        checks = [
            above(
                estimate("CE", "temperature") - estimate(label, "temperature"),
                label=f"CE − {group}",
            )
            for group, label in chosen.items()
        ]
        report.claim(
            "The temperatures found for CE are significantly higher than for the regularised "
            "losses (Wang et al. 2021).",
            f"T of CE {estimate('CE', 'temperature').text()} (Wang et al.'s pool of 0.01 steps, "
            "fine enough for a mean); CE's T minus each regulariser's.",
            checks,
        )
        inverse = CURVE_LABELS[4:]

        def against_ce(column, check):
            return [
                check(
                    estimate(label, column) - estimate("CE", column),
                    label=f"{label} − CE",
                    scale=100.0,
                )
                for label in inverse
            ]

        report.claim(
            "Inverse focal loss has a larger ECE than CE before post-hoc calibration "
            "(Wang et al. 2021, Fig. 6c).",
            "ECE minus CE's (points).",
            against_ce("test_ece", above),
        )
        report.claim(
            "With TS, inverse focal loss beats CE on CIFAR-10/100 (Wang et al. 2021, Fig. 6e).",
            "ECE with TS minus CE's (points).",
            against_ce("ts_ece", below),
        )
        curve = [estimate(label, "ts_ece") for label in CURVE_LABELS]
        lowest = min(range(len(curve)), key=lambda i: curve[i].point)
        report.claim(
            "With TS, the ECE descends then ascends from focal γ=3 through CE to inverse focal "
            "γ=3 (Wang et al. 2021, Fig. 6e).",
            "ECE with TS along the curve (%): "
            + ", ".join(e.text(100.0) for e in curve)
            + f"; lowest at {CURVE_LABELS[lowest]}. The check: both ends above the lowest "
            "interior point (points), against a flat curve with the same noise.",
            [u_shape(curve, label="ends − lowest interior", scale=100.0)],
        )
        temperatures = [estimate(label, "temperature") for label in inverse]
        check, _ = increasing(temperatures, [1.0, 2.0, 3.0], label="slope per unit of γ")
        report.claim(
            "The temperature found grows with the inverse focal γ (Wang et al. 2021, Fig. 6d).",
            "T: "
            + ", ".join(f"{lab} {t.text()}" for lab, t in zip(inverse, temperatures, strict=True))
            + " (the check also needs no step between neighbours significantly down).",
            [check],
        )
