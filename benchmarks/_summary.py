"""The one-page summary of the committed reports: ``python -m benchmarks summary``.

Every ``report.md`` under the reports folder is read back: its experiment is its folder's
name, its regime the folder above (``quick``, ``quick_fashion_mnist``, ``cpu``; reports
directly in the reports folder are the ``full`` preset's, except the comparisons of
:data:`COMPARISONS`, which no preset trains). From each report come the
verdicts of its "Agreement with the paper" table with the counts of its checks and, from
its Setup and tables, the regime's own numbers: CE's test accuracy and validation
temperature per recipe family, and which rule its verdicts come from: intervals with Holm's
correction and the headline of :func:`benchmarks._uncertainty.headline`, or an earlier rule
(intervals without Holm, whose headline is recomputed from the report's check counts, or
the sign of the mean). :func:`summary_text` lays them out as one Markdown page: the
deviations from the papers (:data:`benchmarks._deviations.DEVIATIONS`) first, then the
regimes, then claim by claim and regime by regime; it depends on the reports' text only
(sorted, no dates), so the page can be regenerated and compared with the committed one.
"""

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path

from ._deviations import DEVIATIONS
from ._presets import OVERCONFIDENT_T
from ._uncertainty import FAILS, HOLDS, OPEN, VERDICTS, headline

#: The regime of the reports lying directly in the reports folder (the ``full`` preset).
FULL = "full"
#: The regime of the comparisons on fixed network outputs, run by their own command (no
#: training, no preset): their folders lie directly in the reports folder, and each gets a
#: section of its own after the regimes' experiments: its command and what it trains.
COMPARISONS = {
    "venn_abers": ("python -m benchmarks venn-abers", "no training, so no regime"),
    "label_shift": (
        "python -m benchmarks label-shift",
        "it trains only the Fashion-MNIST MLP and CNN whose outputs it shifts, with the recipes "
        "of the `cpu` and `quick` regimes",
    ),
}
#: The regime name such a comparison gets.
OWN = "own command"
#: Regimes in column order; others follow in sorted order.
REGIME_ORDER = ("quick", "quick_fashion_mnist", "cpu", FULL)
#: Least similarity (difflib ratio) for two wordings of a claim with the same citation.
SIMILAR = 0.6
#: The name of the summary page in the reports folder.
SUMMARY_NAME = "README.md"
#: What a missing claim or report shows.
MISSING = "—"

_AGREEMENT = "## Agreement with the paper"
#: A citation: a parenthesis that names a paper by its year ("(Wang et al. 2021, Fig. 4)"),
#: the unpublished CIFAR-10 loss study or the anonymous Meta-Regularization submission, with
#: at most one level of nested parentheses.
_CITATION = re.compile(
    r"\(([^()]*(?:\b(?:19|20)\d\d\b|loss study|Meta-Regularization submission)[^()]*"
    r"(?:\([^()]*\)[^()]*)*)\)"
)
#: Earlier citations in the reports, and the citations they now are: the meta-regularisation
#: paper is an anonymous submission; the CIFAR-10 loss study has no label smoothing.
_RENAMED = {
    "Wang and Golebiowski 2024": "the Meta-Regularization submission",
    "Wang et al. 2021, Table 1; the CIFAR-10 loss study": "Wang et al. 2021, Table 1",
}
#: What the "our numbers" cell of a claim checked with intervals before Holm's correction
#: ends with (the counts of its checks).
_CHECKS = re.compile(r"Checks: ((?:\d+ (?:holds?|fails?|open)(?:, )?)+)\.")
#: The verdict cell of a report with per-check outcomes: "**mixed** (2 hold, 1 fails)".
_VERDICT = re.compile(r"\*\*(\w+)\*\*(?: \(([^()]*)\))?")
#: The verdicts of the reports written before the headline rule, and what they became.
_EARLIER = {"agrees": "agrees", "partly": "mixed", "disagrees": "disagrees"}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
#: The verdict rules a report can have been written with.
HOLM, NO_HOLM, SIGN = "holm", "intervals", "sign"


@dataclass(frozen=True)
class CEValue:
    """One of CE's numbers in one report: the value and whether the Setup's regime line
    gave it (the NLL-optimal T) rather than a results table."""

    value: float
    from_setup: bool


@dataclass(frozen=True)
class Verdict:
    """A claim's headline and the counts of its checks ("" where the report has none)."""

    word: str
    counts: str = ""

    def text(self):
        return f"{self.word} ({self.counts})" if self.counts else self.word


@dataclass
class ParsedReport:
    """What the summary uses of one ``report.md``.

    ``claims`` are ``(claim, Verdict)`` pairs in the table's order; ``rule`` is the verdict
    rule it was written with (:data:`HOLM`, :data:`NO_HOLM` or :data:`SIGN`); ``accuracy``
    and ``temperature`` map a recipe family to CE's test accuracy (%) and validation T.
    """

    experiment: str
    regime: str
    link: str
    title: str = ""
    claims: list = field(default_factory=list)
    rule: str = HOLM
    accuracy: dict = field(default_factory=dict)
    temperature: dict = field(default_factory=dict)
    setup: str = ""
    device: str = ""


def _cells(line):
    """The cells of a Markdown table row (a cell may not contain `` | ``)."""
    return [cell.strip() for cell in line.strip().strip("|").split(" | ")]


def _tables(lines):
    """The Markdown tables in ``lines``, as (header cells, rows of cells)."""
    tables, block = [], []
    for line in [*lines, ""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if len(block) >= 2:
            tables.append((_cells(block[0]), [_cells(row) for row in block[2:]]))
        block = []
    return tables


def _first_number(cell):
    match = _NUMBER.match(cell)
    return float(match.group()) if match else None


def _section(lines, heading):
    """The lines under ``heading`` up to the next ``## `` heading (none if absent)."""
    if heading not in lines:
        return []
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def _outcomes(counts):
    """The outcomes of "2 hold, 1 fails, 3 open"."""
    names = {"hold": HOLDS, "fail": FAILS, "open": OPEN}
    return [
        names[name]
        for count, name in re.findall(r"(\d+) (hold|fail|open)", counts)
        for _ in range(int(count))
    ]


def _verdict(row, cell, where, claim):
    """The verdict of one row of an agreement table and the rule it was written with.

    A report with per-check outcomes gives its headline and counts; an earlier report
    checked with intervals (without Holm's correction) gets the headline of its check
    counts; one written from the sign of the mean keeps its word ("partly" is "mixed").
    """
    match = _VERDICT.fullmatch(cell.strip())
    word = match.group(1) if match else cell.strip()
    if match and match.group(2) and word in VERDICTS:
        return Verdict(word, match.group(2)), HOLM
    if word in _EARLIER or word == "inconclusive":
        tally = _CHECKS.search(row)
        if tally:
            counts = tally.group(1)
            return Verdict(headline(_outcomes(counts)), counts), NO_HOLM
        return Verdict(_EARLIER.get(word, word)), SIGN
    raise ValueError(
        f"{where}: expected a verdict in {list(VERDICTS)} for the claim {claim!r}, got {word!r}"
    )


def _agreement(lines, where):
    """The (claim, Verdict) pairs of the agreement table, and the rule its claims were
    checked with; a bad verdict raises.

    The claim is the first cell and the verdict the last: the middle cells ("our
    numbers", the checks) may hold a ``|`` of their own.
    """
    claims, rule = [], HOLM
    for row in [line for line in _section(lines, _AGREEMENT) if line.startswith("|")][2:]:
        row = row.strip().strip("|")
        claim, cell = row.split(" | ", 1)[0].strip(), row.rsplit(" | ", 1)[-1]
        verdict, rule = _verdict(row, cell, where, claim)
        claims.append((claim, verdict))
    return claims, rule


def _setup_lines(lines):
    """The ``- `` lines of the Setup section, without the leading dash."""
    return [line[2:] for line in _section(lines, "## Setup") if line.startswith("- ")]


def _from_regime_lines(report, setup):
    """CE's numbers from the Setup's "Regime of `family`" lines (the cpu reports)."""
    for line in setup:
        match = re.match(r"Regime of `([^`]+)`: (\d+) epochs", line)
        if not match:
            continue
        family = match.group(1)
        accuracy = re.search(r"CE's test accuracy (\d+(?:\.\d+)?)", line)
        temperature = re.search(r"CE's validation temperature T(?:_NLL)? = (\d+(?:\.\d+)?)", line)
        if accuracy:
            report.accuracy[family] = CEValue(float(accuracy.group(1)), True)
        if temperature:
            report.temperature[family] = CEValue(float(temperature.group(1)), True)


def _from_tables(report, family, lines):
    """CE's numbers from the CE row of the first tables with a T, an accuracy or an
    error column (reports without regime lines)."""
    for header, rows in _tables(lines):
        ce = next((row for row in rows if row and row[0] == "CE"), None)
        if ce is None or len(ce) != len(header):
            continue
        values = dict(zip(header, ce, strict=True))
        column = next((name for name in ("T", "T (val. ECE)") if name in values), None)
        if family not in report.temperature and column:
            value = _first_number(values[column])
            if value is not None:
                report.temperature[family] = CEValue(value, False)
        if family not in report.accuracy:
            if "accuracy (%)" in values:
                value = _first_number(values["accuracy (%)"])
            elif "error (%)" in values:
                value = _first_number(values["error (%)"])
                value = None if value is None else round(100.0 - value, 10)
            else:
                value = None
            if value is not None:
                report.accuracy[family] = CEValue(value, False)


def parse_report(text, experiment, regime, link):
    """Read one report's claims, setup and CE numbers.

    Parameters
    ----------
    text : str
        The content of ``report.md``.
    experiment, regime : str
        The experiment's and the regime's names.
    link : str
        The report's path relative to the summary page.

    Returns
    -------
    ParsedReport
    """
    lines = text.splitlines()
    report = ParsedReport(experiment, regime, link)
    report.title = next((line[2:] for line in lines if line.startswith("# ")), experiment)
    report.claims, report.rule = _agreement(lines, link)
    setup = _setup_lines(lines)
    family = next(
        (m.group(1) for line in setup if (m := re.match(r"Recipe `([^`]+)` family", line))),
        None,
    )
    if family is None:
        return report
    data = next((line[6:] for line in setup if line.startswith("Data: ")), "")
    model = next((line[7:] for line in setup if line.startswith("Model: ")), "")
    epochs = next(
        (m.group(1) for line in setup if (m := re.search(r"epochs [^()]*? of (\d+)", line))),
        "?",
    )
    report.setup = f"{data.split(':')[0]}, {model.split(';')[0]}, {epochs} epochs"
    report.device = next(
        (m.group(1) for line in setup if (m := re.match(r"Trained on ([^;]+);", line))), ""
    )
    _from_regime_lines(report, setup)
    _from_tables(report, family, lines)
    return report


def find_reports(root):
    """Every ``report.md`` in a folder below ``root`` (its experiment), parsed, in path
    order. A report without an agreement table checks no paper's experiment (a comparison
    of methods, such as ``multicalibration/report.md``) and is left out."""
    root = Path(root)
    reports = []
    for path in sorted(root.rglob("*/report.md")):
        relative = path.relative_to(root)
        regime = "/".join(relative.parts[:-2]) or (
            OWN if relative.parts[-2] in COMPARISONS else FULL
        )
        text = path.read_text(encoding="utf-8")
        if _AGREEMENT not in text.splitlines():
            continue
        reports.append(parse_report(text, relative.parts[-2], regime, relative.as_posix()))
    return reports


def regimes_of(reports):
    """The regimes present, in :data:`REGIME_ORDER` and then sorted."""
    present = {report.regime for report in reports}
    known = [regime for regime in REGIME_ORDER if regime in present]
    return known + sorted(present - set(known))


def _citations(claim):
    for earlier, name in _RENAMED.items():
        claim = claim.replace(earlier, name)
    return tuple(_CITATION.findall(claim))


def align_claims(claims_by_regime):
    """Rows of one experiment's claims across regimes.

    A claim joins the row of the same text; a claim left over then joins the most similar
    row left over in its regime with the same citation ("(Wang et al. 2021, Fig. 4)") and a
    similarity of at least :data:`SIMILAR`, so a reworded claim (a pending text, an added
    condition) stays on one row; any other claim opens a row.

    Parameters
    ----------
    claims_by_regime : dict
        Regime to its ``(claim, value)`` pairs, in column order.

    Returns
    -------
    list of (str, dict)
        Each row's claim (the wording of its first regime) and its values by regime.
    """
    rows = []
    for regime, claims in claims_by_regime.items():
        left = []
        for claim, value in claims:
            row = next((r for r in rows if r[0] == claim and regime not in r[1]), None)
            if row is None:
                left.append((claim, value))
            else:
                row[1][regime] = value
        for claim, value in left:
            open_rows = [
                row
                for row in rows
                if regime not in row[1] and _citations(row[0]) == _citations(claim)
            ]
            # max keeps the first of equally similar rows
            best = max(
                open_rows,
                key=lambda row: SequenceMatcher(None, claim, row[0]).ratio(),
                default=None,
            )
            if best is not None and SequenceMatcher(None, claim, best[0]).ratio() >= SIMILAR:
                best[1][regime] = value
            else:
                rows.append((claim, {regime: value}))
    return rows


def _span(values):
    """``"1.02"`` or ``"0.97–1.02"``, with a dagger when a value came from a table."""
    low = min(v.value for v in values)
    high = max(v.value for v in values)
    text = f"{low:.2f}" if low == high else f"{low:.2f}–{high:.2f}"
    return text + ("" if all(v.from_setup for v in values) else "†")


def _by_family(reports, attribute):
    """``"`family` value"`` per family of the reports, joined; "n/a" if none."""
    values = {}
    for report in reports:
        for family, value in getattr(report, attribute).items():
            values.setdefault(family, []).append(value)
    if not values:
        return "n/a", {}
    text = ", ".join(f"`{family}` {_span(values[family])}" for family in sorted(values))
    return text, values


def _overconfident(temperatures):
    """Whether CE is overconfident (T ≥ OVERCONFIDENT_T) in every, some or no family."""
    if not temperatures:
        return "n/a"
    high = sorted(
        family
        for family, values in temperatures.items()
        if min(round(v.value, 2) for v in values) >= OVERCONFIDENT_T
    )
    if len(high) == len(temperatures):
        return "**yes**"
    if not high:
        return "no"
    return "only " + ", ".join(f"`{family}`" for family in high)


def _regime_rows(reports, regimes):
    rows = []
    for regime in regimes:
        mine = [report for report in reports if report.regime == regime]
        accuracy, _ = _by_family(mine, "accuracy")
        temperature, values = _by_family(mine, "temperature")
        counts = {verdict: 0 for verdict in VERDICTS}
        for report in mine:
            for _, verdict in report.claims:
                counts[verdict.word] += 1
        folder = "reports in this folder" if regime == FULL else f"[`{regime}/`]({regime}/)"
        rows.append(
            [
                f"**{regime}** ({folder})",
                "; ".join(sorted({r.setup for r in mine if r.setup})) or "n/a",
                ", ".join(sorted({r.device for r in mine if r.device})) or "n/a",
                accuracy,
                temperature,
                _overconfident(values),
                _rule(mine),
                " · ".join(f"{counts[verdict]} {verdict}" for verdict in VERDICTS)
                + f" ({sum(counts.values())} claims)",
            ]
        )
    return rows


#: How the summary names each verdict rule.
RULES = {
    HOLM: "intervals, Holm within a claim",
    NO_HOLM: "**intervals without Holm** (headlines recomputed from the check counts)",
    SIGN: "**sign of the mean** (before intervals)",
}


def _rule(reports):
    """Which verdict rules the reports of a regime were written with."""
    rules = [report.rule for report in reports if report.claims]
    if len(set(rules)) == 1:
        return RULES[rules[0]]
    return "; ".join(
        f"{RULES[rule]} in {rules.count(rule)} of {len(rules)} reports"
        for rule in RULES
        if rule in rules
    )


def _deviation_lines():
    lines = []
    for number, deviation in enumerate(DEVIATIONS, 1):
        lines += [
            f"{number}. {deviation.what}",
            f"   - *Why:* {deviation.why}",
            f"   - *Effect:* {deviation.effect}",
        ]
    return lines


def _table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _cell(verdict, link):
    """A regime's verdict on a claim, linked to its report, with its check counts."""
    counts = f" ({verdict.counts})" if verdict.counts else ""
    return f"[{verdict.word}]({link}#agreement-with-the-paper){counts}"


def _comparison_lines(report):
    """The section of a comparison run by its own command: its claims and verdicts."""
    rows = [[claim, _cell(verdict, report.link)] for claim, verdict in report.claims]
    return [
        "",
        f"## `{report.experiment}`: {report.title}",
        "",
        f"Report: [{report.link}]({report.link}), written by "
        f"`{COMPARISONS[report.experiment][0]}` ({COMPARISONS[report.experiment][1]}).",
        "",
        *_table(["paper's claim", "verdict"], rows),
    ]


def summary_text(reports):
    """The summary page (Markdown) of the parsed ``reports``."""
    comparisons = [report for report in reports if report.regime == OWN]
    reports = [report for report in reports if report.regime != OWN]
    regimes = regimes_of(reports)
    lines = [
        "# The papers' claims, regime by regime",
        "",
        "Generated by `python -m benchmarks summary` from the agreement table of every "
        "`report.md` below this folder; do not edit it by hand "
        "(`tests/test_benchmarks_summary.py` checks that it is current). A regime is a "
        "folder of reports; the reports lying directly in this folder are the `full` "
        "preset's, except the comparisons run by their own command on fixed network "
        "outputs, listed last.",
        "",
        "## Deviations from the papers",
        "",
        "Where our runs differ from the papers' (each report's notes say it where it "
        "applies), why, and what it changes where we measured it:",
        "",
        *_deviation_lines(),
        "",
        "## Regimes",
        "",
        *_table(
            [
                "regime",
                "data, model, epochs",
                "trained on",
                "CE's test accuracy (%)",
                "CE's validation T",
                f"CE overconfident (T ≥ {OVERCONFIDENT_T:g})",
                "verdict rule",
                "verdicts",
            ],
            _regime_rows(reports, regimes),
        ),
        "",
        "A claim's verdict comes from its checks (benchmarks/EXPERIMENTS.md, \"How sure the "
        'numbers are"): each check compares one number with the paper (a difference, a ratio '
        "or a slope by its 95 % interval, seeds and test rows resampled together; a count of "
        "seeds for a number chosen on a grid; a shape against a flat curve), and Holm's "
        "procedure over a claim's checks decides which hold, fail or stay open. **agrees** "
        "when every decided check holds, **disagrees** when every decided check fails, "
        "**mixed** when decided checks disagree with each other, **inconclusive** when none "
        "is decided; the counts of holding, failing and open checks follow each verdict, "
        "and each report lists its checks one by one. Reports written before this rule keep "
        "their own page until their regime is run again: those checked with intervals but "
        'without Holm\'s correction ("intervals without Holm") show here the headline of '
        "their check counts under this rule (their page may still give the earlier word "
        "for a claim with some checks holding); those "
        'written from the sign of the mean ("sign of the mean") called a claim from the sign '
        "of the difference of means, or from a t-test over seeds where the paper says "
        '"significantly": they never say inconclusive, their agrees and disagrees include '
        "differences smaller than their noise, and a claim they found to hold in part "
        "shows here as mixed, without counts.",
        "",
        "CE's numbers are per recipe family, taken from the reports of each regime (a range "
        "when its reports differ). T is the NLL-optimal validation temperature of the "
        "Setup's regime line; † marks a value read from the CE row of a results table "
        "instead (T there as that table states, e.g. chosen on validation ECE; accuracy "
        "as 100 − error where only the error is given). The papers' premise is an "
        "overconfident CE (T > 1 after overfitting the NLL); where CE's T is near 1 the "
        "regularised losses' advantage cannot appear, so verdicts differ for that reason.",
    ]
    for experiment in sorted({report.experiment for report in reports}):
        mine = {r.regime: r for r in reports if r.experiment == experiment}
        claims = {
            regime: [
                (claim, (verdict, mine[regime].link)) for claim, verdict in mine[regime].claims
            ]
            for regime in regimes
            if regime in mine
        }
        title = mine[next(regime for regime in regimes if regime in mine)].title
        rows = [
            [claim]
            + [_cell(*values[regime]) if regime in values else MISSING for regime in regimes]
            for claim, values in align_claims(claims)
        ]
        reports_line = ", ".join(
            f"[{regime}]({mine[regime].link})" for regime in regimes if regime in mine
        )
        lines += [
            "",
            f"## `{experiment}`: {title}",
            "",
            f"Reports: {reports_line}.",
            "",
            *_table(["paper's claim", *regimes], rows),
        ]
    for report in comparisons:
        lines += _comparison_lines(report)
    return "\n".join(lines) + "\n"


def write_summary(root, *, check=False):
    """Write (or with ``check`` compare) the summary page of the reports under ``root``.

    Returns
    -------
    path : Path
        The summary page.
    current : bool
        Whether the page already held this text.
    """
    path = Path(root) / SUMMARY_NAME
    text = summary_text(find_reports(root))
    current = path.is_file() and path.read_text(encoding="utf-8") == text
    if not check and not current:
        path.write_text(text, encoding="utf-8")
    return path, current
