"""``regularizers``: seeds 000/001 Table 1 and Figure 1(a-c).

CE against label smoothing, the L1 norm of the logits, entropy regularisation and seed
001's focal loss (``focal_gra``) over seed 001's coefficient grids: test ECE (M = 15) and
accuracy at each method's best coefficient, and the coefficient-sensitivity curves.
Coefficients are chosen by the mean validation ECE over seeds (seed 001 chose them on the
test ECE; the coefficient the test set would pick is shown beside).
"""

from .._methods import GROUP_NAMES, WANG2021_GRIDS, regularizer_methods, wang2021_grid
from .._report import Report, pyplot, verdict
from ._base import (
    Experiment,
    cell,
    choose_coefficients,
    mean_of,
    metric_rows,
    pct,
    setup_text,
    significantly,
    std_of,
    ttest,
)


def groups_of(rows):
    """Method labels of each regularised group over seed 001's grid, in grid order."""
    present = {row["method"] for row in rows}
    return {
        GROUP_NAMES[loss]: [m.label for m in wang2021_grid(loss) if m.label in present]
        for loss in WANG2021_GRIDS
    }


def chosen_methods(rows):
    """The validation-chosen method of each regularised group."""
    return choose_coefficients(rows, groups_of(rows))


class Regularizers(Experiment):
    name = "regularizers"
    title = "Regularised losses and calibration (seeds 000/001, Table 1 and Figure 1)"
    reproduces = "seeds 000/001 Table 1, Fig. 1(a-c): CE, LS, L1, entropy reg., focal (GRA)"
    premise = (
        "The claims that the regularisers lower the ECE before temperature scaling rest on CE "
        "being overconfident"
    )

    def methods(self, config):
        return regularizer_methods()

    def analyze(self, context):
        rows = metric_rows(context, "wang2021")
        report = Report(context.folder, self.title)
        report.csv(rows)
        groups = groups_of(rows)
        chosen = choose_coefficients(rows, groups)
        by_test = choose_coefficients(rows, groups, by="test_ece")
        table = [["CE", "–", cell(rows, "CE", "test_ece"), cell(rows, "CE", "test_accuracy"), "–"]]
        for group, label in chosen.items():
            table.append(
                [
                    group,
                    label.split(" ", 1)[1],
                    cell(rows, label, "test_ece"),
                    cell(rows, label, "test_accuracy"),
                    by_test[group].split(" ", 1)[1],
                ]
            )
        report.table(
            [
                "method",
                "coefficient (chosen on val. ECE)",
                "ECE (%)",
                "accuracy (%)",
                "coefficient test ECE would pick",
            ],
            table,
            "**Table 1.** Test ECE (M = 15) and accuracy at each method's coefficient chosen "
            "by the mean validation ECE over seeds.",
        )
        grid_rows = []
        for labels in groups.values():
            for label in labels:
                grid_rows.append(
                    [
                        label,
                        cell(rows, label, "val_ece"),
                        cell(rows, label, "test_ece"),
                        cell(rows, label, "test_accuracy"),
                    ]
                )
        report.table(
            ["method", "val. ECE (%)", "test ECE (%)", "accuracy (%)"],
            grid_rows,
            "**Every coefficient of the grids.**",
        )
        report.figure(
            self._sensitivity(rows, groups),
            "sensitivity.png",
            "Figure 1(a-c): test ECE (solid) and validation ECE (dashed) against the "
            "coefficient, mean ± std over seeds; the grey band is CE (mean ± std). "
            "Bottom: accuracy.",
        )
        self._claims(report, rows, chosen, groups)
        notes = [
            "Coefficients are chosen on validation data (mean validation ECE over seeds), "
            "never on test data. Seed 001 chose them on the test ECE; the last column of "
            "Table 1 shows the coefficient the test set would have picked.",
            "Focal loss is seed 001's variant: the weight (1 - p_y)^γ is detached (applied to "
            "the gradient), `focal_gra` in sklearn_calib. Seed 000's entropy regularisation "
            "(CE - α H(p)) has no grid in the paper; it uses seed 001's α grid.",
        ]
        return report.write(setup_text(context, ["wang2021"]), notes)

    def _sensitivity(self, rows, groups):
        plt = pyplot()
        fig, axes = plt.subplots(
            2, len(groups), figsize=(4 * len(groups), 6), squeeze=False, layout="constrained"
        )
        ce_ece, ce_acc = mean_of(rows, "CE", "test_ece"), mean_of(rows, "CE", "test_accuracy")
        for column, (group, labels) in enumerate(groups.items()):
            x = [next(r["coefficient"] for r in rows if r["method"] == lab) for lab in labels]
            for row_index, (name, ce_value) in enumerate(
                [("test_ece", ce_ece), ("test_accuracy", ce_acc)]
            ):
                ax = axes[row_index, column]
                means = [100 * mean_of(rows, lab, name) for lab in labels]
                stds = [100 * std_of(rows, lab, name) for lab in labels]
                ax.errorbar(x, means, yerr=stds, marker="o", capsize=3, label="test")
                if name == "test_ece":
                    ax.plot(
                        x,
                        [100 * mean_of(rows, lab, "val_ece") for lab in labels],
                        "--",
                        marker=".",
                        label="validation",
                    )
                ce_std = 100 * std_of(rows, "CE", name)
                ax.axhspan(100 * ce_value - ce_std, 100 * ce_value + ce_std, color="0.85")
                ax.axhline(100 * ce_value, color="0.4", lw=1, label="CE")
                if group in ("L1", "ER"):
                    ax.set_xscale("log")
                ax.set_xlabel(labels[0].split(" ")[1].split("=")[0])
                ax.set_ylabel("ECE (%)" if name == "test_ece" else "accuracy (%)")
                ax.set_title(group if row_index == 0 else "")
            axes[0, column].legend(fontsize=8)
        return fig

    def _claims(self, report, rows, chosen, groups):
        ce = [r["test_ece"] for r in rows if r["method"] == "CE"]
        ce_ece = mean_of(rows, "CE", "test_ece")
        parts, lower = [], 0
        for group in ("LS", "L1", "Focal"):
            label = chosen[group]
            values = [r["test_ece"] for r in rows if r["method"] == label]
            m = mean_of(rows, label, "test_ece")
            lower += significantly(values, ce, higher=False)
            parts.append(f"{group} {pct(m)} % (p={ttest(values, ce):.2g})")
        report.claim(
            "Label smoothing, the L1 norm and focal loss significantly decrease the ECE "
            "compared with CE (seed 001, Table 1; seed 000).",
            f"CE {pct(ce_ece)} %; "
            + ", ".join(parts)
            + f": {lower}/3 significantly lower than CE (two-sample t-test, p < 0.05).",
            verdict(lower / 3),
        )
        er = chosen["ER"]
        er_values = [r["test_ece"] for r in rows if r["method"] == er]
        er_ece = mean_of(rows, er, "test_ece")
        p = ttest(er_values, ce)
        significant = significantly(er_values, ce, higher=False)
        report.claim(
            "Entropy regularisation is not effective against over-confidence (seed 000).",
            f"{er}: ECE {pct(er_ece)} % vs CE {pct(ce_ece)} % (p={p:.2g}); "
            + ("significantly lower than CE." if significant else "not significantly lower."),
            "disagrees" if significant else "agrees",
        )
        ce_acc = mean_of(rows, "CE", "test_accuracy")
        harmed, parts = 0, []
        for group in ("L1", "Focal"):
            largest = groups[group][-1]
            acc = mean_of(rows, largest, "test_accuracy")
            harmed += acc < ce_acc
            parts.append(f"{largest}: {pct(acc)} %")
        report.claim(
            "Large coefficients of the L1 norm and focal loss harm accuracy (seed 001).",
            f"CE {pct(ce_acc)} %; " + ", ".join(parts) + f": {harmed}/2 below CE.",
            verdict(harmed / 2),
        )
