"""Writing an experiment's outputs: the CSV of every run, the Markdown report, PNG figures.

A :class:`Report` collects Markdown blocks, tables (means over seeds with their intervals),
figures and claims (the paper's statement, what our numbers say, each check's outcome and the
headline) and writes ``report.md`` next to ``runs.csv`` and the figures in the experiment's
folder.
"""

import csv
import gzip
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._uncertainty import ALPHA, FEW, FEW_DF, headline, holm, tally


def mean_std(values, scale=1.0, digits=2):
    """``"m ± s"`` of the finite ``values`` times ``scale`` (sample std; "–" if none)."""
    values = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if values.size == 0:
        return "–"
    mean = values.mean() * scale
    if values.size == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {values.std(ddof=1) * scale:.{digits}f}"


def finite_mean(values):
    """Mean of the finite values, NaN when there are none."""
    values = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    return float(values.mean()) if values.size else math.nan


def format_duration(seconds):
    """``"42s"``, ``"3m05s"`` or ``"1h02m"``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def markdown_table(headers, rows):
    """A GitHub Markdown table."""
    lines = ["| " + " | ".join(map(str, headers)) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)


def _open_text(path, mode):
    """Open a CSV file as text; a name ending in ``.gz`` is gzip-compressed, without a time
    stamp (the same rows give the same bytes)."""
    if Path(path).suffix == ".gz":
        return io.TextIOWrapper(gzip.GzipFile(path, mode + "b", mtime=0), "utf-8", newline="")
    return open(path, mode, newline="")


def write_csv(path, rows):
    """Write dict rows (columns: the union of keys, in first-seen order); gzip-compressed
    when ``path`` ends in ``.gz``."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with _open_text(path, "w") as file:
        writer = csv.DictWriter(file, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_value(row.get(k)) for k in columns})


def _csv_value(value):
    if isinstance(value, float):
        return "" if not math.isfinite(value) else f"{value:.7g}"
    return "" if value is None else value


def read_csv(path):
    """Rows of a CSV written by :func:`write_csv`, as dicts of strings."""
    with _open_text(path, "r") as file:
        return list(csv.DictReader(file))


#: What a report's agreement table means (written above it).
CHECKS_RULE = (
    "Each claim is split into checks, each one number against the paper's claim: its "
    f"{1 - ALPHA:.0%} interval (seeds and test rows resampled; {FEW}: fewer than "
    f"{FEW_DF:g} degrees of freedom, an interval that says little), a count of seeds for a "
    "number chosen on a grid (a binomial test against half of them), or a shape against a "
    "flat curve. Holm's procedure over a claim's checks keeps the chance of any wrong "
    f"decision in the claim at {ALPHA:g}: a check is decided when its Holm-adjusted p-value "
    f"is below {ALPHA:g}, and then **holds** (the number lies on the claimed side) or "
    "**fails** (on the other side); otherwise it is **open**. The verdict: **agrees** when "
    "every decided check holds, **disagrees** when every decided check fails, **mixed** "
    "when decided checks disagree with each other, **inconclusive** when none is decided; "
    "the counts of holding, failing and open checks follow it "
    '(benchmarks/EXPERIMENTS.md, "How sure the numbers are").'
)


@dataclass
class Claim:
    """A statement of the paper checked against our numbers.

    Parameters
    ----------
    paper : str
        What the paper claims, with its citation.
    ours : str
        What our numbers show.
    checks : list of str
        Each check with its outcome and Holm-adjusted p-value.
    verdict : str
        One of :data:`~benchmarks._uncertainty.VERDICTS`.
    counts : str
        How many checks hold, fail and are open.
    """

    paper: str
    ours: str
    checks: list
    verdict: str
    counts: str


def check_line(check, outcome, adjusted):
    """One check as the agreement table shows it."""
    p_value = "n/a" if check.p_value != check.p_value else f"{check.p_value:.2g}"
    label = f"{check.label}: " if check.label else ""
    return (
        f"{label}{check.value}, claimed {check.claimed}: *{outcome}* "
        f"(p {p_value}, Holm {adjusted:.2g})"
    )


def pyplot():
    """matplotlib's pyplot with the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def reliability_figure(rows):
    """A grid of reliability diagrams (library's :class:`ReliabilityDisplay`, 15 bins).

    Parameters
    ----------
    rows : list of (str, list of (str, ndarray, ndarray))
        One row per phase ("before TS", ...): its label and its panels, each a title, the
        labels and the probabilities.

    Returns
    -------
    figure : matplotlib Figure
    """
    from sklearn_calib.plotting import ReliabilityDisplay

    plt = pyplot()
    n_cols = max(len(panels) for _, panels in rows)
    fig, axes = plt.subplots(
        len(rows),
        n_cols,
        figsize=(3.2 * n_cols, 3.2 * len(rows)),
        squeeze=False,
        layout="constrained",
    )
    for row_axes, (phase, panels) in zip(axes, rows, strict=True):
        for ax, (title, y, proba) in zip(row_axes, panels, strict=False):
            labels = np.arange(proba.shape[1])
            ReliabilityDisplay.from_predictions(
                y, proba, n_bins=15, labels=labels, ax=ax, name=title
            )
            ax.set_title(f"{title}, {phase}" if phase else title, fontsize=9)
            ax.legend(fontsize=7, loc="upper left")
        for ax in row_axes[len(panels) :]:
            ax.set_visible(False)
    return fig


class Report:
    """The outputs of one experiment.

    Parameters
    ----------
    folder : Path
        Output folder (created).
    title : str
    """

    def __init__(self, folder, title):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.title = title
        self.blocks = []
        self.claims = []
        self.figures = []

    def text(self, markdown):
        self.blocks.append(markdown.strip())

    def table(self, headers, rows, caption=None):
        block = markdown_table(headers, rows)
        if caption:
            block = f"{caption}\n\n{block}"
        self.blocks.append(block)

    def figure(self, fig, name, caption):
        """Save a matplotlib figure as ``name`` (PNG, 80 dpi) and reference it."""
        path = self.folder / name
        fig.savefig(path, dpi=80)
        pyplot().close(fig)
        self.figures.append(name)
        self.blocks.append(f"![{caption}]({name})\n\n*{caption}*")

    def claim(self, paper, ours, checks):
        """Add a claim with its checks (:class:`~benchmarks._uncertainty.Check`); their outcomes
        are Holm-corrected together (:func:`~benchmarks._uncertainty.holm`) and give the
        headline (:func:`~benchmarks._uncertainty.headline`)."""
        checks = list(checks)
        results = holm(checks)
        outcomes = [outcome for outcome, _ in results]
        lines = [check_line(c, *result) for c, result in zip(checks, results, strict=True)]
        self.claims.append(Claim(paper, ours.strip(), lines, headline(outcomes), tally(outcomes)))

    def csv(self, rows, name="runs.csv"):
        write_csv(self.folder / name, rows)

    def write(self, setup, notes=()):
        """Write ``report.md``: title, setup, results, agreement with the paper, notes."""
        parts = [f"# {self.title}", "## Setup", setup.strip(), "## Results", *self.blocks]
        parts.append("## Agreement with the paper")
        if self.claims:
            parts.append(CHECKS_RULE)
            parts.append(
                markdown_table(
                    ["paper's claim", "our numbers", "checks", "verdict"],
                    [
                        [c.paper, c.ours, "<br>".join(c.checks), f"**{c.verdict}** ({c.counts})"]
                        for c in self.claims
                    ],
                )
            )
        else:
            parts.append("No claim could be checked (see the notes).")
        if notes:
            parts.append("## Notes")
            parts.append("\n".join(f"- {note}" for note in notes))
        path = self.folder / "report.md"
        path.write_text("\n\n".join(parts) + "\n")
        return path
