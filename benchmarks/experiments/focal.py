"""``focal``: Mukhoti et al. (2020), Table 1 and Tables C.1-C.3.

CE, Brier loss, MMCE, label smoothing 0.05 and focal loss gamma = 3 (weight
differentiated, as Mukhoti et al.'s code) trained with their recipe: ECE, adaptive ECE and
classwise-ECE before and after temperature scaling (T from {0.1, ..., 10} by validation
ECE, as their code), after histogram binning, and the test error.
"""

from .._methods import BRIER, CE_B, FOCAL_3, LS_005, MMCE
from .._report import Report, reliability_figure
from .._uncertainty import above, below, maximum, minimum, most_seeds
from ._base import Experiment, metric_rows, reliability_panels, setup_text

METHODS = [CE_B, BRIER, MMCE, LS_005, FOCAL_3]
GRID = "mukhoti2020"
#: "Very close to 1, mostly lying between 0.9 and 1.1": Mukhoti et al.'s words.
NEAR_ONE = (0.9, 1.1)
#: "Significantly higher, with values lying between 2.0 to 2.8": CE's and MMCE's.
HIGH = (2.0, 2.8)
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
            headers = ["method", "pre T", "post T", "T (val. ECE)"]
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

        checks = []
        for metric in ("ece", "ada_ece", "cw_ece"):
            for phase in ("test", "ts"):
                column = f"{phase}_{metric}"
                others = minimum(estimate(label, column) for label in labels[:-1])
                gap = estimate(FOCAL_3.label, column) - others
                name = f"{metric} {'pre' if phase == 'test' else 'post'} T"
                checks.append(below(gap, label=name, scale=100.0))
        report.claim(
            "Focal loss (γ=3) broadly gives the lowest ECE, AdaECE and classwise-ECE, before "
            "and after temperature scaling (Mukhoti et al. 2020).",
            "Focal minus the lowest other method, per metric and phase (points).",
            checks,
        )
        temperatures = {label: context.values(label, "temperature", GRID) for label in labels}
        report.claim(
            "For focal loss the optimal temperatures are very close to 1, mostly lying between "
            "0.9 and 1.1 (Mukhoti et al. 2020).",
            "T chosen on the validation ECE over the 0.1 grid, per seed: a grid value, so the "
            "check counts the seeds in the band.",
            [most_seeds(temperatures[FOCAL_3.label], *NEAR_ONE, label=FOCAL_3.label)],
        )
        near_one = [BRIER.label, LS_005.label]
        report.claim(
            "The Brier score and label smoothing share this property: optimal temperatures "
            "mostly between 0.9 and 1.1 (Mukhoti et al. 2020).",
            "T chosen on the validation ECE over the 0.1 grid, per seed.",
            [most_seeds(temperatures[label], *NEAR_ONE, label=label) for label in near_one],
        )
        low_t = [FOCAL_3.label, *near_one]
        highest = maximum(estimate(label, "temperature") for label in low_t)
        high = (CE_B.label, MMCE.label)
        checks = [most_seeds(temperatures[label], *HIGH, label=label) for label in high]
        checks += [
            above(estimate(label, "temperature") - highest, label=f"{label} − the highest of three")
            for label in high
        ]
        report.claim(
            "The optimal temperatures of CE and MMCE are significantly higher, lying between "
            "2.0 and 2.8 (Mukhoti et al. 2020).",
            "Per seed, T in the band; and the mean T minus the highest mean T of focal, "
            "Brier and label smoothing (replicate by replicate).",
            checks,
        )
        gap = error(context, FOCAL_3.label) - minimum(error(context, lab) for lab in labels[:-1])
        report.claim(
            "Focal loss keeps a competitive accuracy (Mukhoti et al. 2020, Table C.3).",
            f"Error of focal minus the lowest other error (points; competitive: below "
            f"{COMPETITIVE:g} point).",
            [below(gap, COMPETITIVE / 100.0, label="focal − best", scale=100.0)],
        )
        difference = estimate(FOCAL_3.label, "test_ece") - estimate(CE_B.label, "test_ece")
        report.claim(
            "Focal loss is better calibrated than CE before temperature scaling (Mukhoti et al. "
            "2020).",
            "ECE of focal minus CE's (points).",
            [below(difference, label="focal − CE", scale=100.0)],
        )


def error(context, label):
    """The test error of ``label`` (an estimate, fraction)."""
    return 1.0 - context.estimate(label, "test_accuracy", GRID)
