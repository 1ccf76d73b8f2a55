"""The reports' summary page: parsing, claim alignment, and the committed page is current."""

import io
from pathlib import Path

import pytest

from benchmarks.__main__ import main
from benchmarks._deviations import DEVIATIONS
from benchmarks._summary import (
    HOLM,
    NO_HOLM,
    SIGN,
    Verdict,
    _citations,
    align_claims,
    find_reports,
    parse_report,
    summary_text,
)

ROOT = Path(__file__).resolve().parents[1]

QUICK = """# Toy experiment (Doe et al. 2009)

## Setup

- Data: Toy digits (8x8): 100 images.
- Model: `mlp` (hidden_units=[8]); float32.
- Recipe `wang2021` family: SGD, lr x0.1 after epochs 2 and 3 of 4 (the fractions 0.5, 0.75).
- Trained on cpu (x86_64); 2 runs, 1s of training in total.

## Results

| method | error (%) | T (val. ECE) |
|---|---|---|
| Focal | 9.00 ± 1.00 | 0.70 ± 0.01 |
| CE | 4.50 ± 0.50 | 1.10 ± 0.02 |

## Agreement with the paper

Each claim is split into checks.

| paper's claim | our numbers | checks | verdict |
|---|---|---|---|
| CE is overconfident (Doe et al. 2009). | T 1.10. | T: 1.10, claimed > 1.5: *fails* | \
**disagrees** (1 fails) |
| Focal loss keeps the hardness visible (Doe et al. 2009, Fig. 2). | |ρ| 0.5 vs 0.4. | a<br>b | \
**mixed** (1 holds, 1 fails) |
| The γ-Net has the lowest ECE (Doe et al. 2009, Figure 5). | Pending. | a | \
**inconclusive** (1 open) |
"""

CPU = """# Toy experiment (Doe et al. 2009)

## Setup

- Data: Toy digits (8x8): 1,000 images.
- Model: `mlp` (hidden_units=[512]); float32.
- Recipe `wang2021` family: SGD, lr x0.1 after epochs 20 and 30 of 40 (the fractions 0.5, 0.75).
- Regime of `wang2021`: 40 epochs; CE's test accuracy 88.00 ± 0.10 %, \
CE's validation temperature T = 2.40 ± 0.05 (NLL-optimal).
- Trained on cpu (x86_64); 2 runs, 2m of training in total.

## Agreement with the paper

| paper's claim | our numbers | verdict |
|---|---|---|
| CE is overconfident (Doe et al. 2009). | T 2.40 [2.3, 2.5]. Checks: 1 holds. | **agrees** |
| The γ-Net has the lowest ECE at every number of bins (Doe et al. 2009, Figure 5). | \
7/7. Checks: 1 holds, 6 open. | **partly** |
| A claim only the cpu regime checks (Doe et al. 2009, Fig. 7). | 3/3. Checks: 1 holds, 2 fail. \
| **partly** |
"""

FULL = """# Toy experiment (Doe et al. 2009)

## Setup

- Data: Toy digits (8x8): 1,000 images.
- Recipe `wang2021` family: SGD, lr x0.1 after epochs 20 and 30 of 40 (the fractions 0.5, 0.75).

## Agreement with the paper

| paper's claim | our numbers | verdict |
|---|---|---|
| CE is overconfident (Doe et al. 2009). | T 2.40 and 1.30. | **partly** |
"""


@pytest.fixture
def reports_folder(tmp_path):
    for regime, text in (("quick", QUICK), ("cpu", CPU)):
        folder = tmp_path / regime / "toy"
        folder.mkdir(parents=True)
        (folder / "report.md").write_text(text, encoding="utf-8")
    return tmp_path


def test_reports_without_an_agreement_table_are_left_out(reports_folder):
    comparison = reports_folder / "comparison"
    comparison.mkdir()
    (comparison / "report.md").write_text("# Two methods compared\n\n## Results\n")
    assert [report.experiment for report in find_reports(reports_folder)] == ["toy", "toy"]


def test_parse_report_reads_claims_setup_and_ce_numbers():
    quick = parse_report(QUICK, "toy", "quick", "quick/toy/report.md")
    assert quick.title == "Toy experiment (Doe et al. 2009)"
    assert quick.claims == [
        ("CE is overconfident (Doe et al. 2009).", Verdict("disagrees", "1 fails")),
        (
            "Focal loss keeps the hardness visible (Doe et al. 2009, Fig. 2).",
            Verdict("mixed", "1 holds, 1 fails"),
        ),
        (
            "The γ-Net has the lowest ECE (Doe et al. 2009, Figure 5).",
            Verdict("inconclusive", "1 open"),
        ),
    ]
    assert quick.rule == HOLM
    assert quick.setup == "Toy digits (8x8), `mlp` (hidden_units=[8]), 4 epochs"
    assert quick.device == "cpu (x86_64)"
    # from the CE row of the table (not the Focal row above it): 100 - error, and T
    assert quick.accuracy["wang2021"].value == pytest.approx(95.5)
    assert quick.temperature["wang2021"].value == 1.10
    assert not quick.temperature["wang2021"].from_setup
    cpu = parse_report(CPU, "toy", "cpu", "cpu/toy/report.md")
    assert cpu.accuracy["wang2021"].value == 88.0
    assert cpu.temperature["wang2021"].value == 2.40
    assert cpu.temperature["wang2021"].from_setup
    # the Setup's NLL-optimal temperature under its current name
    renamed = parse_report(CPU.replace("temperature T =", "temperature T_NLL ="), "toy", "cpu", "")
    assert renamed.temperature["wang2021"].value == 2.40


def test_earlier_reports_get_the_headline_of_their_check_counts():
    # checked with intervals before Holm's correction: the headline of the counts
    cpu = parse_report(CPU, "toy", "cpu", "cpu/toy/report.md")
    assert cpu.rule == NO_HOLM
    assert [verdict for _, verdict in cpu.claims] == [
        Verdict("agrees", "1 holds"),
        Verdict("agrees", "1 holds, 6 open"),  # every decided check holds
        Verdict("mixed", "1 holds, 2 fail"),
    ]
    # from the sign of the mean: no counts, the earlier word for "in part" is mixed
    full = parse_report(FULL, "toy", "full", "toy/report.md")
    assert full.rule == SIGN and full.claims[0][1] == Verdict("mixed")


def test_parse_report_rejects_an_unknown_verdict():
    text = QUICK.replace("**mixed**", "**maybe**")
    with pytest.raises(ValueError, match=r"quick/toy/report.md: expected a verdict .* 'maybe'"):
        parse_report(text, "toy", "quick", "quick/toy/report.md")


def test_align_claims_joins_rewordings_with_the_same_citation_only():
    rows = align_claims(
        {
            "quick": [("The NLL of correct samples is higher (Roe et al. 2020, Fig. 2b).", "a")],
            "cpu": [
                ("The NLL of wrong samples is lower (Roe et al. 2020, Fig. 2c).", "b"),
                (
                    "The NLL of correct samples is higher with focal (Roe et al. 2020, Fig. 2b).",
                    "c",
                ),
            ],
        }
    )
    assert rows == [
        (
            "The NLL of correct samples is higher (Roe et al. 2020, Fig. 2b).",
            {"quick": "a", "cpu": "c"},
        ),
        ("The NLL of wrong samples is lower (Roe et al. 2020, Fig. 2c).", {"cpu": "b"}),
    ]


def test_summary_aligns_claims_across_regimes_and_marks_missing_ones(reports_folder):
    text = summary_text(find_reports(reports_folder))
    lines = text.splitlines()
    link = "{}/toy/report.md#agreement-with-the-paper"
    assert "| paper's claim | quick | cpu |" in lines
    assert (
        f"| CE is overconfident (Doe et al. 2009). | [disagrees]({link.format('quick')}) "
        f"(1 fails) | [agrees]({link.format('cpu')}) (1 holds) |" in lines
    )
    # the pending wording and the final one share a row
    assert (
        f"| The γ-Net has the lowest ECE (Doe et al. 2009, Figure 5). | "
        f"[inconclusive]({link.format('quick')}) (1 open) | [agrees]({link.format('cpu')}) "
        "(1 holds, 6 open) |" in lines
    )
    # a "|" inside "our numbers" does not shift the verdict
    assert (
        f"| Focal loss keeps the hardness visible (Doe et al. 2009, Fig. 2). | "
        f"[mixed]({link.format('quick')}) (1 holds, 1 fails) | — |" in lines
    )
    assert (
        f"| A claim only the cpu regime checks (Doe et al. 2009, Fig. 7). | — | "
        f"[mixed]({link.format('cpu')}) (1 holds, 2 fail) |" in lines
    )
    regimes = [line for line in lines if line.startswith("| **")]
    assert regimes[0].startswith("| **quick** ([`quick/`](quick/)) | Toy digits (8x8), `mlp`")
    assert "`wang2021` 95.50† | `wang2021` 1.10† | no |" in regimes[0]
    assert regimes[0].endswith(
        "| intervals, Holm within a claim "
        "| 0 agrees · 1 mixed · 1 disagrees · 1 inconclusive (3 claims) |"
    )
    assert "`wang2021` 88.00 | `wang2021` 2.40 | **yes** |" in regimes[1]
    assert regimes[1].endswith(
        "| **intervals without Holm** (headlines recomputed from the check counts) "
        "| 2 agrees · 1 mixed · 0 disagrees · 0 inconclusive (3 claims) |"
    )
    assert "partly" not in text
    # regenerating gives the same page
    assert summary_text(find_reports(reports_folder)) == text


def test_a_comparison_run_by_its_own_command_gets_its_own_section(reports_folder):
    folder = reports_folder / "venn_abers"
    folder.mkdir()
    (folder / "report.md").write_text(FULL, encoding="utf-8")
    reports = find_reports(reports_folder)
    assert [(r.experiment, r.regime) for r in reports][-1] == ("venn_abers", "own command")
    lines = summary_text(reports).splitlines()
    assert "| paper's claim | quick | cpu |" in lines
    assert not any(line.startswith("| **own command**") for line in lines)
    section = lines[lines.index("## `venn_abers`: Toy experiment (Doe et al. 2009)") :]
    assert section[2] == (
        "Report: [venn_abers/report.md](venn_abers/report.md), written by "
        "`python -m benchmarks venn-abers` (no training, so no regime)."
    )
    assert section[4:] == [
        "| paper's claim | verdict |",
        "|---|---|",
        "| CE is overconfident (Doe et al. 2009). | "
        "[mixed](venn_abers/report.md#agreement-with-the-paper) |",
    ]


def test_summary_command_writes_then_checks(reports_folder):
    stream = io.StringIO()
    assert main(["summary", "--check", "--reports", str(reports_folder)], stream) == 1
    assert "stale" in stream.getvalue()
    assert not (reports_folder / "README.md").exists()
    assert main(["summary", "--reports", str(reports_folder)], stream) == 0
    assert (reports_folder / "README.md").read_text(encoding="utf-8") == summary_text(
        find_reports(reports_folder)
    )
    assert main(["summary", "--check", "--reports", str(reports_folder)], stream) == 0
    assert main(["summary", "--reports", str(reports_folder / "absent")], stream) == 1


def test_committed_summary_is_current():
    """benchmarks/reports/README.md is what the command writes from the committed reports:
    after a report changes, run ``python -m benchmarks summary`` and commit the page."""
    reports = ROOT / "benchmarks" / "reports"
    expected = summary_text(find_reports(reports))
    assert (reports / "README.md").read_text(encoding="utf-8") == expected


def test_citations_name_papers():
    assert _citations("A claim (Wang et al. 2021, Fig. 6e).") == ("Wang et al. 2021, Fig. 6e",)
    assert _citations("A claim (the Meta-Regularization submission, Figure 3(c-d)).") == (
        "the Meta-Regularization submission, Figure 3(c-d)",
    )
    # the paper's earlier name in reports not yet rerun aligns with the current one
    assert _citations("A claim (Wang and Golebiowski 2024, Figure 3(c-d)).") == (
        "the Meta-Regularization submission, Figure 3(c-d)",
    )
    assert _citations("Not effective (the CIFAR-10 loss study).") == ("the CIFAR-10 loss study",)
    assert _citations("ECE at 1000 bins (M = 15) is higher (10 % more).") == ()


def test_summary_lists_the_deviations_before_the_regimes(reports_folder):
    text = summary_text(find_reports(reports_folder))
    section = text.split("## Deviations from the papers")[1].split("## Regimes")[0]
    for number, deviation in enumerate(DEVIATIONS, 1):
        assert f"{number}. {deviation.what}" in section
        assert f"   - *Why:* {deviation.why}" in section
        assert f"   - *Effect:* {deviation.effect}" in section
    assert "Doe et al." not in section
