"""``regularizers``: Wang et al. (2021), Table 1 and Figure 1(a-c), with the CIFAR-10 loss study.

CE against label smoothing, the L1 norm of the logits, entropy regularisation and Wang et
al.'s focal loss (``focal_gra``) over their coefficient grids: test ECE (M = 15) and
accuracy at each method's best coefficient, and the coefficient-sensitivity curves.
Coefficients are chosen by the mean validation ECE over seeds (Wang et al. chose them on
the test ECE; the coefficient the test set would pick is shown beside).
"""

from .._methods import GROUP_NAMES, WANG2021_GRIDS, regularizer_methods, wang2021_grid
from .._report import Report, pyplot
from .._uncertainty import above, below, maximum
from ._base import Experiment, choose_coefficients, mean_of, metric_rows, setup_text, std_of

GRID = "wang2021"


def groups_of(rows):
    """Method labels of each regularised group over Wang et al. (2021)'s grid, in grid order."""
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
    title = "Regularised losses and calibration (Wang et al. 2021, Table 1 and Figure 1)"
    reproduces = "Wang et al. (2021), Table 1, Fig. 1(a-c): CE, LS, L1, entropy reg., focal (GRA)"
    premise = (
        "The claims that the regularisers lower the ECE before temperature scaling rest on CE "
        "being overconfident"
    )

    def methods(self, config):
        return regularizer_methods()

    def analyze(self, context):
        rows = metric_rows(context, GRID)
        report = Report(context.folder, self.title)
        report.csv(rows)
        groups = groups_of(rows)
        chosen = choose_coefficients(rows, groups)
        by_test = choose_coefficients(rows, groups, by="test_ece")
        table = [
            [
                "CE",
                "–",
                context.cell("CE", "test_ece", GRID),
                context.cell("CE", "test_accuracy", GRID),
                "–",
            ]
        ]
        for group, label in chosen.items():
            table.append(
                [
                    group,
                    label.split(" ", 1)[1],
                    context.cell(label, "test_ece", GRID),
                    context.cell(label, "test_accuracy", GRID),
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
                    [label]
                    + [
                        context.cell(label, c, GRID)
                        for c in ("val_ece", "test_ece", "test_accuracy")
                    ]
                )
        report.table(
            ["method", "val. ECE (%)", "test ECE (%)", "accuracy (%)"],
            grid_rows,
            "**Every coefficient of the grids.** The validation ECE's interval holds the seeds' "
            "variation only (the coefficients are chosen on it).",
        )
        report.figure(
            self._sensitivity(rows, groups),
            "sensitivity.png",
            "Figure 1(a-c): test ECE (solid) and validation ECE (dashed) against the "
            "coefficient, mean ± std over seeds; the grey band is CE (mean ± std). "
            "Bottom: accuracy.",
        )
        self._claims(report, context, chosen, groups)
        notes = [
            "Coefficients are chosen on validation data (mean validation ECE over seeds), "
            "never on test data. Wang et al. chose them on the test ECE; the last column of "
            "Table 1 shows the coefficient the test set would have picked.",
            "Focal loss is Wang et al.'s variant: the weight (1 - p_y)^γ is detached (applied "
            "to the gradient), `focal_gra` in sklearn_calib. The entropy regularisation "
            "(CE - α H(p)) of the CIFAR-10 loss study has no grid there; it uses Wang et al.'s "
            "α grid.",
        ]
        return report.write(setup_text(context, [GRID]), notes)

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

    def _claims(self, report, context, chosen, groups):
        def estimate(label, column):
            return context.estimate(label, column, GRID)

        checks = []
        for group in ("LS", "L1", "Focal"):
            difference = estimate(chosen[group], "test_ece") - estimate("CE", "test_ece")
            checks.append(below(difference, label=f"{group} − CE", scale=100.0))
        report.claim(
            "Label smoothing, the L1 norm and focal loss significantly decrease the ECE "
            "compared with CE (Wang et al. 2021, Table 1).",
            f"CE's ECE {estimate('CE', 'test_ece').text(100.0)} %; each regulariser's at its "
            "chosen coefficient minus CE's (points).",
            checks,
        )
        er = chosen["ER"]
        difference = estimate(er, "test_ece") - estimate("CE", "test_ece")
        weakest = estimate(er, "test_ece") - maximum(
            estimate(chosen[group], "test_ece") for group in ("LS", "L1", "Focal")
        )
        edge = er in (groups["ER"][0], groups["ER"][-1])
        report.claim(
            "Entropy regularisation is not effective to mitigate over-confidence (the CIFAR-10 "
            "loss study).",
            f"{er} (chosen on validation"
            + (", at an edge of its grid: a stronger or weaker α may do better" if edge else "")
            + f"). Not effective: its ECE above CE's holds, below CE's fails. For scale, its "
            f"ECE minus the highest "
            f"of LS, L1 and focal: {weakest.text(100.0)} points.",
            [above(difference, label="ER − CE", scale=100.0)],
        )
        checks = []
        for group in ("L1", "Focal"):
            largest = groups[group][-1]
            difference = estimate(largest, "test_accuracy") - estimate("CE", "test_accuracy")
            checks.append(below(difference, label=f"{largest} − CE", scale=100.0))
        report.claim(
            "Large coefficients of the L1 norm and focal loss harm accuracy (Wang et al. 2021).",
            "Accuracy at the largest coefficient of the grid minus CE's (points).",
            checks,
        )
