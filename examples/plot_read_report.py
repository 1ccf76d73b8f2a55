"""
Reading a reproduction report
=============================

``python -m benchmarks run NAME`` trains the runs of one experiment and writes a report:
``report.md`` (the tables, the figures and the verdict on each of the paper's claims) and
``runs.csv``, one row per trained run with every measured number. The committed reports
are in ``benchmarks/reports/``. This example reads the CSV file of the ``focal``
experiment (ResNet-20 on Fashion-MNIST, five losses, three seeds each, trained on an
H100), recomputes the report's Table 1 from it and draws it.
"""

# %%
# Read the runs
# -------------
# The test metrics are in the columns ``test_*`` (the network alone) and ``ts_*`` (after
# temperature scaling, its T chosen on the validation set, column ``temperature``).
import csv
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np


def reports_folder():
    """``benchmarks/reports`` of the repository holding the working directory."""
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "benchmarks" / "reports").is_dir():
            return folder / "benchmarks" / "reports"
    raise FileNotFoundError(
        "This example reads benchmarks/reports/ of the sklearn_calib repository: run it "
        "from inside a clone of the repository."
    )


with open(reports_folder() / "focal" / "runs.csv", newline="") as file:
    runs = list(csv.DictReader(file))
methods = list(dict.fromkeys(run["method"] for run in runs))
print(len(runs), "runs;", "methods:", ", ".join(methods))
print("columns:", ", ".join(runs[0]))

# %%
# Table 1: ECE (%) before and after temperature scaling
# -----------------------------------------------------
# Each cell is the mean ± sample standard deviation over the seeds (the reports written with
# the rule of ``benchmarks/EXPERIMENTS.md`` give the mean and its 95 % interval instead,
# seeds and test rows resampled together).


def column(method, name):
    return np.array([float(run[name]) for run in runs if run["method"] == method])


def mean_std(values):
    return values.mean(), values.std(ddof=1)


print(f"{'method':<12}{'pre T':>16}{'post T':>16}{'T':>14}{'accuracy (%)':>16}")
table = {}
for method in methods:
    table[method] = [
        mean_std(100 * column(method, "test_ece")),
        mean_std(100 * column(method, "ts_ece")),
    ]
    temperature = mean_std(column(method, "temperature"))
    accuracy = mean_std(100 * column(method, "test_accuracy"))
    cells = [*table[method], temperature, accuracy]
    print(f"{method:<12}" + "".join(f"{m:>9.2f} ± {s:.2f}" for m, s in cells))

# %%
# Draw it
# -------
# Focal loss with γ = 3 has the highest ECE before temperature scaling in this run, and
# one of the lowest after it: its fitted temperature below 1 says it ends underconfident,
# which temperature scaling repairs (``report.md`` compares this with the paper's claims).
positions = np.arange(len(methods))
fig, ax = plt.subplots(figsize=(7, 3.5))
for offset, (index, label) in zip([-0.2, 0.2], enumerate(["before T", "after T"]), strict=True):
    means = [table[method][index][0] for method in methods]
    stds = [table[method][index][1] for method in methods]
    ax.bar(positions + offset, means, width=0.4, yerr=stds, capsize=3, label=label)
ax.set_xticks(positions, methods)
ax.set_ylabel("test ECE (%)")
ax.legend()
fig.tight_layout()
plt.show()
