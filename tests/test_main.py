import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_calib.__main__ import FIGURE_FILE, REPORT_FILE, main
from sklearn_calib._report import REPORT_METRICS, calibration_report, format_report
from sklearn_calib.scoring import expected_calibration_error, smooth_calibration_error


def read_table(text):
    lines = text.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("model"))
    columns = lines[start].split()[1:]
    rows = {}
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        name, *values = line.split()
        rows[name] = dict(zip(columns, map(float, values), strict=True))
    return rows


def test_main_job_prints_and_writes_the_report_and_the_diagram(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "out"), "--seed", "3", "--n-bins", "10"]) == 0
    printed = capsys.readouterr().out
    written = (tmp_path / "out" / REPORT_FILE).read_text()
    assert read_table(printed) == read_table(written)
    rows = read_table(written)
    assert set(rows) == {"LogisticRegression", "GaussianNB"}
    assert list(rows["GaussianNB"]) == [name for name, _, _ in REPORT_METRICS]
    png = (tmp_path / "out" / FIGURE_FILE).read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000

    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.5, stratify=y, random_state=3
    )
    models = {
        "LogisticRegression": make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
        "GaussianNB": GaussianNB(),
    }
    for name, model in models.items():
        proba = model.fit(X_train, y_train).predict_proba(X_test)
        assert rows[name]["accuracy"] == pytest.approx(np.mean(proba.argmax(1) == y_test), abs=1e-4)
        ece = expected_calibration_error(y_test, proba, n_bins=10)
        assert rows[name]["ECE"] == pytest.approx(ece, abs=5e-5)
        sece = smooth_calibration_error(y_test, proba)
        assert rows[name]["SECE"] == pytest.approx(sece, abs=5e-5)


@pytest.mark.parametrize("argv", [["--test-size", "1.5"], ["--n-bins", "0"], ["--seed", "x"]])
def test_main_rejects_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "error" in capsys.readouterr().err


def test_format_report_aligns_rows_and_marks_missing_values():
    reports = {
        "a": calibration_report([0, 1, 1], [0.2, 0.7, 0.4]),
        "longer name": {"accuracy": 0.5},
    }
    lines = format_report(reports, digits=3).splitlines()
    assert len({len(line) for line in lines}) == 1
    assert lines[0].split() == ["model", *(name for name, _, _ in REPORT_METRICS)]
    assert lines[2].split()[1:3] == ["0.667", f"{reports['a']['NLL']:.3f}"]
    assert lines[3].split()[-1] == "-"


def test_readme_quickstart_runs():
    import re
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Quickstart: measuring calibration", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace = {}
    exec(code, namespace)
    search, X_test, y_test = namespace["search"], namespace["X_test"], namespace["y_test"]
    assert search.best_score_ < 0
    assert 0 < expected_calibration_error(y_test, search.predict_proba(X_test)) < 0.1
    plt.close("all")
