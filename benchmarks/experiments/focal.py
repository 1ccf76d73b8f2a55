"""``focal``: seed 002 Table 1 and Tables C.1-C.3.

CE, Brier loss, MMCE, label smoothing 0.05 and focal loss gamma = 3 (weight
differentiated, as seed 002's code) trained with seed 002's recipe: ECE, adaptive ECE and
classwise-ECE before and after temperature scaling (T from {0.1, ..., 10} by validation
ECE, as seed 002's code), and the test error.
"""

from .._methods import BRIER, CE_B, FOCAL_3, LS_005, MMCE
from .._report import Report, at_least, at_most, mean_std, reliability_figure, verdict
from ._base import Experiment, cell, mean_of, metric_rows, pct, reliability_panels, setup_text

METHODS = [CE_B, BRIER, MMCE, LS_005, FOCAL_3]


def error_cell(rows, label):
    """``mean ± std`` of the test error (%) of ``label``."""
    return mean_std([1 - r["test_accuracy"] for r in rows if r["method"] == label], 100.0)


class Focal(Experiment):
    name = "focal"
    title = "Focal loss for calibration (seed 002, Table 1 and Tables C.1-C.3)"
    reproduces = "seed 002 Table 1, C.1-C.3: CE, Brier, MMCE, LS-0.05, focal γ=3, pre/post T"
    premise = (
        "Focal loss's lower ECE before TS and its temperature near 1, against CE's above 1, "
        "assume CE ends overconfident"
    )

    def methods(self, config):
        return list(METHODS)

    def analyze(self, context):
        rows = metric_rows(context, "mukhoti2020")
        report = Report(context.folder, self.title)
        report.csv(rows)
        labels = [m.label for m in METHODS]
        for metric, caption in [
            ("ece", "**Table 1.** ECE (%)"),
            ("ada_ece", "**Table C.1.** Adaptive ECE (%)"),
            ("cw_ece", "**Table C.2.** Classwise-ECE (%)"),
        ]:
            report.table(
                ["method", "pre T", "post T", "T"],
                [
                    [
                        label,
                        cell(rows, label, f"test_{metric}"),
                        cell(rows, label, f"ts_{metric}"),
                        cell(rows, label, "temperature", 1.0),
                    ]
                    for label in labels
                ],
                f"{caption} before and after temperature scaling (T chosen on validation ECE).",
            )
        report.table(
            ["method", "error (%)"],
            [[label, error_cell(rows, label)] for label in labels],
            "**Table C.3.** Test error (%).",
        )
        report.figure(
            reliability_figure(reliability_panels(context, labels, "mukhoti2020")),
            "reliability.png",
            f"Reliability diagrams on the test set (seed {context.runs[0].seed}, 15 bins) "
            "before and after temperature scaling.",
        )
        self._claims(report, rows, labels)
        notes = [
            "Focal loss here differentiates its weight (1 - p_y)^γ, as seed 002's code does "
            "(`focal`). MMCE is CE + 2 MMCE_w with the reference normalisation.",
            "Label smoothing uses t = (1 - ε) e_y + ε/K (sklearn_calib's `label_smoothing`); "
            "seed 002 writes the off-target mass as ε/(K - 1).",
            "The temperature is chosen on the validation set, never on test data.",
        ]
        return report.write(setup_text(context, ["mukhoti2020"]), notes)

    def _claims(self, report, rows, labels):
        lowest, parts = 0, []
        for metric in ("ece", "ada_ece", "cw_ece"):
            for phase in ("test", "ts"):
                name = f"{phase}_{metric}"
                best = min(labels, key=lambda label: mean_of(rows, label, name))
                lowest += best == FOCAL_3.label
                parts.append(f"{metric} {'pre' if phase == 'test' else 'post'}: {best}")
        report.claim(
            "Focal loss (γ=3) broadly gives the lowest ECE, AdaECE and classwise-ECE, before "
            "and after temperature scaling (seed 002).",
            "Lowest: " + "; ".join(parts) + f" — focal lowest in {lowest}/6.",
            verdict(lowest / 6),
        )
        temperature = {label: mean_of(rows, label, "temperature") for label in labels}
        near_one = [FOCAL_3.label, BRIER.label, LS_005.label]
        close = sum(
            at_least(temperature[label], 0.9, 2) and at_most(temperature[label], 1.1, 2)
            for label in near_one
        )
        high = sum(
            temperature[label] > max(temperature[m] for m in near_one)
            for label in (CE_B.label, MMCE.label)
        )
        report.claim(
            "Optimal temperatures are close to 1 (0.9-1.1) for focal loss, Brier and label "
            "smoothing, and much higher (2.0-2.8) for CE and MMCE (seed 002).",
            "T: "
            + ", ".join(f"{label} {t:.2f}" for label, t in temperature.items())
            + f". In [0.9, 1.1]: {close}/3; CE and MMCE above all three: {high}/2.",
            verdict((close + high) / 5),
        )
        errors = {label: 100 * (1 - mean_of(rows, label, "test_accuracy")) for label in labels}
        gap = errors[FOCAL_3.label] - min(errors.values())
        report.claim(
            "Focal loss keeps a competitive accuracy (seed 002, Table C.3).",
            f"Error of focal {errors[FOCAL_3.label]:.2f} %, best {min(errors.values()):.2f} % "
            f"(gap {gap:.2f} points; competitive means within 1 point).",
            "agrees" if at_most(gap, 1.0, 2) else "disagrees",
        )
        ce, focal = mean_of(rows, CE_B.label, "test_ece"), mean_of(rows, FOCAL_3.label, "test_ece")
        report.claim(
            "Focal loss is better calibrated than CE before temperature scaling (seed 002).",
            f"ECE of CE {pct(ce)} %, focal {pct(focal)} %.",
            "agrees" if focal < ce else "disagrees",
        )
