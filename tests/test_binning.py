import numpy as np
import pytest

from sklearn_calib import classwise_calibration_error
from sklearn_calib.metrics._core._binning import (
    assign_bins,
    bin_sums,
    quantile_bin_edges,
    uniform_bin_edges,
)


def test_uniform_edges_and_rule_at_exact_edges():
    edges = uniform_bin_edges(15)
    assert edges.shape == (16,)
    values = np.concatenate([[0.0, 1.0], edges[1:-1]])
    index = assign_bins(values, edges)
    # 0 lies in the first bin, 1 in the last, and an edge value in the bin below it.
    assert index[0] == 0
    assert index[1] == 14
    np.testing.assert_array_equal(index[2:], np.arange(14))


def test_rule_just_above_an_edge_moves_up():
    edges = uniform_bin_edges(10)
    values = np.nextafter(edges[1:-1], 2.0)
    np.testing.assert_array_equal(assign_bins(values, edges), np.arange(1, 10))


def test_float32_values_compare_in_their_own_precision():
    edges = uniform_bin_edges(5)
    values = np.array([0.2, 0.4, 0.6, 0.8], dtype=np.float32)
    np.testing.assert_array_equal(assign_bins(values, edges), [0, 1, 2, 3])


def test_quantile_edges_give_equal_groups_and_keep_ties_together():
    values = np.arange(1, 11) / 10.0
    edges = quantile_bin_edges(values, 5)
    np.testing.assert_allclose(edges, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    np.testing.assert_array_equal(np.bincount(assign_bins(values, edges), minlength=5), [2] * 5)
    tied = np.array([0.5, 0.5, 0.5, 0.9])
    edges = quantile_bin_edges(tied, 2)
    np.testing.assert_array_equal(np.bincount(assign_bins(tied, edges), minlength=2), [3, 1])


def test_quantile_edges_with_fewer_values_than_bins():
    values = np.array([0.3, 0.7])
    edges = quantile_bin_edges(values, 4)
    # groups of sizes 1, 1, 0, 0: the last edges repeat the largest value, those bins are empty
    np.testing.assert_array_equal(edges, [0.0, 0.3, 0.7, 0.7, 1.0])
    np.testing.assert_array_equal(assign_bins(values, edges), [0, 1])
    with pytest.raises(ValueError, match="at least one value"):
        quantile_bin_edges(np.array([]), 3)


def test_bin_sums_keep_empty_bins_and_apply_weights():
    index = np.array([0, 0, 2])
    conf = np.array([0.1, 0.3, 0.9])
    counts, (sums,) = bin_sums(index, 4, [conf])
    np.testing.assert_allclose(counts, [2, 0, 1, 0])
    np.testing.assert_allclose(sums, [0.4, 0, 0.9, 0])
    counts, (sums,) = bin_sums(index, 4, [conf], sample_weight=np.array([1.0, 3.0, 0.5]))
    np.testing.assert_allclose(counts, [4, 0, 0.5, 0])
    np.testing.assert_allclose(sums, [1.0, 0, 0.45, 0])


def test_weighted_quantile_edges():
    rng = np.random.default_rng(0)
    values = rng.uniform(size=23)
    # Unit weights and any constant weights give the unweighted edges.
    expected = quantile_bin_edges(values, 4)
    np.testing.assert_array_equal(quantile_bin_edges(values, 4, np.ones(23)), expected)
    np.testing.assert_array_equal(quantile_bin_edges(values, 4, np.full(23, 0.1)), expected)
    # Zero-weight values never become edges.
    weight = np.ones(23)
    weight[values > 0.5] = 0.0
    edges = quantile_bin_edges(values, 4, weight)
    assert set(edges[1:-1]) <= set(values[values <= 0.5])
    assert np.all(np.diff(edges) >= 0)
    # One heavy value takes the mass of the bins it covers.
    weight = np.ones(23)
    heavy = int(np.argmax(values))
    weight[heavy] = 1000.0
    edges = quantile_bin_edges(values, 4, weight)
    assert np.all(edges[1:-1] == values[heavy])


def test_integer_weighted_quantile_edges_equal_repeated_values():
    rng = np.random.default_rng(1)
    values = rng.uniform(size=17)
    weight = rng.integers(0, 5, size=17)
    for n_bins in (2, 4, 5, 15):
        np.testing.assert_array_equal(
            quantile_bin_edges(values, n_bins, weight.astype(np.float64)),
            quantile_bin_edges(np.repeat(values, weight), n_bins),
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_bins", [1, 2, 15, 100, 300])
def test_lookup_path_matches_binary_search(dtype, n_bins):
    rng = np.random.default_rng(n_bins)
    n = 1 << 16
    edges = uniform_bin_edges(n_bins)
    values = np.concatenate(
        [
            rng.random(n - 200),
            rng.random(100) ** 40,
            edges,
            np.nextafter(edges.astype(dtype), 2.0),
            np.nextafter(edges.astype(dtype), -1.0).clip(0),
            [-0.0, 0.0, 1.0, 1.0005, 3.0, np.inf],
        ]
    ).astype(dtype)
    expected = np.searchsorted(edges[1:-1].astype(dtype), values, side="left")
    np.testing.assert_array_equal(assign_bins(values, edges), expected)
    strided = values[::2]
    np.testing.assert_array_equal(assign_bins(strided, edges), expected[::2])
    quantile = quantile_bin_edges(values, n_bins)
    expected = np.searchsorted(quantile[1:-1].astype(dtype), values, side="left")
    np.testing.assert_array_equal(assign_bins(values, quantile), expected)


def test_lookup_path_with_tied_edges_and_out_of_range_values():
    values = np.full(1 << 16, 0.5)
    values[:10] = np.linspace(0, 1, 10)
    edges = quantile_bin_edges(values, 8)
    expected = np.searchsorted(edges[1:-1], values, side="left")
    np.testing.assert_array_equal(assign_bins(values, edges), expected)
    values[0] = -0.25  # a negative value sends the call to the binary search
    index = assign_bins(values, uniform_bin_edges(4))
    assert index[0] == 0 and index[9] == 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1000, 1 << 15])
def test_negative_zero_is_in_the_first_bin_on_both_paths(dtype, n):
    values = np.where(np.arange(n) % 2 == 0, -0.0, 0.95).astype(dtype)
    assert np.signbit(values[0])
    index = assign_bins(values, uniform_bin_edges(15))
    np.testing.assert_array_equal(index[::2], 0)
    np.testing.assert_array_equal(index[1::2], 14)
    probs = np.column_stack([1 - values, values])
    labels = (values == 0).astype(int)
    assert classwise_calibration_error(labels, probs) == pytest.approx(
        classwise_calibration_error(labels, probs + 0.0)
    )
    assert classwise_calibration_error(labels, probs) == pytest.approx(0.975)


#: Rows within the row-sum tolerance whose top entry exceeds 1; with 3 samples and 4 bins
#: the largest confidence is an inner quantile edge.
ABOVE_ONE = np.array([[0.4, 0.6], [0.3, 0.7], [1.0004, 0.0]])
ABOVE_ONE_LABELS = np.array([1, 1, 0])


def test_quantile_edges_stay_in_the_unit_interval_for_entries_rounded_above_one():
    from sklearn_calib import HistogramBinning, adaptive_calibration_error, reliability_diagram

    clipped = np.minimum(ABOVE_ONE, 1.0)
    diagram = reliability_diagram(ABOVE_ONE_LABELS, ABOVE_ONE, n_bins=4, strategy="quantile")
    np.testing.assert_array_equal(diagram.edges, [0.0, 0.6, 0.7, 1.0, 1.0])
    assert np.nanmax(diagram.mean_confidence) == 1.0
    # an entry above 1 by rounding counts as 1, as the 1-D positive-class column does
    assert adaptive_calibration_error(ABOVE_ONE_LABELS, ABOVE_ONE, n_bins=4) == (
        adaptive_calibration_error(ABOVE_ONE_LABELS, clipped, n_bins=4)
    )
    for multi_class in ("top_label", "classwise"):
        binning = HistogramBinning(
            n_bins=4, strategy="quantile", multi_class=multi_class, input="probabilities"
        )
        edges = binning.fit(ABOVE_ONE, ABOVE_ONE_LABELS).bin_edges_
        assert (np.diff(edges) >= 0).all() and (edges[..., -1] == 1).all(), edges


def test_reliability_display_draws_no_negative_width():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sklearn_calib import ReliabilityDisplay

    display = ReliabilityDisplay.from_predictions(
        ABOVE_ONE_LABELS, ABOVE_ONE, n_bins=4, strategy="quantile"
    )
    for bars in (display.bars_, display.gap_bars_, display.hist_bars_):
        assert min(patch.get_width() for patch in bars.patches) >= 0
        assert max(patch.get_x() + patch.get_width() for patch in bars.patches) == 1.0
    with pytest.raises(ValueError, match=r"`edges` to be finite, non-decreasing"):
        ReliabilityDisplay([0.0, 0.6, 1.0004, 1.0], [1, 1, 1], [0.6, 0.8, 1.0], [1, 1, 0]).plot()
    plt.close("all")
