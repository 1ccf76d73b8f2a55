"""``focal``: Mukhoti et al. (2020), Table 1 and Tables C.1-C.3.

CE, Brier loss, MMCE, label smoothing 0.05 and focal loss gamma = 3 (weight
differentiated, as Mukhoti et al.'s code) trained with their recipe: ECE, adaptive ECE and
classwise-ECE before and after temperature scaling (T from {0.1, ..., 10} by validation
ECE, as their code), after histogram binning, and the test error.
"""

from .._methods import BRIER, CE_B, FOCAL_3, LS_005, MMCE
from .._report import Report, reliability_figure
from .._uncertainty import above, below, minimum, within
from ._base import Experiment, metric_rows, reliability_panels, setup_text

METHODS = [CE_B, BRIER, MMCE, LS_005, FOCAL_3]
GRID = "mukhoti2020"
#: "Close to 1": Mukhoti et al.'s words for the temperatures of 0.9-1.1 in their Table 1.
NEAR_ONE = (0.9, 1.1)
#: "Competitive" accuracy: an error at most this many points above the best method's.
COMPETITIVE = 1.0


class Focal(Experiment):
    name = "focal"
    title = "Focal loss for calibration (Mukhoti et al. 2020, Table 1 and Tables C.1-C.3)"
    reproduces = (
        "Mukhoti et al. (2020), Table 1, C.1-C.3: CE, Brier, MMCE, LS-0.05, focal γ=3, pre/post T"
    )
    premise = (
        "Focal loss's lower ECE before TS and its temperature near 1, against CE's above 1, "
        "assume CE ends overconfident"
    )

    def methods(self, config):
        return list(METHODS)

    def analyze(self, context):
        rows = metric_rows(context, GRID, hb=True)
        report = Report(context.folder, self.title)
        report.csv(rows)
        labels = [m.label for m in METHODS]
        for metric, caption in [
            ("ece", "**Table 1.** ECE (%)"),
            ("ada_ece", "**Table C.1.** Adaptive ECE (%)"),
            ("cw_ece", "**Table C.2.** Classwise-ECE (%)"),
        ]:
            headers = ["method", "pre T", "post T", "T"]
            if metric != "cw_ece":
                headers.append("HB")
            table = []
            for label in labels:
                line = [
                    label,
                    context.cell(label, f"test_{metric}", GRID),
                    context.cell(label, f"ts_{metric}", GRID),
                    context.cell(label, "temperature", GRID, 1.0),
                ]
                if metric != "cw_ece":
                    line.append(context.cell(label, f"hb_{metric}", GRID))
                table.append(line)
            binned = " and after histogram binning (HB)" if metric != "cw_ece" else ""
            report.table(
                headers,
                table,
                f"{caption} before and after temperature scaling (T chosen on validation "
                f"ECE){binned}.",
            )
        report.table(
            ["method", "error (%)"],
            [[label, error(context, label).text(100.0)] for label in labels],
            "**Table C.3.** Test error (%).",
        )
        report.figure(
            reliability_figure(reliability_panels(context, labels, GRID)),
            "reliability.png",
            f"Reliability diagrams on the test set (seed {context.runs[0].seed}, 15 bins) "
            "before and after temperature scaling.",
        )
        self._claims(report, context, labels)
        notes = [
            "Focal loss here differentiates its weight (1 - p_y)^γ, as Mukhoti et al.'s code "
            "does (`focal`). MMCE is CE + 2 MMCE_w with the reference normalisation.",
            "Label smoothing uses t = (1 - ε) e_y + ε/K (sklearn_calib's `label_smoothing`); "
            "Mukhoti et al. write the off-target mass as ε/(K - 1).",
            "The temperature is chosen on the validation set, never on test data. Histogram "
            "binning (HB): 15 equal-width bins of the top-label confidence, each bin's value "
            "the validation accuracy in it (`HistogramBinning(strategy='uniform', "
            "multi_class='top_label')`), as for the Wang et al. (2021) family.",
        ]
        return report.write(setup_text(context, [GRID]), notes)

    def _claims(self, report, context, labels):
        def estimate(label, column):
            return context.estimate(label, column, GRID)

        outcomes, parts = [], []
        for metric in ("ece", "ada_ece", "cw_ece"):
            for phase in ("test", "ts"):
                column = f"{phase}_{metric}"
                others = minimum(estimate(label, column) for label in labels[:-1])
                gap = estimate(FOCAL_3.label, column) - others
                outcomes.append(below(gap))
                parts.append(f"{metric} {'pre' if phase == 'test' else 'post'} {gap.text(100.0)}")
        report.claim(
            "Focal loss (γ=3) broadly gives the lowest ECE, AdaECE and classwise-ECE, before "
            "and after temperature scaling (Mukhoti et al. 2020).",
            "Focal minus the lowest other method (points): " + "; ".join(parts) + ".",
            outcomes,
        )
        temperature = {label: estimate(label, "temperature") for label in labels}
        near_one = [FOCAL_3.label, BRIER.label, LS_005.label]
        outcomes = [within(temperature[label], *NEAR_ONE) for label in near_one]
        highest = max(near_one, key=lambda label: temperature[label].point)
        outcomes += [
            above(temperature[label] - temperature[highest]) for label in (CE_B.label, MMCE.label)
        ]
        report.claim(
            "Optimal temperatures are close to 1 (0.9-1.1) for focal loss, Brier and label "
            "smoothing, and much higher (2.0-2.8) for CE and MMCE (Mukhoti et al. 2020).",
            "T: "
            + ", ".join(f"{label} {t.text(digits=2)}" for label, t in temperature.items())
            + ". Checked: the three in [0.9, 1.1]; CE and MMCE above the highest of the three.",
            outcomes,
        )
        gap = error(context, FOCAL_3.label) - minimum(error(context, lab) for lab in labels[:-1])
        report.claim(
            "Focal loss keeps a competitive accuracy (Mukhoti et al. 2020, Table C.3).",
            f"Error of focal minus the lowest other error: {gap.text(100.0)} points "
            f"(competitive: below {COMPETITIVE:g} point).",
            [below(gap, COMPETITIVE / 100.0)],
        )
        difference = estimate(FOCAL_3.label, "test_ece") - estimate(CE_B.label, "test_ece")
        report.claim(
            "Focal loss is better calibrated than CE before temperature scaling (Mukhoti et al. "
            "2020).",
            f"ECE of focal minus CE: {difference.text(100.0)} points.",
            [below(difference)],
        )


def error(context, label):
    """The test error of ``label`` (an estimate, fraction)."""
    return 1.0 - context.estimate(label, "test_accuracy", GRID)
