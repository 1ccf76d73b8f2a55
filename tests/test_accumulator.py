"""CalibrationAccumulator: fixed-memory sums that equal the in-memory metrics, merge in any
order and chunking, pickle, run on torch tensors, and resample by the Poisson bootstrap."""

import pickle

import numpy as np
import pytest
import torch

from sklearn_calib.metrics import (
    CalibrationAccumulator,
    adaptive_calibration_error,
    brier_score,
    calibration_test,
    classwise_calibration_error,
    debiased_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    reliability_diagram,
    smooth_calibration_error,
    smooth_ece,
    top_label_accuracy,
    top_label_calibration_error,
)
from sklearn_calib.metrics._core._binning import assign_bins, uniform_bin_edges
from sklearn_calib.metrics._core._poisson import poisson_counts, seed_key, torch_poisson_counts
from sklearn_calib.metrics._functions._binned import _TOP_LABEL_ROWS, binned_sums
from sklearn_calib.metrics._functions._predictions import check_predictions
from sklearn_calib.metrics._fused import _bins, _check

ALL_INTERVALS = ("ece", "mce", "accuracy", "nll", "brier", "classwise_ece", "smooth_ece")


def overconfident(n, n_classes, seed=0, dtype=np.float64):
    """Probabilities sharper than the softmax the labels are drawn from."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, n_classes)) * 2.5
    proba = np.exp(logits - logits.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    labels = np.argmax(logits / 1.6 + rng.gumbel(size=(n, n_classes)), axis=1)
    return labels, proba.astype(dtype), rng.random(n)


def accumulate(y, proba, weight=None, chunks=(0,), **options):
    """One accumulator per chunk (rows ``chunks[i]:chunks[i + 1]``), merged in order."""
    bounds = list(chunks) + [len(y)]
    merged = None
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        part = CalibrationAccumulator(random_state=7, **options)
        part.update(
            y[start:stop],
            proba[start:stop],
            None if weight is None else weight[start:stop],
            row_ids=start,
        )
        merged = part if merged is None else merged.merge(part)
    return merged


def relative(a, b):
    return abs(a - b) / abs(b)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.slow
def test_binned_metrics_equal_the_in_memory_functions(weighted, dtype):
    y, proba, weight = overconfident(6000, 4, dtype=dtype)
    weight = weight if weighted else None
    result = accumulate(y, proba, weight, chunks=(0, 1000, 3500)).compute()
    kw = {"sample_weight": weight}
    expected = {
        "ece": expected_calibration_error(y, proba, **kw),
        "mce": maximum_calibration_error(y, proba, **kw),
        "classwise_ece": classwise_calibration_error(y, proba, **kw),
        "top_label_ece": top_label_calibration_error(y, proba, **kw),
        "accuracy": top_label_accuracy(y, proba, **kw),
        "nll": negative_log_likelihood(y, proba, **kw),
        "brier": brier_score(y, proba, **kw),
    }
    for name, value in expected.items():
        assert relative(result[name], value) <= 1e-12, name
    statistic, pvalue = calibration_test(y, proba, **kw)
    assert relative(result.spiegelhalter.statistic, statistic) <= 1e-12
    diagram = reliability_diagram(y, proba, confidence_level=0.9, **kw)
    ours = accumulate(y, proba, weight).compute(confidence_level=0.9).reliability
    for key in diagram:
        np.testing.assert_allclose(ours[key], diagram[key], rtol=1e-12, equal_nan=True)


#: The accumulator's exact or nested results, compared with the in-memory functions.
EXACT = {
    "ece": expected_calibration_error,
    "mce": maximum_calibration_error,
    "classwise_ece": classwise_calibration_error,
    "top_label_ece": top_label_calibration_error,
    "accuracy": top_label_accuracy,
    "nll": negative_log_likelihood,
    "brier": brier_score,
    "smooth_ece": smooth_ece,
}


@pytest.mark.parametrize("kind", ["counts", "zeros"])
@pytest.mark.slow
def test_weights_mean_what_they_mean_to_the_in_memory_functions(kind):
    y, proba, weight = overconfident(6000, 3, seed=11)
    rng = np.random.default_rng(1)
    if kind == "counts":  # integer weights count repeated rows (equal-mass bins)
        weight = rng.integers(0, 4, size=6000).astype(np.float64)
    else:  # rows of weight 0 stand for no sample (smECE's and SECE's epsilon)
        weight = np.where(rng.random(6000) < 0.3, 0.0, weight)
    result = accumulate(y, proba, weight, chunks=(0, 2500)).compute()
    for name, metric in EXACT.items():
        assert relative(result[name], metric(y, proba, sample_weight=weight)) <= 1e-12, name
    exact = adaptive_calibration_error(y, proba, sample_weight=weight)
    assert abs(result.adaptive_ece - exact) <= result.adaptive_ece_bound
    sece = smooth_calibration_error(y, proba, method="exact", sample_weight=weight)
    assert abs(result.sece - sece) <= result.sece_bound
    # rows of weight 0 change nothing, replicates included
    options = {"n_resamples": 20, "interval_metrics": ALL_INTERVALS}
    held = weight > 0
    kept = accumulate(y[held], proba[held], weight[held], **options).compute()
    extra = np.concatenate([weight[held], np.zeros(500)])
    padded = accumulate(np.r_[y[held], y[:500]], np.r_[proba[held], proba[:500]], extra, **options)
    padded = padded.compute()
    for name in (*EXACT, "adaptive_ece", "debiased_ce", "sece", "ks", "kuiper"):
        found, wanted = padded[name], kept[name]
        if name in ("ks", "kuiper"):
            found, wanted = found.statistic, wanted.statistic
        assert relative(found, wanted) <= 1e-12, name
    for name in ALL_INTERVALS:
        np.testing.assert_allclose(
            padded.intervals[name].replicates, kept.intervals[name].replicates, rtol=1e-12
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.slow
def test_the_log_loss_clips_at_the_machine_epsilon_of_the_dtype(dtype):
    y = np.array([0, 1, 1, 0])
    proba = np.array([[1.0, 0.0], [1.0, 0.0], [0.3, 0.7], [0.6, 0.4]], dtype=dtype)
    expected = negative_log_likelihood(y, proba)
    eps = float(np.finfo(dtype).eps)
    kept = proba[[2, 3], [1, 0]].astype(np.float64)
    hand = (-np.log(1 - eps) - np.log(eps) - np.log(kept).sum()) / 4
    assert relative(expected, hand) <= 1e-12
    found = CalibrationAccumulator().update(y, proba).compute().nll
    on_torch = CalibrationAccumulator().update(torch.as_tensor(y), torch.as_tensor(proba))
    assert relative(found, expected) <= 1e-15
    assert relative(on_torch.compute().nll, expected) <= 1e-15


@pytest.mark.slow
def test_positive_class_convention_equals_the_in_memory_functions():
    y, proba, weight = overconfident(3000, 2)
    result = accumulate(y, proba[:, 1], weight, convention="positive_class").compute()
    kw = {"sample_weight": weight, "convention": "positive_class"}
    assert relative(result.ece, expected_calibration_error(y, proba[:, 1], **kw)) <= 1e-12
    assert relative(result.smooth_ece, smooth_ece(y, proba[:, 1], **kw)) <= 1e-12


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.slow
def test_equal_mass_bins_and_tests_are_within_their_bounds(weighted):
    y, proba, weight = overconfident(8000, 3, seed=1)
    weight = weight if weighted else None
    result = accumulate(y, proba, weight, chunks=(0, 2000)).compute()
    kw = {"sample_weight": weight}
    exact = adaptive_calibration_error(y, proba, **kw)
    assert 0 < result.adaptive_ece_bound < 0.05
    assert abs(result.adaptive_ece - exact) <= result.adaptive_ece_bound
    # the value is the ECE over the reported (rounded) edges, by hand
    confidence = proba.max(axis=1)
    correct = proba.argmax(axis=1) == y
    w = np.ones(len(y)) if weight is None else weight
    bins = assign_bins(confidence, result.adaptive_edges)
    count = np.bincount(bins, w)
    gap = np.abs(np.bincount(bins, w * correct) - np.bincount(bins, w * confidence))
    assert relative(result.adaptive_ece, gap.sum() / count.sum()) <= 1e-12
    assert abs(result.debiased_ce - debiased_calibration_error(y, proba, **kw)) < 0.01
    for method in ("ks", "kuiper"):
        statistic, _ = calibration_test(y, proba, method=method, **kw)
        found = result[method]
        assert found.statistic <= statistic + 1e-9
        assert statistic - found.statistic <= found.bound


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.slow
def test_smooth_errors_are_within_their_bounds(weighted):
    y, proba, weight = overconfident(4000, 3, seed=2)
    weight = weight if weighted else None
    accumulator = accumulate(y, proba, weight, chunks=(0, 1500))
    kw = {"sample_weight": weight}
    result = accumulator.compute()
    error, bandwidth = smooth_ece(y, proba, return_bandwidth=True, **kw)
    assert bandwidth >= 0.01 and result.smooth_ece_bandwidth == bandwidth
    assert result.smooth_ece_bound == 0.0  # the grids nest: equal up to rounding
    assert relative(result.smooth_ece, error) <= 1e-12
    # smECE's grid for h = 0.003 (3334 points) does not nest in the 400,001-point one
    small = accumulator.compute(smooth_bandwidth=0.003)
    assert 0 < small.smooth_ece_bound < 1e-2
    assert (
        abs(small.smooth_ece - smooth_ece(y, proba, bandwidth=0.003, **kw))
        <= small.smooth_ece_bound
    )
    exact = smooth_calibration_error(y, proba, method="exact", **kw)
    assert 0 < result.sece_bound < 1e-5
    assert abs(result.sece - exact) <= result.sece_bound


@pytest.mark.slow
def test_merge_order_does_not_matter_and_pickles_round_trip():
    y, proba, weight = overconfident(5000, 3, seed=3)
    parts = [
        CalibrationAccumulator(
            n_resamples=20, interval_metrics=ALL_INTERVALS, random_state=1
        ).update(y[s : s + 1000], proba[s : s + 1000], weight[s : s + 1000], row_ids=s)
        for s in range(0, 5000, 1000)
    ]
    forward, backward = pickle.loads(pickle.dumps(parts[0])), pickle.loads(pickle.dumps(parts[-1]))
    for part in parts[1:]:
        forward.merge(part)
    for part in parts[-2::-1]:
        backward.merge(part)
    first, second = forward.compute(), backward.compute()
    for name in ("ece", "classwise_ece", "smooth_ece", "sece", "nll", "adaptive_ece"):
        assert relative(first[name], second[name]) <= 1e-13, name
    for name in ALL_INTERVALS:
        np.testing.assert_allclose(
            first.intervals[name].replicates, second.intervals[name].replicates, rtol=1e-12
        )
    restored = pickle.loads(pickle.dumps(forward)).compute()
    assert restored.ece == first.ece and restored.intervals["ece"].low == first.intervals["ece"].low


def test_poisson_bootstrap_merges_exactly_across_chunkings():
    y, proba, _ = overconfident(3000, 3, seed=4)
    options = {"n_resamples": 50, "interval_metrics": ALL_INTERVALS}
    whole = accumulate(y, proba, **options)
    rng = np.random.default_rng(0)
    chunked = accumulate(y, proba, chunks=(0, 17, 990, 991, 2500), **options)
    reordered = None
    for start, stop in rng.permutation([(0, 700), (700, 1400), (1400, 3000)]):
        part = CalibrationAccumulator(random_state=7, **options)
        part.update(y[start:stop], proba[start:stop], row_ids=start)
        reordered = part if reordered is None else reordered.merge(part)
    # the first cells are the top-label bins: each replicate's weight there is a count
    counts = whole._state["replicates"][:15, 0]
    assert np.array_equal(counts, np.round(counts)) and counts.sum() > 0
    for other in (chunked, reordered):
        assert np.array_equal(other._state["replicates"][:15, 0], counts)
        np.testing.assert_allclose(
            other._state["replicates"], whole._state["replicates"], rtol=1e-12, atol=1e-12
        )


def test_poisson_counts_depend_on_the_row_id_only_and_follow_poisson_one():
    key = seed_key(11)
    ids = np.arange(20000) * 7 + 3
    counts = poisson_counts(ids, key, 64)
    assert np.array_equal(poisson_counts(ids[::-1], key, 64)[:, ::-1], counts)
    assert np.array_equal(poisson_counts(ids[:500], key, 64), counts[:, :500])
    assert np.array_equal(torch_poisson_counts(torch.as_tensor(ids), key, 64).numpy(), counts)
    assert not np.array_equal(poisson_counts(ids, seed_key(12), 64), counts)
    frequencies = np.bincount(counts.ravel(), minlength=4)[:4] / counts.size
    expected = np.exp(-1) / np.array([1, 1, 2, 6])
    np.testing.assert_allclose(frequencies, expected, atol=0.003)
    correlation = np.corrcoef(counts[0].astype(float), counts[1].astype(float))[0, 1]
    assert abs(correlation) < 0.02


@pytest.mark.slow
def test_numpy_and_numba_kernels_give_the_same_sums(monkeypatch):
    pytest.importorskip("numba")
    y, proba, weight = overconfident(300000, 5, seed=5, dtype=np.float32)
    proba[:200] = [0.3, 0.3, 0.2, 0.1, 0.1]  # tied maxima: the first column is predicted
    y[:200] = np.arange(200) % 2
    for sample_weight in (None, weight):
        data = check_predictions(y, proba, sample_weight=sample_weight)
        fused = _bins.top_label_sums(data, 15, _TOP_LABEL_ROWS)
        score, outcome = data.scores("top_label")
        _, *expected = binned_sums(score, outcome, data.sample_weight, 15, "uniform")
        for found, wanted in zip(fused, expected, strict=True):
            assert np.array_equal(found, wanted)
        ece = expected_calibration_error(y, proba, sample_weight=sample_weight)
        monkeypatch.setenv("SKLEARN_CALIB_NUMBA", "0")
        fresh = check_predictions(y, proba, sample_weight=sample_weight)
        numpy_sums = _bins.top_label_sums(fresh, 15, _TOP_LABEL_ROWS)
        for found, wanted in zip(numpy_sums, expected, strict=True):
            assert np.array_equal(found, wanted)
        assert expected_calibration_error(y, proba, sample_weight=sample_weight) == ece
        monkeypatch.delenv("SKLEARN_CALIB_NUMBA")
    options = {"n_resamples": 33, "interval_metrics": ALL_INTERVALS}
    fast = accumulate(y[:3000], proba[:3000], weight[:3000], **options)._state["replicates"]
    monkeypatch.setenv("SKLEARN_CALIB_NUMBA", "0")
    slow = accumulate(y[:3000], proba[:3000], weight[:3000], **options)._state["replicates"]
    assert np.array_equal(fast, slow)


def test_the_numba_check_keeps_the_top_label_scores_the_numpy_path_computes(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.delenv("SKLEARN_CALIB_NUMBA", raising=False)  # numba's check, whatever the switch
    y, proba, _ = overconfident(100000, 5, seed=3, dtype=np.float32)
    proba[:300] = [0.3, 0.3, 0.2, 0.1, 0.1]  # tied maxima: argmax takes the first column
    y[:300] = np.arange(300) % 2
    data = check_predictions(y, proba)
    assert data.has_scores("top_label") and data.proba is proba
    monkeypatch.setenv("SKLEARN_CALIB_NUMBA", "0")
    plain = check_predictions(y, proba)
    assert not plain.has_scores("top_label")
    for found, wanted in zip(data.scores(), plain.scores(), strict=True):
        assert found.dtype == wanted.dtype and np.array_equal(found, wanted)
    assert data.scores()[1][:300].tolist() == (y[:300] == 0).tolist()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_numba_check_passes_only_rows_the_checks_return_unchanged(monkeypatch, dtype):
    pytest.importorskip("numba")
    monkeypatch.delenv("SKLEARN_CALIB_NUMBA", raising=False)
    y, proba, _ = overconfident(20000, 4, seed=4, dtype=dtype)
    assert _check.takes_probabilities(proba)
    assert _check.checked_top_label(proba, y, 1e-3) is not None
    for entry in (np.nan, np.inf, -np.inf, -1e-9):
        broken = proba.copy()
        broken[12345, 2] = entry
        assert _check.checked_top_label(broken, y, 1e-3) is None
        with pytest.raises(ValueError, match="NaN|negative"):
            check_predictions(y, broken)
    rounded = proba.copy()
    rounded[9] = [1.0 + 2e-4, 0.0, 0.0, 0.0]  # within the tolerance, but clipped by the checks
    assert _check.checked_top_label(rounded, y, 1e-3) is None
    assert check_predictions(y, rounded).proba[9, 0] == 1.0
    off = proba.copy()
    off[777] *= 1.01  # a row sum outside the tolerance
    assert _check.checked_top_label(off, y, 1e-3) is None
    assert _check.checked_top_label(off, y, 0.02) is not None
    # bad probabilities are named before bad labels
    with pytest.raises(ValueError, match="sum to 1"):
        check_predictions(y[:-1], off)
    with pytest.raises(ValueError, match="same length"):
        check_predictions(y[:-1], proba)
    # small, Fortran-ordered or 1-D input goes to the numpy checks
    assert not _check.takes_probabilities(proba[:100])
    assert not _check.takes_probabilities(np.asfortranarray(proba))
    assert not _check.takes_probabilities(proba[:, 1])


@pytest.mark.slow
def test_read_only_and_memory_mapped_probabilities_take_the_numba_check(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.delenv("SKLEARN_CALIB_NUMBA", raising=False)
    y, proba, weight = overconfident(30000, 6, seed=6, dtype=np.float32)
    np.save(tmp_path / "proba.npy", proba)
    mapped = np.load(tmp_path / "proba.npy", mmap_mode="r")
    read_only = proba.copy()
    read_only.setflags(write=False)
    for array in (mapped, read_only):
        assert _check.takes_probabilities(array)
        assert check_predictions(y, array).has_scores("top_label")
    monkeypatch.setenv("SKLEARN_CALIB_NUMBA", "0")
    expected = expected_calibration_error(y, proba, sample_weight=weight)
    monkeypatch.delenv("SKLEARN_CALIB_NUMBA")
    for array in (mapped, read_only):
        assert expected_calibration_error(y, array, sample_weight=weight) == expected


def test_the_numba_ece_takes_the_checked_probabilities():
    pytest.importorskip("numba")
    y, proba, _ = overconfident(5000, 3, seed=10)
    for bad in (np.nan, -0.1, 1.5):
        broken = proba.copy()
        broken[17, 1] = bad
        with pytest.raises(ValueError, match="NaN|negative|sum to 1"):
            expected_calibration_error(y, broken)
    rounded = proba.copy()
    rounded[3] = [1.0 + 2e-4, 0.0, 0.0]  # within the tolerance: clipped to 1 by the checks
    clipped = rounded.copy()
    clipped[3, 0] = 1.0
    assert expected_calibration_error(y, rounded) == expected_calibration_error(y, clipped)
    # a Fortran-ordered copy takes the numpy path, with the same sums
    ece = expected_calibration_error(y, proba)
    assert expected_calibration_error(y, np.asfortranarray(proba)) == ece


@pytest.mark.slow
def test_torch_batches_on_their_device_equal_numpy_batches():
    y, proba, weight = overconfident(4000, 4, seed=6, dtype=np.float32)
    options = {"n_resamples": 20, "interval_metrics": ALL_INTERVALS, "random_state": 3}
    on_numpy = CalibrationAccumulator(**options).update(y, proba, weight, row_ids=0).compute()
    on_torch = CalibrationAccumulator(**options)
    for start in range(0, 4000, 1000):
        rows = slice(start, start + 1000)
        on_torch.update(
            torch.as_tensor(y[rows]),
            torch.as_tensor(proba[rows]),
            torch.as_tensor(weight[rows]),
            row_ids=start,
        )
    assert isinstance(on_torch._state["top"], torch.Tensor)
    result = on_torch.compute()
    for name in ("ece", "mce", "classwise_ece", "top_label_ece", "nll", "brier", "smooth_ece"):
        assert relative(result[name], on_numpy[name]) <= 1e-12, name
    for name in ALL_INTERVALS:
        np.testing.assert_allclose(
            result.intervals[name].replicates, on_numpy.intervals[name].replicates, rtol=1e-12
        )
    restored = pickle.loads(pickle.dumps(on_torch))
    assert isinstance(restored._state["top"], np.ndarray)


@pytest.mark.slow
def test_logits_input_is_softmaxed():
    y, proba, _ = overconfident(2000, 3, seed=7)
    logits = np.log(proba) + 5.0
    result = CalibrationAccumulator(input="logits").update(y, logits).compute()
    assert relative(result.ece, expected_calibration_error(y, proba)) <= 1e-12
    tensor = CalibrationAccumulator(input="logits").update(
        torch.as_tensor(y), torch.as_tensor(logits)
    )
    assert relative(tensor.compute().ece, result.ece) <= 1e-12


def test_labels_map_to_columns_and_a_zero_weight_batch_is_allowed():
    y, proba, weight = overconfident(1000, 3, seed=8)
    names = np.array(["cat", "dog", "emu"])
    accumulator = CalibrationAccumulator(labels=names).update(names[y], proba, weight)
    accumulator.update(names[y[:10]], proba[:10], np.zeros(10))
    expected = expected_calibration_error(y, proba, sample_weight=weight)
    assert relative(accumulator.compute().ece, expected) <= 1e-12


def test_bad_input_gets_clear_errors():
    y, proba, _ = overconfident(100, 3)
    with pytest.raises(ValueError, match="n_resamples"):
        CalibrationAccumulator(n_resamples=-1)
    with pytest.raises(ValueError, match="metrics"):
        CalibrationAccumulator(metrics=["ece", "nope"])
    with pytest.raises(ValueError, match="sum to 1"):
        CalibrationAccumulator().update(y, proba * 2)
    with pytest.raises(ValueError, match="holds no rows"):
        CalibrationAccumulator().compute()
    first = CalibrationAccumulator(n_bins=10).update(y, proba)
    with pytest.raises(ValueError, match="same n_bins"):
        first.merge(CalibrationAccumulator(n_bins=15).update(y, proba))
    with pytest.raises(ValueError, match="3 classes"):
        first.update(y, proba[:, :2] / proba[:, :2].sum(axis=1, keepdims=True))
    numbered = CalibrationAccumulator(n_resamples=10, random_state=0).update(y, proba)
    with pytest.raises(ValueError, match="row_ids"):
        numbered.merge(CalibrationAccumulator(n_resamples=10, random_state=0).update(y, proba))
    with pytest.raises(ValueError, match="random_state"):
        numbered.merge(CalibrationAccumulator(n_resamples=10, random_state=1))
    deferred = CalibrationAccumulator().update(
        torch.as_tensor(y), torch.as_tensor(np.where(proba > 0.5, np.nan, proba))
    )
    with pytest.raises(ValueError, match="non-finite or negative"):
        deferred.compute()
    labels_out = CalibrationAccumulator().update(torch.as_tensor(y + 3), torch.as_tensor(proba))
    with pytest.raises(ValueError, match="labels outside"):
        labels_out.compute()


def _distributed_rank(rank, world_size, init_file, y, proba, weight, folder):
    """One rank: its share of rows (strided, as DistributedSampler), then all_reduce."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size
    )
    try:
        ids = np.arange(rank, len(y), world_size)
        accumulator = CalibrationAccumulator(
            n_resamples=40, interval_metrics=ALL_INTERVALS, random_state=5
        )
        if rank == 0:  # one rank sums torch tensors, the other numpy arrays
            accumulator.update(
                torch.as_tensor(y[ids]),
                torch.as_tensor(proba[ids]),
                torch.as_tensor(weight[ids]),
                row_ids=torch.as_tensor(ids),
            )
        else:
            accumulator.update(y[ids], proba[ids], weight[ids], row_ids=ids)
        accumulator.all_reduce()
        with open(f"{folder}/{rank}.pkl", "wb") as file:
            pickle.dump(accumulator.compute(), file)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_all_reduce_over_two_gloo_processes_equals_one_process(tmp_path):
    y, proba, weight = overconfident(3000, 4, seed=9)
    torch.multiprocessing.spawn(
        _distributed_rank,
        args=(2, tmp_path / "init", y, proba, weight, tmp_path),
        nprocs=2,
        join=True,
    )
    single = (
        CalibrationAccumulator(n_resamples=40, interval_metrics=ALL_INTERVALS, random_state=5)
        .update(y, proba, weight)
        .compute()
    )
    for rank in range(2):
        with open(tmp_path / f"{rank}.pkl", "rb") as file:
            merged = pickle.load(file)
        assert merged.n_samples == 3000
        for name in ("ece", "mce", "classwise_ece", "top_label_ece", "nll", "smooth_ece", "sece"):
            assert relative(merged[name], single[name]) <= 1e-12, name
        for name in ALL_INTERVALS:
            np.testing.assert_allclose(
                merged.intervals[name].replicates, single.intervals[name].replicates, rtol=1e-12
            )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_numba_ece_bins_scores_on_the_edges_as_numpy_does(monkeypatch, dtype):
    pytest.importorskip("numba")
    rng = np.random.default_rng(6)
    edges = uniform_bin_edges(15).astype(dtype)
    # top-label scores exactly on the edges (those at or above 1/2), and 1
    top = np.maximum(edges[rng.integers(0, 16, 70_000)], dtype(0.5))
    proba = np.column_stack([top, 1 - top]).astype(dtype)
    y, weight = rng.integers(0, 2, 70_000), rng.random(70_000)
    found = {}
    for switch in ("1", "0"):
        monkeypatch.setenv("SKLEARN_CALIB_NUMBA", switch)
        found[switch] = [
            expected_calibration_error(y, proba, sample_weight=w) for w in (None, weight)
        ]
    assert found["1"] == found["0"]


@pytest.mark.slow
def test_merge_aligns_the_columns_of_the_same_labels_in_another_order():
    y, proba, weight = overconfident(3000, 3, seed=12)
    names = np.array(["cat", "dog", "emu"])
    order = [2, 0, 1]
    options = {"n_resamples": 20, "interval_metrics": ("ece", "classwise_ece"), "random_state": 4}
    first = CalibrationAccumulator(labels=names, **options)
    first.update(names[y[:1200]], proba[:1200], weight[:1200], row_ids=0)
    second = CalibrationAccumulator(labels=names[order], **options)
    second.update(names[y[1200:]], proba[1200:, order], weight[1200:], row_ids=1200)
    whole = CalibrationAccumulator(labels=names, **options).update(names[y], proba, weight)
    expected = whole.compute()
    for merged in (first.merge(second), CalibrationAccumulator(labels=names, **options)):
        if merged is not first:  # an empty accumulator takes the other's state in its order
            merged.merge(CalibrationAccumulator(labels=names[order], **options).merge(second))
            merged.merge(
                CalibrationAccumulator(labels=names, **options).update(
                    names[y[:1200]], proba[:1200], weight[:1200], row_ids=0
                )
            )
        result = merged.compute()
        kw = {"sample_weight": weight}
        assert relative(result.classwise_ece, classwise_calibration_error(y, proba, **kw)) <= 1e-12
        assert relative(result.top_label_ece, top_label_calibration_error(y, proba, **kw)) <= 1e-12
        np.testing.assert_allclose(
            result.intervals["classwise_ece"].replicates,
            expected.intervals["classwise_ece"].replicates,
            rtol=1e-12,
        )
    with pytest.raises(ValueError, match="same classes"):
        first.merge(CalibrationAccumulator(labels=["cat", "dog", "fox"], **options))
    indices = CalibrationAccumulator().update(y, proba)
    with pytest.raises(ValueError, match="same classes"):
        indices.merge(CalibrationAccumulator(labels=["0", "1", "2"]).update(y.astype(str), proba))
    binary = CalibrationAccumulator(convention="positive_class", labels=["no", "yes"])
    with pytest.raises(ValueError, match="positive_class.*order of `labels`"):
        binary.merge(CalibrationAccumulator(convention="positive_class", labels=["yes", "no"]))


def test_merge_takes_the_metrics_in_any_order():
    y, proba, _ = overconfident(1000, 3, seed=13)
    options = {"n_resamples": 10, "random_state": 0}
    first = CalibrationAccumulator(
        metrics=["ece", "nll"], interval_metrics=["ece", "nll"], **options
    ).update(y[:400], proba[:400], row_ids=0)
    second = CalibrationAccumulator(
        metrics=["nll", "ece"], interval_metrics=["nll", "ece"], **options
    ).update(y[400:], proba[400:], row_ids=400)
    result = first.merge(second).compute()
    assert relative(result.ece, expected_calibration_error(y, proba)) <= 1e-12
    assert relative(result.nll, negative_log_likelihood(y, proba)) <= 1e-12


@pytest.mark.slow
def test_an_empty_batch_adds_nothing_and_lets_its_accumulator_merge():
    y, proba, weight = overconfident(1000, 3, seed=14)
    for labels, scores, weights in (
        (np.zeros(0, dtype=int), np.zeros((0, 3)), np.zeros(0)),
        (torch.zeros(0, dtype=torch.int64), torch.zeros((0, 3)), torch.zeros(0)),
    ):
        empty = CalibrationAccumulator().update(labels, scores, weights)
        assert empty.n_samples_ == 0 and empty.n_positive_rows() == 0
        with pytest.raises(ValueError, match="holds no rows"):
            empty.compute()
        merged = CalibrationAccumulator().update(y, proba, weight).merge(empty).compute()
        assert merged.n_samples == 1000
        assert relative(merged.ece, expected_calibration_error(y, proba, sample_weight=weight)) == 0
    with pytest.raises(ValueError, match="3 classes"):
        CalibrationAccumulator().update(y, proba).update([], np.zeros((0, 2)))
    options = {"n_resamples": 10, "random_state": 0}
    stream = CalibrationAccumulator(**options).update(y, proba)
    stream.merge(CalibrationAccumulator(**options).update([], np.zeros((0, 3))))
    expected = CalibrationAccumulator(**options).update(y, proba).compute().intervals["ece"]
    assert stream.compute().intervals["ece"].replicates.tolist() == expected.replicates.tolist()
    with pytest.raises(ValueError, match="at least 2 columns"):
        CalibrationAccumulator().update([], np.zeros((0, 1)))
    with pytest.raises(ValueError, match="`y_true` has shape \\(2,\\) but `y_prob` has 0 rows"):
        CalibrationAccumulator().update([0, 1], np.zeros((0, 3)))


def test_a_rejected_batch_changes_nothing():
    y, proba, weight = overconfident(1000, 3, seed=15)
    accumulator = CalibrationAccumulator(n_resamples=10, random_state=0)
    with pytest.raises(ValueError, match="sum to 1"):
        accumulator.update(y, proba[:, :2])
    with pytest.raises(ValueError, match="holds no rows"):
        accumulator.compute()
    with pytest.raises(ValueError, match="row_ids"):
        accumulator.update(y, proba, row_ids=np.arange(999))
    accumulator.update(y[:600], proba[:600], weight[:600])
    state = {name: value.copy() for name, value in accumulator._state.items()}
    with pytest.raises(ValueError, match="3 classes"):
        accumulator.update(y, proba[:, :2] / proba[:, :2].sum(axis=1, keepdims=True))
    with pytest.raises(ValueError, match="negative"):
        accumulator.update(y[600:], proba[600:], -weight[600:])
    for name, value in state.items():
        assert np.array_equal(accumulator._state[name], value), name
    assert accumulator.n_samples_ == 600
    accumulator.update(y[600:], proba[600:], weight[600:])
    once = CalibrationAccumulator(n_resamples=10, random_state=0).update(y, proba, weight)
    for name, value in once._state.items():
        np.testing.assert_allclose(accumulator._state[name], value, rtol=1e-12, atol=1e-12)
    on_torch = CalibrationAccumulator().update(torch.as_tensor(y), torch.as_tensor(proba))
    before = {name: value.clone() for name, value in on_torch._state.items()}
    with pytest.raises(ValueError, match="sample_weight"):
        on_torch.update(torch.as_tensor(y), torch.as_tensor(proba), torch.ones(999))
    for name, value in before.items():
        assert torch.equal(on_torch._state[name], value), name


@pytest.mark.slow
def test_an_unpickled_accumulator_sums_the_next_torch_batch_on_its_device():
    y, proba, weight = overconfident(2000, 3, seed=16)
    tensors = [torch.as_tensor(a) for a in (y, proba, weight)]
    first = CalibrationAccumulator().update(*(t[:800] for t in tensors))
    restored = pickle.loads(pickle.dumps(first))
    restored.update(*(t[800:] for t in tensors))
    assert isinstance(restored._state["top"], torch.Tensor)
    result = restored.compute()
    expected = CalibrationAccumulator().update(y, proba, weight).compute()
    for name in ("ece", "classwise_ece", "nll", "smooth_ece"):
        assert relative(result[name], expected[name]) <= 1e-12, name
    with pytest.raises(ValueError, match="sums on cpu; got a batch on numpy"):
        restored.update(y, proba)


def test_nullable_probability_frames_are_read_as_the_metric_functions_read_them():
    pd = pytest.importorskip("pandas")
    y, proba, _ = overconfident(500, 3, seed=17)
    frame = pd.DataFrame(proba).astype("Float64")
    result = CalibrationAccumulator().update(y, frame).compute()
    assert relative(result.ece, expected_calibration_error(y, frame)) <= 1e-12
    frame.iloc[3, 1] = pd.NA
    with pytest.raises(ValueError, match="NaN"):
        CalibrationAccumulator().update(y, frame)


SCALE_OPTIONS = {"n_resamples": 20, "interval_metrics": ALL_INTERVALS}


@pytest.fixture(scope="module")
def unit_weights_result():
    """The predictions of the weights' scale test and their accumulated result at scale 1."""
    y, proba, weight = overconfident(3000, 3, seed=18)
    unit = accumulate(y, proba, weight, chunks=(0, 1000), **SCALE_OPTIONS).compute()
    return y, proba, weight, unit


@pytest.mark.parametrize("scale", [1e160, 1e-200, 2.0**-290, 2.0**310])
@pytest.mark.slow
def test_no_result_depends_on_the_weights_scale(scale, unit_weights_result):
    y, proba, weight, unit = unit_weights_result
    scaled = accumulate(y, proba, weight * scale, chunks=(0, 1000), **SCALE_OPTIONS).compute()
    on_torch = CalibrationAccumulator().update(
        *(torch.as_tensor(a) for a in (y, proba, weight * scale))
    )
    for result in (scaled, on_torch.compute()):
        for name in ("ece", "adaptive_ece", "debiased_ce", "smooth_ece", "nll", "brier"):
            assert relative(result[name], unit[name]) <= 1e-12, name
        for name in ("spiegelhalter", "ks", "kuiper"):
            assert relative(result[name].statistic, unit[name].statistic) <= 1e-12, name
            assert relative(result[name].pvalue, unit[name].pvalue) <= 1e-9, name
        for key in ("accuracy_low", "accuracy_high"):
            np.testing.assert_allclose(
                result.reliability[key], unit.reliability[key], rtol=1e-12, equal_nan=True
            )
        np.testing.assert_allclose(result.reliability.count, unit.reliability.count * scale)
    for name in ALL_INTERVALS:
        np.testing.assert_allclose(
            scaled.intervals[name].replicates, unit.intervals[name].replicates, rtol=1e-12
        )
    kw = {"sample_weight": weight * scale}
    test = calibration_test(y, proba, method="spiegelhalter", **kw)
    assert relative(scaled.spiegelhalter.statistic, test.statistic) <= 1e-12
    diagram = reliability_diagram(y, proba, strategy="uniform", confidence_level=0.95, **kw)
    np.testing.assert_allclose(
        scaled.reliability.accuracy_low, diagram.accuracy_low, rtol=1e-12, equal_nan=True
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_batches_keep_their_sums_on_the_device_at_any_weights_scale():
    y, proba, weight = overconfident(20000, 3, seed=19)
    options = {"n_resamples": 20, "interval_metrics": ("ece", "classwise_ece"), "random_state": 0}
    unit = CalibrationAccumulator(**options).update(y, proba, weight).compute()

    def on_cuda(*arrays):
        return [torch.as_tensor(a, device="cuda") for a in arrays]

    for scale in (1e160, 1e-200):
        accumulator = CalibrationAccumulator(**options).update(*on_cuda(y, proba, weight * scale))
        assert accumulator._state["top"].device.type == "cuda"
        result = accumulator.compute()
        for name in ("spiegelhalter", "ks", "kuiper"):
            assert relative(result[name].statistic, unit[name].statistic) <= 1e-10, name
        np.testing.assert_allclose(
            result.reliability.accuracy_low, unit.reliability.accuracy_low, equal_nan=True
        )
    first = CalibrationAccumulator().update(*on_cuda(y[:8000], proba[:8000], weight[:8000]))
    restored = pickle.loads(pickle.dumps(first))
    restored.update(*on_cuda(y[8000:], proba[8000:], weight[8000:]))
    assert restored._state["top"].device.type == "cuda"
    assert relative(restored.compute().ece, unit.ece) <= 1e-10
    order = [2, 0, 1]
    labelled = CalibrationAccumulator(labels=order, **options)
    labelled.update(y[:8000], proba[:8000, order], weight[:8000], row_ids=0)
    on_device = CalibrationAccumulator(**options)
    on_device.update(*on_cuda(y[8000:], proba[8000:], weight[8000:]), row_ids=8000)
    merged = labelled.merge(on_device).compute()
    assert relative(merged.classwise_ece, unit.classwise_ece) <= 1e-10
    np.testing.assert_allclose(
        merged.intervals["classwise_ece"].replicates,
        unit.intervals["classwise_ece"].replicates,
        rtol=1e-10,
    )
