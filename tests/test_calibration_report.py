"""The calibration report: its numbers are those of the functions it summarises."""

import numpy as np
import pytest

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
