"""EM over many rows: the sampled curvature with its exact diagonal, Newton steps that
shrink a prior by a bounded factor, the passes they save, the one-read pass over the
rows (numba) against its numpy twin, and numba's one-read check of the rows."""

import numpy as np
import pytest
from scipy.special import softmax

from sklearn_calib.label_shift._em import (
    SHRINK,
    RowSums,
    SampledCurvature,
    _newton_point,
    maximise_likelihood,
)
from sklearn_calib.label_shift._estimate import (
    SUBSAMPLE_ROWS,
    estimate_priors,
    evenly_spaced,
    subsample_start,
)
from sklearn_calib.label_shift._source import SourceSummary
from sklearn_calib.metrics._fused import _check, _mixture, _switch
from sklearn_calib.metrics._fused._check import checked_rows
from sklearn_calib.metrics._fused._mixture import DENSITY_FLOOR, mixture_sums


def shifted_rows(n, n_classes, seed):
    """Softmax probabilities of logits ``3 (2.5 one-hot + noise)``, labels drawn from a
    Dirichlet(1) prior: calibrated for uniform source priors."""
    rng = np.random.default_rng(seed)
    y = rng.choice(n_classes, size=n, p=rng.dirichlet(np.ones(n_classes)))
    logits = rng.normal(size=(n, n_classes))
    logits[np.arange(n), y] += 2.5
    return softmax(3.0 * logits, axis=1), np.full(n_classes, 1.0 / n_classes)


def test_the_kept_diagonal_is_the_curvatures(monkeypatch):
    proba, pi = shifted_rows(3000, 6, seed=1)
    prior = np.array([0.3, 0.1, 0.2, 0.05, 0.15, 0.2])
    exact = np.diag(RowSums(proba, pi).curvature(prior))
    np.testing.assert_allclose(RowSums(proba, pi).diagonal(prior), exact, rtol=1e-12)
    passes = []
    one_pass = RowSums._every_row_once

    def counted(self, *args, **kwargs):
        passes.append(args[0])
        return one_pass(self, *args, **kwargs)

    monkeypatch.setattr(RowSums, "_every_row_once", counted)
    kept = RowSums(proba, pi, keep_diagonal=True)
    kept(prior[None, :], np.arange(1))
    # the diagonal at a prior of the latest 4 passes comes without a pass of its own
    for other in np.random.default_rng(0).dirichlet(np.ones(6), 3):
        kept(other[None, :], np.arange(1), loglik=False)
    np.testing.assert_allclose(kept.diagonal(prior), exact, rtol=1e-12)
    assert len(passes) == 4
    kept(pi[None, :], np.arange(1))
    np.testing.assert_allclose(kept.diagonal(prior), exact, rtol=1e-12)
    assert len(passes) == 6 and len(kept.diagonals) == 4


def test_the_sampled_curvature_takes_the_exact_diagonal_and_the_samples_correlations():
    proba, pi = shifted_rows(3000, 6, seed=2)
    prior = np.array([0.3, 0.1, 0.2, 0.05, 0.15, 0.2])
    rows = proba[::7]
    sampled = SampledCurvature(rows, None, pi)(prior)
    exact = np.diag(RowSums(proba, pi).curvature(prior))
    rescaled = SampledCurvature(rows, None, pi, diagonal=RowSums(proba, pi).diagonal)(prior)
    np.testing.assert_allclose(np.diag(rescaled), exact, rtol=1e-12)
    scale = np.sqrt(np.diag(sampled))
    correlations = sampled / np.outer(scale, scale)
    scale = np.sqrt(exact)
    np.testing.assert_allclose(rescaled / np.outer(scale, scale), correlations, rtol=1e-12)


def test_the_curvature_keeps_its_correlations_while_the_priors_stay_near():
    proba, pi = shifted_rows(3000, 6, seed=2)
    prior = np.array([0.3, 0.1, 0.2, 0.05, 0.15, 0.2])
    later = np.array([0.1, 0.3, 0.2, 0.15, 0.05, 0.2])  # 0.6 away (absolute changes)
    rows, diagonal = proba[::7], RowSums(proba, pi).diagonal
    fresh = SampledCurvature(rows, None, pi, diagonal=diagonal)
    kept = SampledCurvature(rows, None, pi, diagonal=diagonal, drift=0.7)
    np.testing.assert_array_equal(kept(prior), fresh(prior))
    # within the drift: the correlations at `prior`, the diagonal at `later`
    first = fresh(prior)
    scale = np.sqrt(np.diag(first))
    correlations = first / np.outer(scale, scale)
    scale = np.sqrt(diagonal(later))
    np.testing.assert_allclose(kept(later), correlations * np.outer(scale, scale), rtol=1e-12)
    assert not np.allclose(kept(later), fresh(later), rtol=1e-3)
    # beyond it: the sample's at `later`
    moved = SampledCurvature(rows, None, pi, diagonal=diagonal, drift=0.5)
    moved(prior)
    np.testing.assert_allclose(moved(later), fresh(later), rtol=1e-14)


@pytest.mark.slow
def test_a_subsamples_newton_steps_do_not_stall_while_half_the_classes_vanish():
    # The evenly spaced subsample of 10^6 rows of which half the classes are absent: with
    # the correlations of its first two steps kept to the end, 1,000 passes left a gap of
    # 4e-6; computed again while the priors move, 10 passes reach 1e-8.
    rng = np.random.default_rng(0)
    n_samples, n_classes, chunk = 1_000_000, 100, 100_000
    labels = rng.integers(0, n_classes, n_samples)
    kept = []
    for start in range(0, n_samples, chunk):
        logits = rng.standard_normal((chunk, n_classes))
        y = labels[start : start + chunk]
        logits[np.arange(chunk), y] += 2.5
        kept.append(logits[y < n_classes // 2])
    logits = np.concatenate(kept)
    rows = softmax(3.0 * logits[evenly_spaced(len(logits), SUBSAMPLE_ROWS)], axis=1)
    pi = np.full(n_classes, 1.0 / n_classes)
    sums = RowSums(rows, pi, keep_diagonal=True)
    prior, n_iter, gap, _ = maximise_likelihood(
        sums, pi[None, :], max_iter=1000, tol=1e-8, curvature=sums.rescaled_curvature()
    )
    assert gap[0] <= 1e-8 and n_iter <= 15
    assert prior[0, n_classes // 2 :].sum() < 0.05


def test_a_newton_step_divides_a_prior_by_at_most_shrink():
    # Class 2 has no support: the model sets it to 0, the limited step to a tenth.
    target = np.array([[0.7, 0.2, 0.1], [0.2, 0.7, 0.1]] * 50)
    pi = np.full(3, 1 / 3)
    sums = RowSums(target, pi)
    gradient, _ = sums(pi[None, :], np.arange(1))
    free = _newton_point(pi, gradient[0], sums.curvature(pi))
    limited = _newton_point(pi, gradient[0], sums.curvature(pi), SHRINK)
    assert free[2] == 0.0
    # the other classes as the model's step has them; class 2 at a tenth before the
    # normalisation, which divides by less than 1 here
    np.testing.assert_allclose(limited[:2] / limited[:2].sum(), free[:2], rtol=1e-14)
    assert pi[2] / SHRINK <= limited[2] < 1.1 * pi[2] / SHRINK
    prior, n_iter, gap, _ = maximise_likelihood(
        sums, pi[None, :], max_iter=100, tol=1e-12, curvature=sums.curvature, shrink=SHRINK
    )
    # it falls a factor 10 a step: 13 passes, against 3 of the unlimited steps
    assert gap[0] <= 1e-12 and 0.0 < prior[0, 2] < 1e-11 and n_iter <= 13
    np.testing.assert_allclose(prior[0], [0.5, 0.5, 0.0], atol=1e-11)


@pytest.mark.slow
def test_many_rows_reach_the_maximum_in_fewer_passes_than_the_sample_alone_gives():
    # Without the exact diagonal and the bounded steps the same sample takes 18 passes;
    # with them 8 (a bound of 9 leaves one pass of slack).
    proba, pi = shifted_rows(70000, 20, seed=0)
    n_classes = len(pi)
    source = SourceSummary(pi, pi, np.diag(pi), np.ones(n_classes), 1.0)
    options = {"max_iter": 1000, "tol": 1e-8, "confusion": "soft", "regularization": 1.0}
    estimation = estimate_priors("em", proba, source, options=options)
    assert estimation.gap[0] <= 1e-8 and estimation.n_iter <= 9
    sums = RowSums(proba, pi)
    exact, *_ = maximise_likelihood(
        sums, estimation.prior, max_iter=100, tol=1e-14, curvature=sums.curvature
    )
    np.testing.assert_allclose(estimation.prior, exact, atol=1e-9)
    rows = proba[evenly_spaced(len(proba), SUBSAMPLE_ROWS)]
    start = subsample_start(rows, pi, pi[None, :], max_iter=1000, tol=1e-8)
    curvature, *first = sums.length_squared_sample(
        start[0], SUBSAMPLE_ROWS, np.random.default_rng(0)
    )
    curvature.diagonal = None
    _, n_iter, gap, _ = maximise_likelihood(
        sums, start, max_iter=1000, tol=1e-8, curvature=curvature, first=first
    )
    assert gap[0] <= 1e-8 and n_iter >= 2 * estimation.n_iter


@pytest.mark.parametrize("n_classes", [3, 8, 13])
def test_the_mixture_kernel_agrees_with_its_numpy_twin(monkeypatch, n_classes):
    pytest.importorskip("numba")
    rng = np.random.default_rng(n_classes)
    proba = rng.dirichlet(np.full(n_classes, 0.5), 9000)  # more than one parallel block
    ratio = rng.random(n_classes) + 0.1
    scale = rng.random(n_classes)
    # a row on a class of weight 0 has the floor for its density
    lone = np.eye(n_classes)[:1]
    results = {}
    for path in ("0", "1"):
        monkeypatch.setenv(_switch.NUMBA_SWITCH, path)
        norms = np.empty(len(proba))
        sums = mixture_sums(proba, ratio, diagonal=True, norms=norms, scale=scale)
        results[path] = (*sums, norms)
        floored = mixture_sums(lone, np.concatenate([[0.0], ratio[1:]]))
        np.testing.assert_allclose(floored[0], np.log(DENSITY_FLOOR), rtol=1e-15)
        assert floored[2] is None
    density = proba @ ratio
    expected = (
        np.log(density).sum(),
        (proba / density[:, None]).sum(axis=0),
        ((proba / density[:, None]) ** 2).sum(axis=0),
        (proba**2 @ scale) / density**2,
    )
    for path, values in results.items():
        for value, exact in zip(values, expected, strict=True):
            np.testing.assert_allclose(value, exact, rtol=1e-13, err_msg=path)


def test_em_over_many_rows_agrees_on_both_paths(monkeypatch):
    pytest.importorskip("numba")
    proba, pi = shifted_rows(70000, 20, seed=3)
    source = SourceSummary(pi, pi, np.diag(pi), np.ones(len(pi)), 1.0)
    options = {"max_iter": 1000, "tol": 1e-8, "confusion": "soft", "regularization": 1.0}
    found = {}
    for path in ("0", "1"):
        monkeypatch.setenv(_switch.NUMBA_SWITCH, path)
        found[path] = estimate_priors("em", proba, source, options=options)
    # the paths' sums differ by rounding, which may move the last pass across the tolerance
    assert abs(found["0"].n_iter - found["1"].n_iter) <= 1
    np.testing.assert_allclose(found["0"].prior, found["1"].prior, atol=1e-9)


def test_the_kernels_log_likelihood_holds_where_the_product_of_densities_leaves_floats():
    # 9,000 rows at the floor's density (their product is 1e-2,700,000) and rows of
    # density 1e5 (1e45,000): one logarithm of the block's product, kept as a fraction
    # and a power of 2, is the sum of the rows' logarithms
    pytest.importorskip("numba")
    n_classes = 4
    floored = np.tile(np.eye(n_classes)[0], (9000, 1))
    heavy = np.tile(np.eye(n_classes)[1], (9000, 1))
    proba = np.concatenate([floored, heavy, np.full((9000, n_classes), 1.0 / n_classes)])
    ratio = np.array([0.0, 1e5, 1.0, 2.0])
    totals = {}
    for path in ("0", "1"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(_switch.NUMBA_SWITCH, path)
            totals[path] = mixture_sums(proba, ratio)[0]
    expected = 9000 * (np.log(DENSITY_FLOOR) + np.log(1e5) + np.log(ratio.mean()))
    for path, total in totals.items():
        np.testing.assert_allclose(total, expected, rtol=1e-14, err_msg=path)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numbas_one_read_check_passes_the_rows_the_checks_return_unchanged(monkeypatch, dtype):
    kernels = pytest.importorskip("sklearn_calib.metrics._fused._numba_kernels")
    monkeypatch.setenv(_switch.NUMBA_SWITCH, "1")
    proba = shifted_rows(20000, 7, seed=5)[0].astype(dtype)
    checked = []
    real = _check.check_probabilities

    def spied(*args, **kwargs):
        checked.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(_check, "check_probabilities", spied)
    assert checked_rows(proba, kind="mixture", name="target") is proba and not checked
    # the kernel's ranges are those of the library's check
    ranges = kernels.probability_ranges(proba, 1 << 12)
    row_sums = proba.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(ranges[:2], [row_sums.min(), row_sums.max()], rtol=1e-15)
    assert ranges[2:].tolist() == [proba.min(), proba.max(), 1.0]
    for entry, error in [(np.nan, "NaN"), (np.inf, "NaN"), (-1e-9, "negative")]:
        broken = proba.copy()
        broken[12345, 2] = entry
        with pytest.raises(ValueError, match=f"`target` contains {error}"):
            checked_rows(broken, kind="mixture", name="target")
    off = proba.copy()
    off[777] *= 1.01  # a row sum outside the tolerance
    with pytest.raises(ValueError, match="row 777 sums to"):
        checked_rows(off, kind="mixture", name="target")
    rounded = proba.copy()
    rounded[9] = [1.0 + 2e-4, 0, 0, 0, 0, 0, 0]  # within the tolerance: the check clips it
    clipped = checked_rows(rounded, kind="mixture", name="target")
    assert clipped is not rounded and clipped[9, 0] == 1.0
    assert len(checked) == 5
    # no fused pass follows, or numpy's path: the library's check
    assert checked_rows(proba, kind=None, name="target") is proba and len(checked) == 6
    monkeypatch.setenv(_switch.NUMBA_SWITCH, "0")
    assert checked_rows(proba, kind="mixture", name="target") is proba and len(checked) == 7


def test_a_subsamples_passes_take_the_path_chosen_on_all_rows(monkeypatch, numba_at_every_size):
    pytest.importorskip("numba")
    # the library's default choice by size (not the suite's numba at every size)
    monkeypatch.setattr(_switch, "NUMBA_LOAD_NS", numba_at_every_size)
    monkeypatch.delenv(_switch.NUMBA_SWITCH, raising=False)
    proba, pi = shifted_rows(2000, 5, seed=6)
    numpy_passes = []
    numpy_sums = _mixture._numpy_sums

    def counted(*args):
        numpy_passes.append(args[0].shape)
        return numpy_sums(*args)

    monkeypatch.setattr(_mixture, "_numpy_sums", counted)
    prior = np.array([[0.4, 0.1, 0.2, 0.2, 0.1]])
    alone = RowSums(proba, pi)(prior, np.arange(1))
    assert numpy_passes == [proba.shape]
    # as the subsample of 10^9 values, the same rows take numba's kernel
    of_many = RowSums(proba, pi, path_values=10**9)(prior, np.arange(1))
    assert numpy_passes == [proba.shape]
    for found, expected in zip(of_many, alone, strict=True):
        np.testing.assert_allclose(found, expected, rtol=1e-13)
