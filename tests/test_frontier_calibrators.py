"""Structured vector/matrix scaling, Dirichlet, quadratic and beta calibration, the solver.

Agreement with the reference packages (probmetrics, betacal) on the same input, exact
oracles (scikit-learn's unpenalised logistic regression on the same features, brute-force
grids), and properties.
"""

import warnings

import numpy as np
import pytest
from scipy.special import log_softmax, softmax
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from sklearn_calib.calibrators import (
    BetaCalibration,
    DirichletCalibration,
    MatrixScaling,
    PlattScaling,
    QuadraticScaling,
    StructuredMatrixScaling,
    StructuredVectorScaling,
    TemperatureScaling,
    VectorScaling,
)
from sklearn_calib.calibrators._affine_solver import (
    MatrixMap,
    TemperatureBiasMap,
    VectorMap,
    _Objective,
    _scaled_inverses,
)

probmetrics = pytest.importorskip("probmetrics.calibrators")
betacal = pytest.importorskip("betacal")


def biased_logits(n_samples, n_classes, seed=0):
    """Overconfident logits (labels from softmax(t), logits 2.5 t) with a class-wise bias."""
    rng = np.random.default_rng(seed)
    true = rng.normal(size=(n_samples, n_classes)) * 1.5
    true[np.arange(n_samples), rng.integers(0, n_classes, n_samples)] += 2
    gumbel = -np.log(-np.log(rng.uniform(size=true.shape)))
    y = np.argmax(true + gumbel, axis=1)
    return 2.5 * true + rng.normal(size=n_classes) * 0.5, y


def mean_nll(proba, y, sample_weight=None):
    return -np.average(np.log(proba[np.arange(len(y)), y]), weights=sample_weight)


def binary_scores(n_samples, seed, a=0.7, b=1.6, c=0.3):
    """Probabilities q and labels drawn from a beta-calibration map of them."""
    rng = np.random.default_rng(seed)
    q = 1 / (1 + np.exp(-rng.normal(size=n_samples) * 2))
    true = 1 / (1 + np.exp(-(a * np.log(q) - b * np.log1p(-q) + c)))
    return q, (rng.random(n_samples) < true).astype(int)


# ------------------------------------------------------------------------------ solver


@pytest.mark.parametrize(
    "affine", [VectorMap, TemperatureBiasMap, MatrixMap], ids=lambda a: a.__name__
)
def test_solver_gradient_and_hessian_match_finite_differences(affine):
    rng = np.random.default_rng(0)
    logits, y = biased_logits(60, 3, seed=1)
    weight = rng.uniform(0.5, 2.0, size=60)
    weight /= weight.sum()
    n_params = affine.n_params(3)
    penalty = rng.uniform(0, 0.1, size=n_params)
    objective = _Objective(
        affine, np.ascontiguousarray(logits.T), y, weight, penalty, affine.identity(3)
    )
    theta = affine.identity(3) + 0.1 * rng.normal(size=n_params)
    value, softmax_state = objective.value(theta)
    gradient = objective.gradient(theta, softmax_state)
    hessian = objective.hessian(softmax_state)
    step = 1e-6
    for j in range(n_params):
        shift = np.zeros(n_params)
        shift[j] = step
        up, up_state = objective.value(theta + shift)
        down, down_state = objective.value(theta - shift)
        assert (up - down) / (2 * step) == pytest.approx(gradient[j], abs=1e-7)
        column = (
            objective.gradient(theta + shift, up_state)
            - objective.gradient(theta - shift, down_state)
        ) / (2 * step)
        np.testing.assert_allclose(hessian[:, j], column, atol=1e-6)
    direct = -weight @ np.log(softmax(affine.forward(logits.T, theta).T, axis=1)[np.arange(60), y])
    assert value == pytest.approx(direct + penalty @ (theta - affine.identity(3)) ** 2, rel=1e-12)


@pytest.mark.slow
def test_matrix_scaling_by_lbfgs_reaches_the_multinomial_logistic_regression_minimum():
    # 16 classes: 272 parameters take L-BFGS steps (15 classes would take Newton steps).
    # Unpenalised matrix scaling is multinomial logistic regression on the logits.
    logits, y = biased_logits(3000, 16, seed=2)
    ms = MatrixScaling(l2_regularization_off_diagonal=0.0, tol=1e-12).fit(logits, y)
    reference = LogisticRegression(C=np.inf, tol=1e-12, max_iter=20_000).fit(logits, y)
    ours = mean_nll(ms.predict_proba(logits), y)
    theirs = mean_nll(reference.predict_proba(logits), y)
    assert ours <= theirs + 1e-8
    assert ours == pytest.approx(theirs, abs=1e-6)


def test_preconditioner_block_inverses_by_cholesky_and_by_eigenvalues():
    # Positive definite blocks (Cholesky) are inverted exactly; a singular block gets the
    # inverse of itself plus 1e-12 m on the (unit) diagonal; an indefinite one (Cholesky
    # fails) has its eigenvalues floored at 1e-12 m, on the unit-diagonal scale.
    rng = np.random.default_rng(0)
    factors = rng.normal(size=(3, 4, 10)) * np.array([1.0, 10.0, 0.1, 3.0])[:, None]
    definite = factors @ factors.transpose(0, 2, 1)
    singular = np.outer([1.0, 2.0, 0.0, 1.0], [1.0, 2.0, 0.0, 1.0]) + np.diag([0, 0, 4.0, 0])
    indefinite = np.diag([2.0, 1.0, 3.0, 1.0])
    indefinite[0, 1] = indefinite[1, 0] = 2.0  # top-left eigenvalues (3 -+ sqrt(17)) / 2
    blocks = np.concatenate([definite, singular[None], indefinite[None]])
    inverses = _scaled_inverses(blocks)
    np.testing.assert_allclose(inverses[:3], np.linalg.inv(definite), rtol=1e-8)
    for block, inverse in zip(blocks[3:], inverses[3:], strict=True):
        scale = 1 / np.sqrt(np.diag(block))
        scaled = block * np.outer(scale, scale)
        values, vectors = np.linalg.eigh(scaled)
        floored = np.where(values > 4e-12, values, 4e-12) if values.min() < 0 else values + 4e-12
        expected = (vectors / floored) @ vectors.T * np.outer(scale, scale)
        # the singular block's inverse has condition number 1e12: rounding errors of 1e-4
        np.testing.assert_allclose(inverse, expected, rtol=1e-3)


# ------------------------------------------------------------ structured scaling (SMS/SVS)


def _probmetrics_fit(name, proba, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return probmetrics.get_calibrator(name).fit(proba, y)


@pytest.mark.parametrize(
    "ours, name",
    [
        (TemperatureScaling(), "temp-scaling"),
        (StructuredVectorScaling(), "svs"),
        (StructuredMatrixScaling(), "sms"),
    ],
    ids=["TS", "SVS", "SMS"],
)
@pytest.mark.parametrize("n_classes", [3, 8])
def test_agrees_with_probmetrics_on_the_same_input(ours, name, n_classes):
    # probmetrics takes probabilities (its temperature is a 30-step bisection, its penalised
    # fits torch BFGS on float32 log-probabilities): the same model and objective within
    # its precision. Held-out NLL within 1e-4, probabilities within 2e-3.
    logits, y = biased_logits(4000, n_classes, seed=3)
    fit, test = slice(0, 2000), slice(2000, None)
    fitted = clone(ours).fit(logits[fit], y[fit])
    theirs = _probmetrics_fit(name, softmax(logits[fit], axis=1), y[fit])
    ours_proba = fitted.predict_proba(logits[test])
    their_proba = theirs.predict_proba(softmax(logits[test], axis=1))
    np.testing.assert_allclose(ours_proba, their_proba, atol=2e-3)
    assert mean_nll(ours_proba, y[test]) == pytest.approx(mean_nll(their_proba, y[test]), abs=1e-4)
    assert mean_nll(ours_proba, y[test]) < mean_nll(softmax(logits[test], axis=1), y[test])


@pytest.mark.parametrize("ours", [StructuredVectorScaling(), StructuredMatrixScaling()], ids=repr)
def test_structured_scaling_minimises_its_published_objective(ours):
    # The fitted parameters are a minimum of the mean NLL plus the published penalties
    # (lambda K/n on b and diag D, lambda K(K-1)/n off the diagonal): no random
    # perturbation decreases it, and the gradient there is ~0.
    logits, y = biased_logits(600, 4, seed=4)
    fitted = clone(ours).set_params(l2_regularization_intercept=3.0)
    if isinstance(ours, StructuredMatrixScaling):
        fitted.set_params(l2_regularization_off_diagonal=2.0)
    fitted.fit(logits, y)
    proba_t = softmax(logits / fitted.temperature_, axis=1)
    assert fitted.uniform_weight_ == pytest.approx(1 / 601)
    features = np.log((1 - 1 / 601) * proba_t + 1 / (601 * 4))
    n, k = 600, 4
    if isinstance(ours, StructuredVectorScaling):
        params = np.concatenate([fitted.scale_, fitted.bias_])

        def objective(params):
            logits_ = features * params[:k] + params[k:]
            delta = params[:k] - 1
            return mean_nll(softmax(logits_, axis=1), y) + k / n * (
                delta @ delta + 3.0 * params[k:] @ params[k:]
            )
    else:
        params = np.hstack([fitted.coef_, fitted.intercept_[:, None]]).ravel()

        def objective(params):
            rows = params.reshape(k, k + 1)
            delta = rows[:, :k] - np.eye(k)
            off = delta - np.diag(np.diag(delta))
            logits_ = features @ rows[:, :k].T + rows[:, k]
            return mean_nll(softmax(logits_, axis=1), y) + (
                k / n * np.sum(np.diag(delta) ** 2)
                + 2.0 * k * (k - 1) / n * np.sum(off**2)
                + 3.0 * k / n * rows[:, k] @ rows[:, k]
            )

    best = objective(params)
    rng = np.random.default_rng(5)
    for _ in range(50):
        assert objective(params + 1e-3 * rng.normal(size=params.shape)) >= best - 1e-12
    np.testing.assert_allclose(fitted.predict_proba(logits).sum(axis=1), 1.0)


@pytest.mark.parametrize("ours", [StructuredVectorScaling(), StructuredMatrixScaling()], ids=repr)
def test_structured_scaling_with_huge_penalties_is_temperature_scaling(ours):
    logits, y = biased_logits(500, 5, seed=6)
    penalties = {"l2_regularization_intercept": 1e12, "l2_regularization_diagonal": 1e12}
    if isinstance(ours, StructuredMatrixScaling):
        penalties["l2_regularization_off_diagonal"] = 1e12
    fitted = clone(ours).set_params(**penalties).fit(logits, y)
    ts = TemperatureScaling().fit(logits, y)
    assert fitted.temperature_ == pytest.approx(ts.temperature_)
    epsilon = fitted.uniform_weight_
    expected = (1 - epsilon) * ts.predict_proba(logits) + epsilon / 5
    np.testing.assert_allclose(fitted.predict_proba(logits), expected, atol=1e-8)
    # and keeps the argmax of the logits, as temperature scaling does
    np.testing.assert_array_equal(fitted.predict(logits), logits.argmax(axis=1))


# --------------------------------------------------------------------------- Dirichlet


def test_dirichlet_cross_validation_matches_a_brute_force_grid():
    logits, y = biased_logits(450, 3, seed=9)
    grid = (1e-1, 1e-3)
    fitted = DirichletCalibration(
        l2_regularization_off_diagonal_grid=grid,
        l2_regularization_intercept_grid=grid,
        cv=3,
        tol=1e-12,
    ).fit(logits, y)
    features = np.maximum(log_softmax(logits, axis=1), np.log(1e-12))
    folds = list(StratifiedKFold(3).split(logits, y))
    table = {}
    for lam in grid:
        for mu in grid:
            scores = []
            for train, test in folds:
                ms = MatrixScaling(
                    l2_regularization_off_diagonal=lam, l2_regularization_intercept=mu, tol=1e-12
                )
                ms.fit(features[train], y[train], classes=[0, 1, 2])
                scores.append(mean_nll(ms.predict_proba(features[test]), y[test]))
            table[lam, mu] = np.mean(scores)
    results = fitted.cv_results_
    for i, (lam, mu) in enumerate(
        zip(
            results["l2_regularization_off_diagonal"],
            results["l2_regularization_intercept"],
            strict=True,
        )
    ):
        assert results["mean_test_nll"][i] == pytest.approx(table[lam, mu], abs=1e-7)
    best = min(table, key=table.get)
    assert (fitted.l2_regularization_off_diagonal_, fitted.l2_regularization_intercept_) == best
    pairs = list(
        zip(
            results["l2_regularization_off_diagonal"],
            results["l2_regularization_intercept"],
            strict=True,
        )
    )
    assert results["rank_test_nll"][pairs.index(best)] == 1
    final = MatrixScaling(
        l2_regularization_off_diagonal=best[0], l2_regularization_intercept=best[1], tol=1e-12
    )
    final.fit(features, y)
    np.testing.assert_allclose(
        fitted.predict_proba(logits), final.predict_proba(features), atol=1e-7
    )


@pytest.mark.slow
def test_dirichlet_reads_probabilities_and_logits_alike():
    logits, y = biased_logits(300, 4, seed=10)
    on_logits = DirichletCalibration(cv=3).fit(logits, y)
    proba = softmax(logits, axis=1)
    on_proba = DirichletCalibration(cv=3, input="probabilities").fit(proba, y)
    np.testing.assert_allclose(
        on_logits.predict_proba(logits), on_proba.predict_proba(proba), atol=1e-6
    )
    assert on_logits.l2_regularization_off_diagonal_ == on_proba.l2_regularization_off_diagonal_


def test_dirichlet_names_a_fold_without_weight():
    logits, y = biased_logits(60, 3, seed=11)
    weight = np.zeros(60)
    weight[:5] = 1.0  # stratified folds in row order: all the weight is held out by fold 1
    with pytest.raises(ValueError, match="got 0 for the training part of fold 1 of 3"):
        DirichletCalibration(cv=3).fit(logits, y, sample_weight=weight)


@pytest.mark.parametrize("grid", [[], [[0.1]], [-1.0], [np.nan]])
def test_dirichlet_rejects_bad_grids(grid):
    logits, y = biased_logits(100, 3, seed=11)
    with pytest.raises(ValueError, match="l2_regularization_off_diagonal_grid"):
        DirichletCalibration(l2_regularization_off_diagonal_grid=grid, cv=3).fit(logits, y)


# ------------------------------------------------------------- quadratic and beta scaling


def test_quadratic_scaling_is_unpenalised_logistic_regression_on_s_and_s_squared():
    logits, y = biased_logits(2000, 2, seed=12)
    s = logits[:, 1] - logits[:, 0]
    ours = QuadraticScaling().fit(s, y)
    design = np.column_stack([s, s * s])
    reference = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(design, y)
    np.testing.assert_allclose(ours.coef_[0], reference.coef_[0], rtol=1e-5)
    np.testing.assert_allclose(ours.predict_proba(s), reference.predict_proba(design), atol=1e-7)
    # probmetrics' quadratic scaling (scikit-learn's default tolerance, on log-odds it
    # computes in float32) agrees to that precision
    proba = softmax(logits, axis=1)
    theirs = _probmetrics_fit("quadratic-scaling", proba, y)
    np.testing.assert_allclose(ours.predict_proba(s), theirs.predict_proba(proba), atol=5e-3)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beta_calibration_agrees_with_betacal(seed):
    q, y = binary_scores(3000, seed)
    ours = BetaCalibration(input="probabilities").fit(q, y)
    theirs = betacal.BetaCalibration().fit(q, y)
    a, b, _ = theirs.calibrator_.map_
    # betacal's logistic regression stops at scikit-learn's default tolerance
    np.testing.assert_allclose(ours.coef_[0], [a, b], rtol=5e-3)
    np.testing.assert_allclose(ours.predict_proba(q)[:, 1], theirs.predict(q), atol=1e-3)
    # the exact optimum: unpenalised logistic regression on (log q, -log(1 - q))
    design = np.column_stack([np.log(q), -np.log1p(-q)])
    exact = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(design, y)
    np.testing.assert_allclose(ours.coef_[0], exact.coef_[0], rtol=1e-5)
    np.testing.assert_allclose(ours.predict_proba(q), exact.predict_proba(design), atol=1e-7)


def test_beta_calibration_keeps_a_and_b_non_negative_like_betacal():
    # Labels that rise with 1 - q near q = 1: the unconstrained fit has a < 0; beta
    # calibration fixes a = 0 and refits b and c (betacal's rule, the constrained optimum).
    q, y = binary_scores(3000, 3, a=-0.8, b=1.2, c=0.0)
    ours = BetaCalibration(input="probabilities").fit(q, y)
    design = np.column_stack([np.log(q), -np.log1p(-q)])
    unconstrained = LogisticRegression(C=np.inf, tol=1e-12).fit(design, y)
    assert unconstrained.coef_[0, 0] < 0
    assert ours.coef_[0, 0] == 0 and ours.coef_[0, 1] > 0
    theirs = betacal.BetaCalibration().fit(q, y)
    assert theirs.calibrator_.map_[0] == 0
    np.testing.assert_allclose(ours.predict_proba(q)[:, 1], theirs.predict(q), atol=1e-3)
    # the calibration map is monotone in q
    grid = np.linspace(0.001, 0.999, 999)
    assert (np.diff(ours.predict_proba(grid)[:, 1]) >= 0).all()


def test_beta_calibration_of_logits_equals_beta_calibration_of_their_probabilities():
    logits, y = biased_logits(1000, 2, seed=13)
    d = logits[:, 1] - logits[:, 0]
    on_logits = BetaCalibration().fit(d, y)
    q = 1 / (1 + np.exp(-d))
    on_proba = BetaCalibration(input="probabilities").fit(q, y)
    np.testing.assert_allclose(on_logits.predict_proba(d), on_proba.predict_proba(q), atol=1e-6)


@pytest.mark.parametrize("calibrator", [QuadraticScaling(), BetaCalibration()], ids=repr)
def test_binary_maps_are_one_vs_rest_beyond_two_classes(calibrator):
    logits, y = biased_logits(900, 3, seed=14)
    fitted = clone(calibrator).fit(logits, y)
    assert fitted.coef_.shape == (3, 2)
    raw = np.column_stack(
        [
            clone(calibrator)
            .fit(np.column_stack([np.log(1 - p), np.log(p)]), (y == k).astype(int))
            .predict_proba(np.column_stack([np.log(1 - p), np.log(p)]))[:, 1]
            for k, p in enumerate(softmax(logits, axis=1).T)
        ]
    )
    np.testing.assert_allclose(
        fitted.predict_proba(logits), raw / raw.sum(axis=1, keepdims=True), atol=1e-6
    )


def test_separable_scores_warn_for_unpenalised_binary_maps():
    s = np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])
    y = np.array([0, 0, 0, 1, 1, 1])
    for calibrator in (QuadraticScaling(), BetaCalibration()):
        with pytest.warns(ConvergenceWarning, match="separate the class from the rest"):
            fitted = calibrator.fit(s, y)
        proba = fitted.predict_proba(s)[:, 1]
        np.testing.assert_allclose(proba, y, atol=1e-6)


# ------------------------------------------------ rank-deficient designs of the binary maps

BINARY_MAPS = [PlattScaling(), QuadraticScaling(), BetaCalibration()]


def platt_target_mean(positive):
    """The mean of Platt's smoothed targets: the probability of an intercept-only fit."""
    n_positive, n_negative = positive.sum(), (~positive).sum()
    high, low = (n_positive + 1) / (n_positive + 2), 1 / (n_negative + 2)
    return (n_positive * high + n_negative * low) / len(positive)


@pytest.mark.parametrize("calibrator", BINARY_MAPS, ids=repr)
def test_constant_scores_give_a_flat_map(calibrator):
    # Every row has the same logits: the one-vs-rest log-odds are constant, so each class's
    # map is its intercept alone, and nudging the scores changes nothing.
    y = np.random.default_rng(13).integers(0, 5, 200)
    logits = np.zeros((200, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = clone(calibrator).fit(logits, y)
    np.testing.assert_array_equal(fitted.coef_, 0.0)
    proba = fitted.predict_proba(logits[:1])
    nudged = fitted.predict_proba(logits[:1] + np.array([1e-9, 0, 0, 0, -1e-9]))
    np.testing.assert_array_equal(nudged, proba)
    if isinstance(calibrator, PlattScaling):
        expected = np.array([platt_target_mean(y == k) for k in range(5)])
    else:
        expected = np.bincount(y, minlength=5) / len(y)
    np.testing.assert_allclose(proba[0], expected / expected.sum(), rtol=1e-10)


@pytest.mark.parametrize("calibrator", BINARY_MAPS, ids=repr)
def test_binary_scores_constant_at_one_value_predict_the_base_rate(calibrator):
    y = np.random.default_rng(14).integers(0, 2, 100)
    fitted = clone(calibrator).fit(np.full(100, 0.3), y)
    expected = platt_target_mean(y == 1) if isinstance(calibrator, PlattScaling) else y.mean()
    np.testing.assert_allclose(
        fitted.predict_proba(np.array([-3.0, 0.3, 3.0]))[:, 1], expected, rtol=1e-10
    )


@pytest.mark.parametrize("values", [(-1.0, 2.0), (-0.7, 0.2), (0.3, -2.0)])
def test_quadratic_scaling_on_two_distinct_scores_is_order_free_and_warns(values):
    # Two distinct log-odds: s^2 is an affine function of s, so only (1, s) is fitted; the
    # separated row has no finite fit (Albert and Anderson 1984), the other four are 1 in 4.
    low, high = values
    scores = np.array([low] * 4 + [high])
    y = np.array([1, 0, 0, 0, 1])
    rng = np.random.default_rng(15)
    for order in [np.arange(5), *(rng.permutation(5) for _ in range(12))]:
        with pytest.warns(ConvergenceWarning, match="separate the class from the rest"):
            fitted = QuadraticScaling().fit(scores[order], y[order])
        assert fitted.coef_[0, 1] == 0.0
        proba = fitted.predict_proba(np.array([low, high]))[:, 1]
        np.testing.assert_allclose(proba, [0.25, 1.0], atol=1e-6)


def test_quadratic_scaling_on_two_distinct_probabilities_is_the_line_through_both():
    # The probabilities 0.2 and 0.7: the fit matches each value's frequency and extends the
    # line through the two points in log-odds (the quadratic term is not identified).
    rng = np.random.default_rng(16)
    proba = np.where(rng.random(100) < 0.5, 0.2, 0.7)
    y = (rng.random(100) < proba).astype(int)
    low, high = y[proba == 0.2].mean(), y[proba == 0.7].mean()

    def logit(p):
        return np.log(p) - np.log1p(-p)

    slope = (logit(high) - logit(low)) / (logit(0.7) - logit(0.2))
    expected = [low, high, 1 / (1 + np.exp(-(logit(low) + slope * (logit(0.9) - logit(0.2)))))]
    for seed in range(6):
        order = np.random.default_rng(seed).permutation(100)
        fitted = QuadraticScaling(input="probabilities").fit(proba[order], y[order])
        assert fitted.coef_[0, 1] == 0.0
        np.testing.assert_allclose(
            fitted.predict_proba(np.array([0.2, 0.7, 0.9]))[:, 1], expected, rtol=1e-8
        )


@pytest.mark.parametrize("calibrator", [QuadraticScaling(), BetaCalibration()], ids=repr)
def test_confident_scores_that_do_not_separate_give_no_warning(calibrator):
    # Many rows fitted within 1e-6 of their labels, but no direction that fits them better
    # and leaves the others alone: a finite minimum.
    rng = np.random.default_rng(17)
    scores = rng.normal(size=3000) * 20
    y = (rng.random(3000) < 1 / (1 + np.exp(-scores))).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        fitted = clone(calibrator).fit(scores, y)
    assert np.isfinite(fitted.coef_).all() and np.abs(fitted.coef_).max() < 10


def test_vector_scaling_agrees_with_probmetrics_vector_scaling():
    # probmetrics' VectorScalingCalibrator fits softmax(log p / t + b) by BFGS; ours
    # softmax(a log p + b) on the same log-probabilities: the same family and optimum.
    logits, y = biased_logits(2000, 4, seed=15)
    log_proba = log_softmax(logits, axis=1)
    ours = VectorScaling().fit(log_proba, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = probmetrics.VectorScalingCalibrator().fit(np.exp(log_proba), y)
    ours_proba = ours.predict_proba(log_proba)
    their_proba = theirs.predict_proba(np.exp(log_proba))
    np.testing.assert_allclose(ours_proba, their_proba, atol=1e-3)
    assert mean_nll(ours_proba, y) <= mean_nll(their_proba, y) + 1e-12
