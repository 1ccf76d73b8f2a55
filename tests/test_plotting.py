import sys

import matplotlib
import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.calibration import calibration_curve
from sklearn.datasets import load_digits
from sklearn.exceptions import NotFittedError
from sklearn.naive_bayes import GaussianNB

from sklearn_calib.plotting import ReliabilityDisplay
from sklearn_calib.scoring import (
    expected_calibration_error,
    reliability_band,
    reliability_diagram,
    smooth_reliability_diagram,
)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def fitted():
    X, y = load_digits(return_X_y=True)
    return GaussianNB().fit(X[:300], y[:300]), X[300:600], y[300:600]


def test_from_estimator_draws_bars_gap_histogram_and_legend(fitted, tmp_path):
    estimator, X, y = fitted
    display = ReliabilityDisplay.from_estimator(estimator, X, y, n_bins=10)
    proba = estimator.predict_proba(X)
    diagram = reliability_diagram(y, proba, n_bins=10)
    heights = [patch.get_height() for patch in display.bars_.patches]
    np.testing.assert_allclose(heights, np.nan_to_num(diagram.accuracy))
    tops = [p.get_y() + p.get_height() for p in display.gap_bars_.patches]
    filled = diagram.count > 0
    np.testing.assert_allclose(np.array(tops)[filled], diagram.mean_confidence[filled])
    fractions = [patch.get_height() for patch in display.hist_bars_.patches]
    np.testing.assert_allclose(fractions, diagram.count / len(y))
    ece = expected_calibration_error(y, proba, n_bins=10)
    labels = display.ax_.get_legend_handles_labels()[1]
    assert f"GaussianNB (ECE = {100 * ece:.2f} %)" in labels
    assert display.line_ is not None and display.hist_ax_.figure is display.figure_
    path = tmp_path / "reliability.png"
    display.figure_.savefig(path)
    assert path.stat().st_size > 1000


def test_from_predictions_on_given_axes_without_histogram():
    figure, ax = plt.subplots()
    y = [0, 1, 1, 0]
    proba = [0.1, 0.8, 0.4, 0.3]
    display = ReliabilityDisplay.from_predictions(
        y, proba, n_bins=5, ax=ax, name="model", ref_line=False, color="tab:green"
    )
    assert display.ax_ is ax and display.figure_ is figure
    assert display.hist_ax_ is None and display.hist_bars_ is None and display.line_ is None
    assert len(display.bars_.patches) == 5
    green = matplotlib.colors.to_rgb("tab:green")
    assert all(patch.get_facecolor()[:3] == green for patch in display.bars_.patches)
    # empty bins are drawn with height 0
    diagram = reliability_diagram(y, proba, n_bins=5)
    assert [p.get_height() for p in display.bars_.patches][0] == 0 and diagram.count[0] == 0


def test_two_diagrams_on_one_axes_share_the_diagonal_and_differ_in_colour():
    figure, ax = plt.subplots()
    rng = np.random.default_rng(0)
    proba = rng.random(200)
    y = (rng.random(200) < proba).astype(int)
    first = ReliabilityDisplay.from_predictions(y, proba, ax=ax, name="A")
    second = ReliabilityDisplay.from_predictions(y, proba**2, ax=ax, name="B")
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == [
        f"A (ECE = {100 * first.ece:.2f} %)",
        "Gap to confidence",
        f"B (ECE = {100 * second.ece:.2f} %)",
        "Perfectly calibrated",
    ]
    assert len(ax.lines) == 1 and second.line_ is None
    first_colour = first.bars_.patches[0].get_facecolor()
    second_colour = second.bars_.patches[0].get_facecolor()
    assert first_colour == matplotlib.colors.to_rgba("C0")
    assert second_colour == matplotlib.colors.to_rgba("C1", alpha=0.5)
    plt.close(figure)


def test_the_legend_sits_above_the_axes_and_names_every_element(fitted):
    """The legend hides no bar, and a figure made by the display has no empty margin."""
    estimator, X, y = fitted
    display = ReliabilityDisplay.from_estimator(
        estimator, X, y, n_bins=10, confidence_level=0.9, smooth=True, random_state=0
    )
    figure = display.figure_
    assert isinstance(figure.get_layout_engine(), matplotlib.layout_engine.ConstrainedLayoutEngine)
    figure.canvas.draw()
    legend = display.ax_.get_legend()
    box = legend.get_window_extent()
    axes_box = display.ax_.get_window_extent()
    assert box.y0 >= axes_box.y1  # above the axes, so over no bar
    assert figure.bbox.height - box.y1 < 0.03 * figure.bbox.height  # no strip above it
    labels = [text.get_text() for text in legend.get_texts()]
    assert labels == [
        f"GaussianNB (ECE = {100 * display.ece:.2f} %)",
        "Gap to confidence",
        "90 % Clopper-Pearson interval (pointwise)",
        f"Smoothed (h = {display.smooth.bandwidth:.3g})",
        "Perfectly calibrated",
        "90 % bootstrap band",
    ]
    # the bars let the band show through; the curve and band are drawn over them
    assert display.bars_.patches[0].get_alpha() == 0.5
    assert display.smooth_band_.get_zorder() > display.bars_.patches[0].get_zorder()
    assert display.smooth_line_.get_zorder() > display.smooth_band_.get_zorder()
    plain = ReliabilityDisplay.from_estimator(estimator, X, y, n_bins=10)
    assert plain.bars_.patches[0].get_alpha() == 1.0


@pytest.mark.slow
def test_the_smooth_top_label_curve_starts_at_one_over_k_and_only_where_there_is_data():
    """No top-label confidence of K classes lies below 1/K, and the curve is not drawn
    where no sample lies within a bandwidth (there it would be the kernel's guess)."""
    rng = np.random.default_rng(0)
    n, k = 2000, 10
    logits = rng.normal(size=(n, k)) * 4
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = (proba.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1)
    diagram = smooth_reliability_diagram(y, proba, confidence_level=0.9, random_state=0)
    assert diagram.mesh[0] == pytest.approx(1 / k) and diagram.mesh[-1] == 1.0
    assert np.isfinite(diagram.low).all() and np.isfinite(diagram.accuracy).all()
    binary = smooth_reliability_diagram(y == 0, proba[:, 0])
    assert binary.mesh[0] == 0.5  # the top-label confidence of two classes
    positive = smooth_reliability_diagram(y == 0, proba[:, 0], convention="positive_class")
    assert positive.mesh[0] == 0.0

    display = ReliabilityDisplay.from_predictions(
        y, proba, confidence_level=0.9, smooth=True, random_state=0
    )
    x = display.smooth_line_.get_xdata()
    drawn = np.isfinite(display.smooth_line_.get_ydata())
    confidence = proba.max(axis=1)
    assert x[0] >= 1 / k and x[drawn].min() >= 1 / k
    # drawn exactly where at least one sample is expected within a bandwidth
    density = diagram.density / (1 - 1 / k)
    expected = n * density * 2 * diagram.bandwidth >= 1
    np.testing.assert_array_equal(drawn, expected)
    assert x[drawn].min() < np.quantile(confidence, 0.01)  # the data's range is drawn
    assert not drawn[0] and drawn[-1]  # no confidence near 1/K = 0.1 here
    assert confidence.min() > x[np.argmax(drawn)] - 2 * diagram.bandwidth
    np.testing.assert_allclose(display.smooth_line_.get_ydata()[drawn], diagram.accuracy[drawn])
    band = display.smooth_band_.get_paths()
    assert len(band) >= 1
    assert min(path.vertices[:, 0].min() for path in band) >= x[drawn].min() - 1e-12


def test_a_histogram_axes_alone_is_rejected():
    figure, hist_ax = plt.subplots()
    with pytest.raises(ValueError, match="Expected `ax` together with `hist_ax`"):
        ReliabilityDisplay.from_predictions([0, 1], [0.2, 0.7], hist_ax=hist_ax)
    plt.close(figure)


def test_from_estimator_rejects_a_non_classifier_and_an_unfitted_one(fitted):
    _, X, y = fitted
    with pytest.raises(TypeError, match="classifier with `predict_proba`, got object"):
        ReliabilityDisplay.from_estimator(object(), X, y)
    with pytest.raises(NotFittedError):
        ReliabilityDisplay.from_estimator(GaussianNB(), X, y)


def test_missing_matplotlib_gives_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        ReliabilityDisplay.from_predictions([0, 1], [0.2, 0.9])


@pytest.mark.slow
def test_unknown_keywords_are_rejected_with_the_valid_names():
    # Unknown names reached matplotlib's bars and failed deep inside
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['marker'\].*'color'"):
        ReliabilityDisplay.from_predictions([0, 1, 1], [0.2, 0.7, 0.6], marker="o")
    with pytest.raises(TypeError, match=r"\['width'\]"):
        ReliabilityDisplay.from_predictions([0, 1, 1], [0.2, 0.7, 0.6], width=0.1)
    assert plt.get_fignums() == []  # rejected before a figure is made
    # a line's colour keyword, as scikit-learn's CalibrationDisplay takes it, colours the bars
    display = ReliabilityDisplay.from_predictions([0, 1, 1], [0.2, 0.7, 0.6], c="tab:green")
    green = matplotlib.colors.to_rgb("tab:green")
    assert all(patch.get_facecolor()[:3] == green for patch in display.bars_.patches)
    display = ReliabilityDisplay.from_predictions([0, 1, 1], [0.2, 0.7, 0.6], lw=3, hatch="x")
    assert display.bars_.patches[0].get_linewidth() == 3


def test_pos_label_draws_scikit_learns_calibration_curve():
    X, y = load_digits(return_X_y=True)
    names = np.where(y < 5, "ham", "spam")
    estimator = GaussianNB().fit(X[:600], names[:600])
    X_test, y_test = X[600:1200], names[600:1200]
    for pos_label in ("spam", "ham"):
        display = ReliabilityDisplay.from_estimator(
            estimator, X_test, y_test, n_bins=10, pos_label=pos_label
        )
        column = list(estimator.classes_).index(pos_label)
        prob_true, prob_pred = calibration_curve(
            y_test, estimator.predict_proba(X_test)[:, column], n_bins=10, pos_label=pos_label
        )
        filled = display.count > 0
        np.testing.assert_allclose(display.accuracy[filled], prob_true)
        np.testing.assert_allclose(display.mean_confidence[filled], prob_pred)
        assert display.pos_label == pos_label
        assert display.ax_.get_ylabel() == f"Fraction of positives (Positive class: {pos_label})"
        assert pos_label in display.hist_ax_.get_xlabel()
    with pytest.raises(ValueError, match=r"`pos_label` to be one of the classes \['ham', 'spam'\]"):
        ReliabilityDisplay.from_estimator(estimator, X_test, y_test, pos_label="eggs")
    with pytest.raises(ValueError, match="binary problem for `pos_label`"):
        ReliabilityDisplay.from_predictions([0, 1, 2], np.eye(3), pos_label=1)


def test_clopper_pearson_error_bars_and_the_smooth_curve_with_its_band():
    rng = np.random.default_rng(1)
    p = rng.random(400)
    y = (rng.random(400) < p**1.5).astype(int)
    display = ReliabilityDisplay.from_predictions(
        y, p, n_bins=8, pos_label=1, confidence_level=0.9, smooth=True, random_state=0
    )
    diagram = reliability_diagram(y, p, n_bins=8, convention="positive_class")
    for b in np.flatnonzero(diagram.count > 0):
        count = int(diagram.count[b])
        successes = int(round(diagram.accuracy[b] * count))
        exact = binomtest(successes, count).proportion_ci(confidence_level=0.9, method="exact")
        assert display.accuracy_low[b] == pytest.approx(exact.low, abs=1e-9)
        assert display.accuracy_high[b] == pytest.approx(exact.high, abs=1e-9)
    assert display.errorbar_ is not None
    curve = smooth_reliability_diagram(
        y, p, convention="positive_class", confidence_level=0.9, random_state=0
    )
    np.testing.assert_allclose(display.smooth_line_.get_ydata(), curve.accuracy)
    assert display.smooth_band_ is not None
    assert "Smoothed" in display.ax_.get_legend_handles_labels()[1][0]
    # unit weights give the unweighted intervals (Kish's effective size is the count)
    weighted = reliability_diagram(
        y,
        p,
        n_bins=8,
        convention="positive_class",
        confidence_level=0.9,
        sample_weight=np.full(400, 0.3),
    )
    np.testing.assert_allclose(weighted.accuracy_low, display.accuracy_low)
    without = ReliabilityDisplay.from_predictions(y, p, n_bins=8)
    assert without.errorbar_ is None and without.smooth_line_ is None
    with pytest.raises(ValueError, match="`smooth` to be a bool"):
        ReliabilityDisplay.from_predictions(y, p, smooth="yes")


def test_simultaneous_band_is_drawn_beside_the_pointwise_intervals():
    rng = np.random.default_rng(0)
    p = rng.random(3000)
    y = np.where(rng.random(3000) < p, "spam", "ham")
    display = ReliabilityDisplay.from_predictions(
        y, p, pos_label="spam", confidence_level=0.9, band=True, n_bins=10
    )
    expected = reliability_band(y, p, pos_label="spam", confidence_level=0.9)
    np.testing.assert_array_equal(display.band.upper, expected.upper)
    # the polygon follows the steps: lower from the left, upper from the right score
    vertices = display.band_.get_paths()[0].vertices
    assert vertices[:, 1].min() == expected.lower.min()
    labels = [text.get_text() for text in display.ax_.get_legend().get_texts()]
    assert "90 % Clopper-Pearson interval (pointwise)" in labels
    assert "90 % simultaneous band (whole curve)" in labels
    plain = ReliabilityDisplay.from_predictions(y, p, pos_label="spam")
    assert plain.band_ is None
    with pytest.raises(ValueError, match="Expected no `sample_weight` with band=True"):
        ReliabilityDisplay.from_predictions(y, p, pos_label="spam", band=True, sample_weight=p)
    with pytest.raises(ValueError, match="Expected `band` to be a bool, got 1"):
        ReliabilityDisplay.from_predictions(y, p, pos_label="spam", band=1)
