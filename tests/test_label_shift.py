"""Label-shift adaptation: EM, BBSE and RLLS against hand computations and against
Alexandari et al.'s ``abstention`` package, intervals, tests of "no shift", bad input, Dask
target scores and the classifier around a model."""

import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.special import softmax
from sklearn.base import BaseEstimator
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_calib import LabelShiftAdapter, LabelShiftClassifier
from sklearn_calib.calibrators import BiasCorrectedTemperatureScaling, TemperatureScaling
from sklearn_calib.label_shift._confusion import rlls_penalty, rlls_weights
from sklearn_calib.label_shift._em import RowSums, maximise_likelihood
from sklearn_calib.metrics import BootstrapInterval

FIXTURE = Path(__file__).parent / "data" / "label_shift_abstention.npz"
EXACT = {"n_resamples": 0, "tol": 1e-14, "max_iter": 100000}


def passthrough(**params):
    """An adapter of probabilities used as they are (no calibration)."""
    params = {"input": "probabilities", "calibrator": "passthrough", **EXACT, **params}
    return LabelShiftAdapter(**params)


def quiet(adapter, *args, **kwargs):
    """``adapter.adapt`` without the warning of EM on uncalibrated scores."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="EM estimates", category=UserWarning)
        return adapter.adapt(*args, **kwargs)


def gaussian_scores(prior, n, seed, scale=2.0):
    """Logits ``scale * (one-hot + noise)`` of labels drawn from ``prior``."""
    rng = np.random.default_rng(seed)
    y = rng.choice(len(prior), size=n, p=prior)
    return scale * (np.eye(len(prior))[y] + rng.normal(size=(n, len(prior)))), y


# ------------------------------------------------------------------------------- EM


def test_em_binary_maximum_likelihood_by_hand():
    # Half the target rows have p = (0.8, 0.2), half (0.3, 0.7), and pi = (1/2, 1/2): the
    # likelihood's derivative 0.6 / (0.2 + 0.6 q) - 0.4 / (0.7 - 0.4 q) vanishes at
    # q = 0.34 / 0.48.
    source = np.array([[0.8, 0.2], [0.3, 0.7]] * 10)
    target = np.array([[0.8, 0.2]] * 50 + [[0.3, 0.7]] * 50)
    adapter = passthrough(source_prior=[0.5, 0.5]).fit(source, [0, 1] * 10)
    quiet(adapter, target)
    q = 0.34 / 0.48
    np.testing.assert_allclose(adapter.target_prior_, [q, 1 - q], atol=1e-9)
    np.testing.assert_allclose(adapter.weights_, [2 * q, 2 * (1 - q)], atol=1e-9)
    # the re-weighted probabilities by hand: p_k w_k / sum_j p_j w_j
    expected = np.array([0.8 * q, 0.2 * (1 - q)]) / (0.8 * q + 0.2 * (1 - q))
    np.testing.assert_allclose(adapter.predict_proba(target[:1])[0], expected, atol=1e-9)
    assert adapter.converged_ and adapter.n_iter_ >= 1


def test_em_stops_at_the_boundary_when_a_class_is_absent():
    # Rows that favour class 0 or 1, never 2: the gradient of q_2 stays below 1 and the
    # maximum has q_2 = 0.
    source = np.array([[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.2, 0.2, 0.6]] * 5)
    target = np.array([[0.7, 0.2, 0.1], [0.2, 0.7, 0.1]] * 50)
    adapter = passthrough(source_prior=[1 / 3] * 3).fit(source, [0, 1, 2] * 5)
    quiet(adapter, target)
    assert adapter.target_prior_[2] < 1e-6
    np.testing.assert_allclose(adapter.target_prior_[:2], [0.5, 0.5], atol=1e-6)


def test_em_fixed_point_satisfies_the_likelihood_conditions():
    scores, y = gaussian_scores([0.4, 0.3, 0.2, 0.1], 2000, seed=1)
    target, _ = gaussian_scores([0.1, 0.1, 0.2, 0.6], 1500, seed=2)
    adapter = LabelShiftAdapter(**EXACT).fit(scores, y).adapt(target)
    proba = adapter.calibrator_.predict_proba(target)
    pi, q = adapter.source_prior_, adapter.target_prior_
    density = proba @ (q / pi)
    gradient = (proba / density[:, None]).mean(axis=0) / pi
    np.testing.assert_allclose(gradient[q > 1e-8], 1.0, atol=1e-9)
    assert (gradient <= 1 + 1e-9).all()
    # the likelihood-ratio statistic by hand: 2 sum_i log sum_k p_ik q_k / pi_k
    assert adapter.shift_test_.statistic == pytest.approx(2 * np.log(density).sum(), rel=1e-9)
    assert adapter.shift_test_.df == 3 and adapter.shift_test_.pvalue < 1e-10


def test_target_like_the_source_gives_no_shift():
    scores, y = gaussian_scores([0.5, 0.3, 0.2], 1000, seed=3)
    adapter = LabelShiftAdapter(**EXACT).fit(scores, y).adapt(scores)
    np.testing.assert_allclose(adapter.weights_, 1.0, atol=1e-12)
    assert adapter.shift_test_.statistic == pytest.approx(0.0, abs=1e-9)
    np.testing.assert_allclose(
        adapter.predict_proba(scores), adapter.calibrator_.predict_proba(scores), atol=1e-12
    )


def test_squarem_reaches_the_maximum_where_plain_em_stalls():
    # Overlapping classes make the likelihood flat: EM's steps shrink long before the
    # maximum. The gap certifies the maximum: no prior has a higher likelihood.
    rng = np.random.default_rng(4)
    proba = softmax(0.3 * rng.normal(size=(3000, 5)), axis=1)
    pi = np.full(5, 0.2)
    prior, n_iter, gap, loglik = maximise_likelihood(
        RowSums(proba, pi), pi[None, :], max_iter=10000, tol=1e-12
    )
    assert gap[0] <= 1e-12 and n_iter < 2000
    for _ in range(20):
        other = rng.dirichlet(np.ones(5))
        assert np.log(proba @ (other / pi)).mean() <= loglik[0] + 1e-12


def test_curvature_is_minus_the_derivative_of_the_gradient():
    rng = np.random.default_rng(8)
    proba = softmax(rng.normal(size=(500, 4)), axis=1)
    pi = np.array([0.1, 0.2, 0.3, 0.4])
    prior = np.array([[0.4, 0.3, 0.2, 0.1]])
    sums = RowSums(proba, pi)
    step = 1e-6 * rng.normal(size=(1, 4))
    change = sums(prior + step, np.arange(1))[0] - sums(prior - step, np.arange(1))[0]
    np.testing.assert_allclose(change[0] / 2, -sums.curvature(prior[0]) @ step[0], rtol=1e-6)


def test_newton_steps_reach_the_squarem_maximum_in_fewer_passes():
    rng = np.random.default_rng(4)
    proba = softmax(0.3 * rng.normal(size=(3000, 5)), axis=1)
    pi = np.full(5, 0.2)
    sums = RowSums(proba, pi)
    squarem = maximise_likelihood(sums, pi[None, :], max_iter=10000, tol=1e-12)
    newton = maximise_likelihood(
        sums, pi[None, :], max_iter=10000, tol=1e-12, curvature=sums.curvature
    )
    np.testing.assert_allclose(newton[0], squarem[0], atol=1e-10)
    assert newton[2][0] <= 1e-12 and newton[3][0] >= squarem[3][0] - 1e-14
    assert newton[1] <= 6 < squarem[1]


def test_newton_steps_hold_an_absent_class_at_zero():
    # The rows of the boundary test above: the maximum has q_2 = 0, which EM only
    # approaches (its steps multiply q_2 by g_2 < 1) and the active set reaches.
    target = np.array([[0.7, 0.2, 0.1], [0.2, 0.7, 0.1]] * 50)
    pi = np.full(3, 1 / 3)
    sums = RowSums(target, pi)
    prior, n_iter, gap, _ = maximise_likelihood(
        sums, pi[None, :], max_iter=100, tol=1e-12, curvature=sums.curvature
    )
    assert prior[0, 2] == 0.0
    np.testing.assert_allclose(prior[0], [0.5, 0.5, 0.0], atol=1e-15)
    assert gap[0] <= 1e-12 and n_iter <= 3


@pytest.mark.slow
def test_newton_steps_bring_back_a_class_held_at_zero():
    # Dirichlet(0.1) targets of 10 overlapping classes: Newton steps hold several classes
    # at 0 on the way, and a class at 0 whose gradient exceeds 1 must come back (an
    # active set that only ever removed classes stalled in one of these targets).
    rng = np.random.default_rng(11)
    pi = np.full(10, 0.1)
    for _ in range(60):
        y = rng.choice(10, size=500, p=rng.dirichlet(np.full(10, 0.1)))
        proba = softmax(1.5 * (2 * np.eye(10)[y] + rng.normal(size=(500, 10))), axis=1)
        sums = RowSums(proba, pi)
        squarem = maximise_likelihood(sums, pi[None, :], max_iter=100000, tol=1e-10)
        newton = maximise_likelihood(
            sums, pi[None, :], max_iter=1000, tol=1e-10, curvature=sums.curvature
        )
        assert newton[2][0] <= 1e-10 and newton[1] < 100
        np.testing.assert_allclose(newton[0], squarem[0], atol=1e-4)


def test_em_warns_when_it_does_not_converge():
    scores, y = gaussian_scores([0.5, 0.5], 500, seed=5, scale=0.3)
    target, _ = gaussian_scores([0.9, 0.1], 500, seed=6, scale=0.3)
    adapter = LabelShiftAdapter(max_iter=4, n_resamples=0).fit(scores, y)
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=4"):
        adapter.adapt(target)
    assert not adapter.converged_


def test_em_on_uncalibrated_scores_warns():
    scores, y = gaussian_scores([0.5, 0.5], 200, seed=7)
    proba = softmax(scores, axis=1)
    adapter = passthrough().fit(proba, y)
    with pytest.warns(UserWarning, match="uncalibrated"):
        adapter.adapt(proba)


# --------------------------------------------------------------------- BBSE and RLLS

# Source: class 0 predicted 0 eight times in 10, class 1 predicted 1 seven times in 10;
# C = [[8, 3], [2, 7]] / 20 (joint of prediction and class).
SOURCE_ROWS = np.array([[0.9, 0.1]] * 8 + [[0.2, 0.8]] * 2 + [[0.9, 0.1]] * 3 + [[0.2, 0.8]] * 7)
SOURCE_Y = np.array([0] * 10 + [1] * 10)
TARGET_ROWS = np.array([[0.9, 0.1]] * 7 + [[0.2, 0.8]] * 3)


def test_bbse_hard_by_hand():
    # C w = mu with mu = (0.7, 0.3): w = (1.6, 0.4), and q = w pi = (0.8, 0.2).
    adapter = passthrough(method="bbse", source_prior="labels").fit(SOURCE_ROWS, SOURCE_Y)
    adapter.adapt(TARGET_ROWS)
    np.testing.assert_allclose(adapter.target_prior_, [0.8, 0.2], atol=1e-12)
    np.testing.assert_allclose(adapter.weights_, [1.6, 0.4], atol=1e-12)
    assert adapter.n_iter_ == 0 and adapter.converged_


def test_bbse_soft_by_hand():
    # C[i, j] = mean p_i [y = j]: class 0's rows sum to (7.6, 2.4), class 1's to (4.1, 5.9).
    confusion = np.array([[7.6, 4.1], [2.4, 5.9]]) / 20
    mu = np.array([6.9, 3.1]) / 10
    w = np.linalg.solve(confusion, mu)
    adapter = passthrough(method="bbse", confusion="soft", source_prior="labels")
    adapter.fit(SOURCE_ROWS, SOURCE_Y).adapt(TARGET_ROWS)
    np.testing.assert_allclose(adapter.target_prior_, w / w.sum(), atol=1e-12)


def test_rlls_without_penalty_is_bbse_and_with_a_large_one_no_shift():
    free = passthrough(method="rlls", regularization=0.0, source_prior="labels")
    free.fit(SOURCE_ROWS, SOURCE_Y).adapt(TARGET_ROWS)
    np.testing.assert_allclose(free.target_prior_, [0.8, 0.2], atol=1e-6)
    held = passthrough(method="rlls", regularization=1e3, source_prior="labels")
    held.fit(SOURCE_ROWS, SOURCE_Y).adapt(TARGET_ROWS)
    np.testing.assert_allclose(held.target_prior_, [0.5, 0.5], atol=1e-12)


@pytest.mark.parametrize("regularization", [0.02, 0.1, 0.2])
def test_rlls_penalty_and_minimum_by_hand(regularization):
    # The penalty weight is regularization * 3 (2 log(2K / 0.05) / (3n) + sqrt(2 log(2K /
    # 0.05) / n)); no theta >= -1 of a fine grid has a lower |C theta - b| + delta |theta|.
    # (With 2 classes the minimum jumps from BBSE's theta = (0.6, -0.6) to 0 as delta grows
    # past |C' b| / |b| = 0.255: both terms are norms.)
    n, k = 20, 2
    log_term = 2 * np.log(2 * k / 0.05)
    delta = regularization * 3 * (log_term / (3 * n) + np.sqrt(log_term / n))
    assert rlls_penalty(k, n, regularization) == pytest.approx(delta, rel=1e-14)
    confusion = np.array([[8, 3], [2, 7]]) / 20
    mu = np.array([0.7, 0.3])
    b = mu - confusion.sum(axis=1)
    weights, _ = rlls_weights(confusion, mu, delta)

    def objective(theta):
        return np.linalg.norm(theta @ confusion.T - b, axis=-1) + delta * np.linalg.norm(
            theta, axis=-1
        )

    grid = np.stack(np.meshgrid(*[np.linspace(-1, 2, 601)] * 2), axis=-1)
    values = objective(grid)
    assert objective(weights - 1) <= values.min() + 1e-12
    best = grid.reshape(-1, 2)[values.argmin()]
    np.testing.assert_allclose(weights - 1, best, atol=5e-3)
    expected = [0.6, -0.6] if delta < 0.255 else [0.0, 0.0]
    np.testing.assert_allclose(weights - 1, expected, atol=1e-9)


def test_bbse_rejects_a_singular_confusion_matrix():
    rows = np.array([[0.9, 0.1]] * 20)
    adapter = passthrough(method="bbse").fit(rows, SOURCE_Y)
    with pytest.raises(ValueError, match="invertible confusion matrix"):
        adapter.adapt(TARGET_ROWS)


# ------------------------------------------------------------ against abstention's package


@pytest.fixture(scope="module")
def reference():
    return dict(np.load(FIXTURE))


def test_bcts_matches_abstention(reference):
    bcts = BiasCorrectedTemperatureScaling(input="probabilities")
    bcts.fit(reference["source_proba"], reference["source_y"])
    ours = bcts.predict_proba(reference["target_proba"])
    np.testing.assert_allclose(ours, reference["bcts_target_proba"], atol=2e-4)


def test_em_matches_abstention(reference):
    source, y, target = reference["source_proba"], reference["source_y"], reference["target_proba"]
    adapter = passthrough().fit(source, y)
    quiet(adapter, target)
    np.testing.assert_allclose(adapter.weights_, reference["em_multipliers"], atol=1e-8)
    calibrated = LabelShiftAdapter(input="probabilities", **EXACT).fit(source, y).adapt(target)
    np.testing.assert_allclose(calibrated.weights_, reference["em_bcts_multipliers"], atol=2e-3)


@pytest.mark.parametrize("method", ["bbse", "rlls"])
@pytest.mark.parametrize("confusion", ["hard", "soft"])
@pytest.mark.slow
def test_bbse_and_rlls_match_abstention(reference, method, confusion):
    source, y, target = reference["source_proba"], reference["source_y"], reference["target_proba"]
    adapter = passthrough(method=method, confusion=confusion, source_prior="labels")
    adapter.fit(source, y).adapt(target)
    multipliers = np.maximum(reference[f"{method}_{confusion}_multipliers"], 0.0)
    label_prior = np.bincount(y) / len(y)
    expected = multipliers * label_prior / (multipliers @ label_prior)
    np.testing.assert_allclose(
        adapter.target_prior_, expected, atol=1e-4 if method == "rlls" else 1e-10
    )


# ----------------------------------------------------------- known priors, intervals, tests


def test_known_target_priors_reweight_by_hand():
    scores, y = gaussian_scores([0.5, 0.5], 400, seed=8)
    adapter = LabelShiftAdapter(**EXACT).fit(scores, y)
    proba = adapter.predict_proba(scores[:3])
    adapter.adapt(target_prior=[0.9, 0.1])
    weights = np.array([0.9, 0.1]) / adapter.source_prior_
    expected = proba * weights / (proba @ weights)[:, None]
    np.testing.assert_allclose(adapter.predict_proba(scores[:3]), expected, atol=1e-12)
    assert adapter.shift_test_ is None and adapter.target_prior_intervals_ is None


def test_intervals_are_bootstrap_intervals_that_cover_the_truth():
    truth = np.array([0.6, 0.3, 0.1])
    scores, y = gaussian_scores([1 / 3] * 3, 3000, seed=9)
    target, target_y = gaussian_scores(truth, 2000, seed=10)
    adapter = LabelShiftAdapter(n_resamples=100, random_state=0).fit(scores, y).adapt(target)
    intervals = adapter.target_prior_intervals_
    assert all(isinstance(interval, BootstrapInterval) for interval in intervals)
    frequencies = np.bincount(target_y, minlength=3) / len(target_y)
    pairs = zip(intervals, adapter.target_prior_, frequencies, strict=True)
    for interval, estimate, frequency in pairs:
        assert interval.low <= estimate <= interval.high
        assert interval.low <= frequency <= interval.high
        assert interval.replicates.shape == (100,) and interval.confidence_level == 0.95
    again = LabelShiftAdapter(n_resamples=100, random_state=0).fit(scores, y).adapt(target)
    assert again.target_prior_intervals_[0].low == intervals[0].low


@pytest.mark.slow
def test_resampling_the_source_widens_the_intervals():
    scores, y = gaussian_scores([1 / 3] * 3, 150, seed=11)
    target, _ = gaussian_scores([0.6, 0.3, 0.1], 3000, seed=12)
    params = {"n_resamples": 60, "random_state": 0}
    target_only = LabelShiftAdapter(**params).fit(scores, y).adapt(target)
    both = LabelShiftAdapter(resample_source=True, **params).fit(scores, y).adapt(target)

    def widths(adapter):
        return np.array([i.high - i.low for i in adapter.target_prior_intervals_])

    assert widths(both).mean() > 1.5 * widths(target_only).mean()


def test_no_shift_is_not_rejected_without_shift_and_rejected_with_one():
    scores, y = gaussian_scores([0.5, 0.3, 0.2], 3000, seed=13)
    same, _ = gaussian_scores([0.5, 0.3, 0.2], 1000, seed=14)
    shifted, _ = gaussian_scores([0.2, 0.3, 0.5], 1000, seed=15)
    for method in ("em", "bbse"):
        adapter = LabelShiftAdapter(method=method, n_resamples=0).fit(scores, y)
        assert adapter.adapt(same).shift_test_.pvalue > 0.05
        assert adapter.adapt(shifted).shift_test_.pvalue < 1e-6


def test_prediction_count_test_by_hand():
    adapter = passthrough(method="bbse").fit(SOURCE_ROWS, SOURCE_Y).adapt(TARGET_ROWS)
    # predicted classes: source (11, 9) of 20, target (7, 3) of 10; Pearson's statistic
    observed = np.array([[11, 9], [7, 3]])
    expected = observed.sum(axis=1, keepdims=True) * observed.sum(axis=0) / observed.sum()
    statistic = ((observed - expected) ** 2 / expected).sum()
    assert adapter.shift_test_.statistic == pytest.approx(statistic, rel=1e-12)
    assert adapter.shift_test_.method == "prediction_counts" and adapter.shift_test_.df == 1


# ------------------------------------------------------------------------------ bad input


@pytest.fixture
def fitted():
    scores, y = gaussian_scores([0.5, 0.3, 0.2], 300, seed=16)
    return LabelShiftAdapter(n_resamples=0).fit(scores, y), scores


@pytest.mark.parametrize(
    ("prior", "match"),
    [
        ([0.5, 0.3, 0.3], "sum to 1"),
        ([0.5, 0.6, -0.1], "non-negative"),
        ([0.5, 0.5], "one prior per class"),
        ([0.5, np.nan, 0.5], "finite"),
    ],
)
def test_bad_target_priors(fitted, prior, match):
    adapter, _ = fitted
    with pytest.raises(ValueError, match=match):
        adapter.adapt(target_prior=prior)


def test_source_priors_with_zeros_or_not_summing_to_one():
    scores, y = gaussian_scores([0.5, 0.3, 0.2], 300, seed=17)
    with pytest.raises(ValueError, match="positive for every class"):
        LabelShiftAdapter(source_prior=[0.5, 0.5, 0.0]).fit(scores, y)
    with pytest.raises(ValueError, match="sum to 1"):
        LabelShiftAdapter(source_prior=[0.5, 0.5, 0.5]).fit(scores, y)


def test_classes_unseen_at_the_source():
    scores, y = gaussian_scores([0.5, 0.5, 0.0], 300, seed=18)
    adapter = LabelShiftAdapter(n_resamples=0).fit(scores, y, classes=[0, 1, 2])
    with pytest.raises(ValueError, match=r"class\(es\) \[2\] have no labelled source sample"):
        adapter.adapt(scores)
    with pytest.raises(ValueError, match="but a positive target prior"):
        adapter.adapt(target_prior=[0.4, 0.4, 0.2])
    adapter.adapt(target_prior=[0.7, 0.3, 0.0])
    assert adapter.predict_proba(scores)[:, 2].max() == 0.0


def test_empty_target_labels_and_wrong_arguments(fitted):
    adapter, scores = fitted
    with pytest.raises(ValueError, match="0 sample"):
        adapter.adapt(scores[:0])
    with pytest.raises(ValueError, match="got labels `y`"):
        adapter.adapt(scores, np.zeros(len(scores)))
    with pytest.raises(ValueError, match="got neither"):
        adapter.adapt()
    with pytest.raises(ValueError, match="got both"):
        adapter.adapt(scores, target_prior=[0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match="3 features"):
        adapter.adapt(scores[:, :2])
    with pytest.raises(NotFittedError):
        LabelShiftAdapter().adapt(scores)


def test_a_failed_adapt_leaves_no_stale_priors(fitted):
    adapter, scores = fitted
    adapter.adapt(target_prior=[0.2, 0.3, 0.5])
    with pytest.raises(ValueError):
        adapter.adapt(target_prior=[0.2, 0.3, 0.6])
    assert not hasattr(adapter, "target_prior_")
    np.testing.assert_allclose(
        adapter.predict_proba(scores), adapter.calibrator_.predict_proba(scores), atol=0
    )


def test_binary_one_dimensional_scores():
    scores, y = gaussian_scores([0.5, 0.5], 2000, seed=19)
    target, _ = gaussian_scores([0.8, 0.2], 2000, seed=20)
    log_odds, target_log_odds = scores[:, 1] - scores[:, 0], target[:, 1] - target[:, 0]
    two = LabelShiftAdapter(**EXACT).fit(scores, y).adapt(target)
    one = LabelShiftAdapter(**EXACT).fit(log_odds, y).adapt(target_log_odds)
    np.testing.assert_allclose(one.target_prior_, two.target_prior_, atol=1e-6)
    assert one.predict_proba(target_log_odds).shape == (2000, 2)


# ------------------------------------------------------------------------------------ Dask


@pytest.mark.parametrize("method", ["em", "bbse", "rlls"])
@pytest.mark.slow
def test_dask_target_scores_give_the_in_memory_priors(method):
    da = pytest.importorskip("dask.array")
    scores, y = gaussian_scores([0.4, 0.4, 0.2], 1000, seed=21)
    target, _ = gaussian_scores([0.1, 0.3, 0.6], 3000, seed=22)
    adapter = LabelShiftAdapter(method=method, **EXACT).fit(scores, y)
    expected = adapter.adapt(target).target_prior_
    lazy = da.from_array(target, chunks=(700, 3))
    np.testing.assert_allclose(adapter.adapt(lazy).target_prior_, expected, atol=1e-9)
    proba = adapter.predict_proba(lazy)
    np.testing.assert_allclose(proba.compute(), adapter.predict_proba(target), atol=1e-12)
    with pytest.raises(ValueError, match="n_resamples=0"):
        adapter.set_params(n_resamples=10).adapt(lazy)


@pytest.mark.slow
def test_many_rows_start_from_a_subsample_and_reach_the_same_maximum():
    da = pytest.importorskip("dask.array")
    scores, y = gaussian_scores([0.25] * 4, 2000, seed=23)
    target, _ = gaussian_scores([0.1, 0.2, 0.3, 0.4], 70000, seed=24)
    adapter = LabelShiftAdapter(n_resamples=0, tol=1e-12).fit(scores, y)
    in_memory = adapter.adapt(target).target_prior_
    proba = adapter.calibrator_.predict_proba(target)
    pi = adapter.source_prior_
    full, *_ = maximise_likelihood(RowSums(proba, pi), pi[None, :], max_iter=10000, tol=1e-12)
    np.testing.assert_allclose(in_memory, full[0], atol=1e-5)
    # Newton steps with the subsample's curvature: a few passes over the rows
    assert adapter.converged_ and adapter.n_iter_ <= 10
    lazy = da.from_array(target, chunks=(20000, 4))
    np.testing.assert_allclose(adapter.adapt(lazy).target_prior_, in_memory, atol=1e-9)


def test_a_class_the_subsample_leaves_at_zero_restarts_away_from_it():
    # Every row of the evenly spaced subsample is (0.45, 0.45, 0.1): its optimum puts
    # class 2 at 0. The other rows hold 30 % of (0.2, 0.2, 0.6), which give class 2 the
    # prior q solving 0.7 * 0.35 / (0.45 - 0.35 q) = 0.3 * 0.4 / (0.2 + 0.4 q): 1/28.
    # Started at the subsample's 0, EM took 85 passes to climb back; moved towards the
    # source priors, 10.
    n = 70000
    in_subsample = np.zeros(n, dtype=bool)
    in_subsample[np.linspace(0, n - 1, 1 << 14).astype(np.intp)] = True
    kind = np.zeros(n, dtype=np.intp)
    kind[np.flatnonzero(~in_subsample)[: 3 * n // 10]] = 1
    target = np.array([[0.45, 0.45, 0.1], [0.2, 0.2, 0.6]])[kind]
    source = np.tile(np.full((3, 3), 0.1) + 0.7 * np.eye(3), (10, 1))
    adapter = LabelShiftAdapter(
        input="probabilities", calibrator="passthrough", source_prior=[1 / 3] * 3, n_resamples=0
    ).fit(source, np.tile([0, 1, 2], 10))
    with pytest.warns(UserWarning, match="uncalibrated"):
        adapter.adapt(target)
    assert adapter.converged_ and adapter.n_iter_ <= 20
    # Classes 0 and 1 give every row the same probability: the likelihood fixes their sum,
    # not how it splits.
    prior = adapter.target_prior_
    np.testing.assert_allclose([prior[0] + prior[1], prior[2]], [27 / 28, 1 / 28], rtol=1e-6)


# ------------------------------------------------------------------- LabelShiftClassifier


def shifted_classification(seed=0):
    """Source data with balanced classes, and a target where class 0 dominates."""
    X, y = make_classification(
        8000, n_features=8, n_informative=5, n_classes=3, class_sep=1.2, random_state=seed
    )
    source = np.arange(4000)
    rest = np.arange(4000, 8000)
    target = np.concatenate([rest[y[rest] == 0], rest[y[rest] != 0][:300]])
    return X[source], y[source], X[target], y[target]


def test_classifier_adapts_to_the_target():
    X, y, X_target, y_target = shifted_classification()
    clf = LabelShiftClassifier(
        LogisticRegression(), adapter=LabelShiftAdapter(n_resamples=0), cv=0.3, random_state=0
    ).fit(X, y)
    before = np.mean(clf.predict(X_target) == y_target)
    clf.adapt(X_target)
    frequencies = np.bincount(y_target, minlength=3) / len(y_target)
    np.testing.assert_allclose(clf.target_prior_, frequencies, atol=0.05)
    assert np.mean(clf.predict(X_target) == y_target) > before + 0.02
    with pytest.raises(ValueError, match="got labels `y`"):
        clf.adapt(X_target, y_target)


@pytest.mark.slow
def test_classifier_with_a_frozen_fitted_estimator_and_folds():
    X, y, X_target, _ = shifted_classification(1)
    model = LogisticRegression().fit(X[:2000], y[:2000])
    frozen = LabelShiftClassifier(
        FrozenEstimator(model), adapter=LabelShiftAdapter(n_resamples=0)
    ).fit(X[2000:], y[2000:])
    assert frozen.estimators_[0].estimator is model
    adapter = LabelShiftAdapter(n_resamples=0).fit(model.decision_function(X[2000:]), y[2000:])
    np.testing.assert_allclose(frozen.adapters_[0].source_prior_, adapter.source_prior_)
    folds = LabelShiftClassifier(
        LogisticRegression(), adapter=LabelShiftAdapter(n_resamples=0), cv=3
    ).fit(X, y)
    folds.adapt(X_target)
    assert len(folds.adapters_) == 3
    np.testing.assert_allclose(
        folds.target_prior_, np.mean([a.target_prior_ for a in folds.adapters_], axis=0)
    )


@pytest.mark.slow
def test_classifier_in_grid_search_and_pipelines():
    X, y, X_target, _ = shifted_classification(2)
    adapter = LabelShiftAdapter(n_resamples=0)
    search = GridSearchCV(
        LabelShiftClassifier(LogisticRegression(), adapter=adapter, cv=0.3, random_state=0),
        {"estimator__C": [0.1, 1.0], "adapter__calibrator": [None, TemperatureScaling()]},
        cv=2,
    ).fit(X, y)
    assert search.best_estimator_.adapt(X_target).target_prior_[0] > 0.6
    inner = LabelShiftClassifier(
        make_pipeline(StandardScaler(), LogisticRegression()), adapter=adapter, random_state=0
    ).fit(X, y)
    outer = make_pipeline(
        StandardScaler(),
        LabelShiftClassifier(LogisticRegression(), adapter=adapter, random_state=0),
    ).fit(X, y)
    outer[-1].adapt(outer[:-1].transform(X_target))
    inner.adapt(X_target)
    np.testing.assert_allclose(outer[-1].target_prior_, inner.target_prior_, atol=0.02)
    assert outer.predict_proba(X_target).shape == (len(X_target), 3)


@pytest.mark.slow
def test_classifier_with_a_net_and_dask_features():
    da = pytest.importorskip("dask.array")
    from sklearn_calib import NetClassifier

    X, y, X_target, _ = shifted_classification(3)
    net = NetClassifier(module__hidden_units=(16,), max_epochs=5, random_state=0)
    clf = LabelShiftClassifier(net, adapter=LabelShiftAdapter(n_resamples=0), cv=0.3)
    clf.fit(X.astype(np.float32), y)
    expected = clf.adapt(X_target.astype(np.float32)).target_prior_
    lazy = da.from_array(X_target.astype(np.float32), chunks=(500, 8))
    np.testing.assert_allclose(clf.adapt(lazy).target_prior_, expected, atol=1e-6)
    assert expected[0] > 0.6


def test_classifier_of_one_dimensional_scores_with_dask_features():
    da = pytest.importorskip("dask.array")
    X, y, X_target, _ = shifted_classification(5)
    binary, target = y < 2, X_target[:400]
    clf = LabelShiftClassifier(
        LogisticRegression(), adapter=LabelShiftAdapter(n_resamples=0), cv=0.3, random_state=0
    ).fit(X[binary], y[binary])
    assert clf.estimators_[0].decision_function(target).ndim == 1
    expected = clf.adapt(target).target_prior_
    proba = clf.predict_proba(target)
    lazy = da.from_array(target, chunks=(150, 8))
    np.testing.assert_allclose(clf.adapt(lazy).target_prior_, expected, atol=1e-6)
    np.testing.assert_allclose(clf.predict_proba(lazy).compute(), proba, atol=1e-6)


class GivenPriorAdapter(BaseEstimator):
    """An adapter of another class: softmax probabilities re-weighted to given priors,
    whose ``adapt`` sets its attributes before it checks the priors."""

    def __init__(self, input="logits"):
        self.input = input

    def fit(self, scores, y, sample_weight=None):
        self.source_prior_ = np.bincount(y) / len(y)
        return self

    def adapt(self, target_scores=None, y=None, *, target_prior=None):
        self.target_prior_ = np.asarray(target_prior, dtype=float)
        self.weights_ = self.target_prior_ / self.source_prior_
        if self.target_prior_.min() < 0:
            raise ValueError(f"Expected non-negative priors, got {target_prior}.")
        return self

    def predict_proba(self, scores):
        proba = softmax(scores, axis=1)
        if hasattr(self, "target_prior_"):
            proba *= self.weights_
        return proba / proba.sum(axis=1, keepdims=True)


@pytest.mark.parametrize(
    "adapter", [LabelShiftAdapter(n_resamples=0), GivenPriorAdapter()], ids=["ours", "other"]
)
@pytest.mark.slow
def test_classifier_failed_adapt_leaves_every_adapter_unadapted(adapter):
    X, y, X_target, _ = shifted_classification(4)
    clf = LabelShiftClassifier(LogisticRegression(), adapter=adapter, cv=2).fit(X, y)
    unadapted = clf.predict_proba(X_target)
    fitted = [vars(a).copy() for a in clf.adapters_]
    clf.adapt(target_prior=[0.6, 0.3, 0.1])
    assert not np.allclose(clf.predict_proba(X_target), unadapted)
    with pytest.raises(ValueError, match="non-negative"):
        clf.adapt(target_prior=[1.1, 0.1, -0.2])
    assert not hasattr(clf, "target_prior_")
    for one, before in zip(clf.adapters_, fitted, strict=True):
        assert vars(one).keys() == before.keys()
        for name, value in before.items():
            assert vars(one)[name] is value, name
    np.testing.assert_array_equal(clf.predict_proba(X_target), unadapted)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_uncalibrated_probabilities_with_non_finite_values_are_rejected(bad):
    # their one scan is check_probabilities', whose row sums carry NaN and inf
    adapter = quiet(passthrough().fit(SOURCE_ROWS, SOURCE_Y), SOURCE_ROWS)
    target = SOURCE_ROWS.copy()
    target[3, 1] = bad
    with pytest.raises(ValueError, match="`target_scores` contains NaN or infinite values"):
        adapter.adapt(target)
    with pytest.raises(ValueError, match="`scores` contains NaN or infinite values"):
        adapter.predict_proba(target)
