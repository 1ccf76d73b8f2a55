"""The calibration report: its numbers are those of the functions it summarises."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.tree import DecisionTreeClassifier

from sklearn_calib.scoring import (
    calibration_decomposition,
    calibration_error_ci,
    calibration_report,
    calibration_test,
    expected_calibration_error,
    smooth_ece,
)


@pytest.fixture(scope="module")
def binary():
    rng = np.random.default_rng(0)
    p = rng.random(3000)
    y = np.where(rng.random(3000) < p**1.3, "pos", "neg")
    return y, p


@pytest.mark.slow
def test_dictionary_holds_the_functions_values(binary):
    y, p = binary
    options = {"convention": "positive_class", "n_resamples": 100, "n_bins": 10}
    report = calibration_report(y, p, random_state=0, output_dict=True, **options)
    assert report["n_samples"] == 3000 and report["n_classes"] == 2
    ece = report["errors"]["ece"]
    assert ece["estimate"] == expected_calibration_error(
        y, p, n_bins=10, convention="positive_class"
    )
    assert ece["low"] <= ece["estimate"] <= ece["high"]
    # the first interval uses the generator's first draws
    first = calibration_error_ci(
        expected_calibration_error,
        y,
        p,
        n_bins=10,
        convention="positive_class",
        n_resamples=100,
        random_state=np.random.RandomState(0),
    )
    assert (ece["low"], ece["high"]) == (first.low, first.high)
    smooth = report["errors"]["smooth_ece"]
    assert (smooth["estimate"], smooth["bandwidth"]) == smooth_ece(
        y, p, convention="positive_class", return_bandwidth=True
    )
    for method, values in report["tests"].items():
        expected = calibration_test(y, p, method=method, convention="positive_class")
        assert (values["statistic"], values["pvalue"]) == tuple(expected)
    brier = calibration_decomposition(y, p)
    assert report["decomposition"]["brier"] == dict(brier)
    log_loss = report["decomposition"]["log_loss"]
    assert log_loss == dict(calibration_decomposition(y, p, score="log_loss", method="temperature"))


@pytest.mark.slow
def test_text_lists_every_entry(binary):
    y, p = binary
    text = calibration_report(
        y, p, n_resamples=50, random_state=0, confidence_level=0.9, ci_method="bca", digits=3
    )
    for label in (
        "ECE",
        "adaptive ECE",
        "classwise ECE",
        "smECE (h = ",
        "debiased L2 CE",
        "Spiegelhalter",
        "Kolmogorov-Smirnov",
        "Kuiper",
        "Brier (isotonic, CORP)",
        "log loss (temperature)",
        "intervals: 90 % bca bootstrap, 50 replicates",
        "top-label convention",
    ):
        assert label in text
    report = calibration_report(y, p, n_resamples=50, random_state=0, output_dict=True)
    assert f"{report['errors']['ece']['estimate']:.4f}" in calibration_report(
        y, p, n_resamples=50, random_state=0
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"output_dict": "yes"}, "`output_dict` to be a bool"),
        ({"digits": -1}, "`digits` to be an integer >= 0"),
        ({"n_bins": 0}, "`n_bins` to be an integer >= 1"),
        ({"ci_method": "normal"}, "`ci_method` to be one of"),
        ({"convention": "positive"}, "`convention` to be one of"),
    ],
)
def test_bad_arguments(binary, kwargs, message):
    y, p = binary
    with pytest.raises(ValueError, match=message):
        calibration_report(y[:100], p[:100], n_resamples=10, **kwargs)


@pytest.mark.slow
def test_probabilities_of_zero_and_one_give_a_report_with_undefined_tests():
    # a fully grown tree on its own training data predicts probabilities 0 and 1
    X, y = load_breast_cancer(return_X_y=True)
    proba = DecisionTreeClassifier(random_state=0).fit(X, y).predict_proba(X)
    report = calibration_report(y, proba, n_resamples=20, random_state=0, output_dict=True)
    for key in ("spiegelhalter", "ks", "kuiper"):
        entry = report["tests"][key]
        assert np.isnan(entry["statistic"]) and np.isnan(entry["pvalue"])
        assert "every weighted score is 0 or 1" in entry["undefined"]
    assert report["errors"]["ece"]["estimate"] == 0.0
    text = calibration_report(y, proba, n_resamples=20, random_state=0)
    assert "Spiegelhalter               undefined" in text
    assert "Spiegelhalter: every weighted score is 0 or 1" in text
    assert "method='ks'" not in text
    # scores of 0, 1/2 and 1: only Spiegelhalter's statistic is undefined
    half = np.where(proba[:, 1] > 0.5, 0.5, 0.0)
    tests = calibration_report(
        y, half, n_resamples=20, random_state=0, convention="positive_class", output_dict=True
    )["tests"]
    assert "method='ks'" in tests["spiegelhalter"]["undefined"]
    assert tests["ks"] == dict(
        zip(
            ("statistic", "pvalue"),
            calibration_test(y, half, method="ks", convention="positive_class"),
            strict=True,
        )
    )


@pytest.mark.slow
def test_suspect_intervals_are_flagged_in_the_text_and_the_dictionary():
    # calibrated data: the plug-in errors are noise, which every replicate inflates
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(4000, 10))
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = (proba.cumsum(axis=1) < rng.random((4000, 1))).sum(axis=1).clip(0, 9)
    options = {"n_resamples": 100, "random_state": 0}
    report = calibration_report(y, proba, output_dict=True, **options)
    classwise = report["errors"]["classwise_ece"]
    assert classwise["estimate"] < classwise["low"]
    assert list(classwise["flags"]) == ["excludes_estimate"]
    assert report["errors"]["debiased_ce"]["flags"] == {}
    text = calibration_report(y, proba, **options)
    flagged = [line for line in text.splitlines() if line.startswith("classwise ECE")]
    assert flagged[0].endswith(")") and "(" in flagged[0][-5:]
    mark = flagged[0].split()[-1]
    assert f"{mark} classwise ECE: the interval lies above the estimate" in text


def test_the_decompositions_thread_runs_in_the_callers_numpy_and_sklearn_settings(monkeypatch):
    import sklearn

    from sklearn_calib.metrics._statistics import _calibration_report

    seen = {}
    compute = _calibration_report._decompositions_and_tests

    def recorded(data, convention):
        seen["errors"] = np.geterr()["divide"]
        seen["finite"] = sklearn.get_config()["assume_finite"]
        return compute(data, convention)

    monkeypatch.setattr(_calibration_report, "_decompositions_and_tests", recorded)
    y, p = np.array([0, 1, 1, 0]), np.array([0.2, 0.7, 0.6, 0.4])
    with np.errstate(divide="raise"), sklearn.config_context(assume_finite=True):
        calibration_report(y, p, n_resamples=20, random_state=0)
    assert seen == {"errors": "raise", "finite": True}
