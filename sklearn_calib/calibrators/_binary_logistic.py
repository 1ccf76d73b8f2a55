"""Weighted binary logistic regression on a few features of a class's log-odds.

Platt, quadratic and beta calibration each fit ``p = sigmoid(c + sum_j coef_j f_j(s))`` where
``s`` is the one-vs-rest log-odds of a class under the scores (see
:func:`one_vs_rest_log_odds`), by minimising the weighted mean cross-entropy against
targets in [0, 1]. The fit is Newton's method with the analytic gradient and Hessian and a
backtracking line search, in float64, on standardised features (each centred and divided by
its weighted standard deviation, so that a large offset or scale of the scores does not
make the Hessian singular; the fit is affine invariant, so the coefficients follow from the
standardised solution exactly). A feature that is constant, or an affine function of the
features before it, on the rows of positive weight (scores that take one or two distinct
values) gets the coefficient 0: the design is rank-deficient there, and standardising
would blow its rounding noise up to a full-scale feature. Large inputs start from the
minimum on an evenly spaced subsample. Coefficients may be constrained to be non-negative:
the exact constrained minimum is the best feasible minimum over the faces of the
constraint set.

A fit with hard 0/1 targets has no minimum when the scores separate the class, or part of
it, from the rest (Albert and Anderson 1984): a direction of the parameters then fits the
separated rows ever better and leaves the others unchanged. The fit stops where those rows
are saturated and raises a ``ConvergenceWarning``.

:class:`OneVsRestLogisticBase` is the calibrator built on it: a binary problem fits one
model, on the positive class, and sets ``p_0 = 1 - p_1``; a multiclass problem fits one
model per class (one-vs-rest) and divides each row by its sum, as scikit-learn's
``CalibratedClassifierCV(method="sigmoid")`` does."""

import itertools
import warnings

import numpy as np
import torch
from scipy.optimize import linprog
from scipy.special import expit, log_expit
from sklearn.exceptions import ConvergenceWarning

from ._base import PROBABILITY_FLOOR, BaseCalibrator, renormalize, weighted_subsample

#: Newton stops, after taking the step, when the decrease it predicts (half the squared
#: Newton decrement of the weighted mean loss) falls below this: the step then moves the
#: logits by about 1e-5 and, Newton converging quadratically, leaves them about 1e-10 from
#: the optimum.
_TOL = 1e-10
_MAX_ITER = 100
#: A row whose probability is this close to its hard 0/1 target is saturated.
_SATURATED = 1e-6
#: A feature (or direction) whose weighted spread is at most this fraction of its size,
#: after the constant and the features before it are taken out, is dependent on them.
_RANK_RTOL = 1e-10
#: Below this predicted decrease, steps are taken in full, without a line search.
_FULL_STEP = 1e-6
#: Inputs of more than 4 times this many rows start from the minimum on a subsample.
_WARM_START_ROWS = 1 << 11
#: Above this logit, ``log(1 + exp(x))`` equals ``x`` in float64 (``exp(-x) < x * eps / 2``).
_SOFTPLUS_LINEAR = 40.0


def _logsumexp_of_others(logits):
    """``logsumexp_{j != k} z_j`` for every class ``k``."""
    edge = np.full((logits.shape[0], 1), -np.inf)
    before = np.logaddexp.accumulate(logits, axis=1)
    after = np.logaddexp.accumulate(logits[:, ::-1], axis=1)[:, ::-1]
    return np.logaddexp(np.hstack([edge, before[:, :-1]]), np.hstack([after[:, 1:], edge]))


def one_vs_rest_log_odds(scores, kind):
    """Return ``log p_k - log(1 - p_k)`` for every class, in float64.

    For logits that is ``z_k - logsumexp_{j != k} z_j``; for probabilities
    ``log(max(p_k, 1e-12)) - log(max(1 - p_k, 1e-12))`` (with ``1 - p_k`` the sum of the
    other classes).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if kind == "probabilities":
        log_proba, log_rest = one_vs_rest_log_probabilities(scores, kind)
        return log_proba - log_rest
    if scores.shape[1] == 2:
        positive = scores[:, 1] - scores[:, 0]
        return np.column_stack([-positive, positive])
    return scores - _logsumexp_of_others(scores)


def one_vs_rest_log_probabilities(scores, kind):
    """Return ``(log p_k, log(1 - p_k))`` for every class, in float64.

    Probabilities are floored at 1e-12 (and ``1 - p_k``, the sum of the other classes, too).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if kind == "probabilities":
        rest = scores[:, ::-1] if scores.shape[1] == 2 else scores.sum(axis=1)[:, None] - scores
        floor = PROBABILITY_FLOOR
        return np.log(np.maximum(scores, floor)), np.log(np.maximum(rest, floor))
    if scores.shape[1] == 2:
        positive = scores[:, 1] - scores[:, 0]
        log_proba = np.column_stack([log_expit(-positive), log_expit(positive)])
        return log_proba, log_proba[:, ::-1]
    others = _logsumexp_of_others(scores)
    total = np.logaddexp(scores, others)
    return scores - total, others - total


def _loss(logit, weighted_target, weight):
    """Weighted mean cross-entropy of ``sigmoid(logit)`` with soft targets in [0, 1]."""
    # torch's vectorised softplus is about 2.5 times numpy's logaddexp (float64, one thread)
    softplus = torch.nn.functional.softplus(torch.from_numpy(logit), threshold=_SOFTPLUS_LINEAR)
    return weight @ softplus.numpy() - weighted_target @ logit


def _sigmoid(logit):
    """``sigmoid(logit)`` by torch's vectorised kernel (about 3 times scipy's expit)."""
    return torch.sigmoid(torch.from_numpy(logit)).numpy()


def _solve(hess, rhs):
    """Solve ``hess x = rhs`` (a few unknowns); least squares when ``hess`` is singular."""
    try:
        solution = np.linalg.solve(hess, rhs)
    except np.linalg.LinAlgError:
        solution = None
    if solution is None or not np.isfinite(solution).all():
        solution = np.linalg.lstsq(hess, rhs, rcond=None)[0]
    return solution


def _design(features, weight):
    """Standardised features with a last column of ones, and their centres and spreads.

    The spreads are the features' weighted standard deviations (0 for a feature constant
    on the rows of positive weight, which is only centred).
    """
    n_samples, n_features = features.shape
    centre = weight @ features
    design = np.empty((n_samples, n_features + 1), order="F")
    deviation = design[:, :n_features]
    np.subtract(features, centre, out=deviation)
    largest = np.abs(deviation).max(axis=0)
    safe = np.where(largest > 0, largest, 1.0)
    # the weighted standard deviation, computed without squaring huge deviations
    spread = safe * np.sqrt(weight @ (deviation / safe) ** 2)
    deviation /= np.where(spread > 0, spread, 1.0)
    design[:, n_features] = 1.0
    return design, centre, spread


def _independent_features(design, centre, spread, weight):
    """The features kept: neither constant nor an affine function of the kept ones before.

    On the rows of positive weight, a feature is constant when its weighted standard
    deviation is at most _RANK_RTOL of its root mean square, and dependent when its
    standardised column, less its weighted least-squares fit by the kept standardised
    columns before it, has a weighted root mean square of at most _RANK_RTOL.

    Returns
    -------
    kept : list of int
    """
    kept = []
    for j in range(len(centre)):
        if not spread[j] > _RANK_RTOL * np.hypot(centre[j], spread[j]):
            continue
        if kept:
            # the columns are centred, so the fit needs no intercept
            basis = design[:, kept]
            weighted = basis.T * weight
            coef = np.linalg.solve(weighted @ basis, weighted @ design[:, j])
            residual = design[:, j] - basis @ coef
            if not np.sqrt(weight @ (residual * residual)) > _RANK_RTOL:
                continue
        kept.append(j)
    return kept


def _newton(design, target, weight, name, start=None):
    """Minimise the weighted cross-entropy of ``sigmoid(design @ params)`` (last column: 1).

    Starts from ``start``, or from the constant model of the mean target. Returns the
    parameters and the number of iterations.
    """
    if start is None:
        mean_target = np.clip(weight @ target, PROBABILITY_FLOOR, 1.0 - PROBABILITY_FLOOR)
        start = np.zeros(design.shape[1])
        start[-1] = np.log(mean_target / (1.0 - mean_target))
    params = start
    weighted_target = weight * target
    logit = design @ params
    loss = _loss(logit, weighted_target, weight)
    for iteration in range(1, _MAX_ITER + 1):
        proba = _sigmoid(logit)
        weighted_proba = weight * proba
        grad = design.T @ (weighted_proba - weighted_target)
        curvature = weighted_proba - weighted_proba * proba
        hess = (design.T * curvature) @ design
        step = _solve(hess, -grad)
        if -(grad @ step) / 2 <= _TOL or np.all(params + step == params):
            _warn_if_separated(design, proba, target, weight, hess, name)
            return params + step, iteration
        slope = grad @ step
        direction = design @ step
        if -slope / 2 <= _FULL_STEP:
            # Close to the minimum the full Newton step decreases the loss.
            params, logit = params + step, logit + direction
            loss = None
            continue
        if loss is None:
            loss = _loss(logit, weighted_target, weight)
        size = 1.0
        while True:
            candidate = logit + size * direction
            new_loss = _loss(candidate, weighted_target, weight)
            if new_loss <= loss + 1e-4 * size * slope or size < 1e-10:
                break
            size /= 2
        if size < 1e-10:
            # No step decreases the loss beyond rounding: the minimum is reached.
            _warn_if_separated(design, proba, target, weight, hess, name)
            return params, iteration
        params, logit, loss = params + size * step, candidate, new_loss
    warnings.warn(
        f"{name} did not converge in {_MAX_ITER} Newton steps (predicted decrease "
        f"{-(grad @ step) / 2:.3g}), for example because the scores separate the classes.",
        ConvergenceWarning,
        stacklevel=6,
    )
    return params, _MAX_ITER


def _warn_if_separated(design, proba, target, weight, hess, name):
    """Raise a ConvergenceWarning when the fit stopped without a minimum (see module doc)."""
    if _separated(design, proba, target, weight, hess):
        warnings.warn(
            f"{name}: the scores separate the class from the rest (or some of its scores from "
            "the others, or the class is absent), so the fit has no minimum; the "
            f"probabilities of the separated scores are saturated, within {_SATURATED:g} of "
            "the labels.",
            ConvergenceWarning,
            stacklevel=7,
        )


def _separated(design, proba, target, weight, hess):
    """Whether a direction of the parameters fits the saturated rows better and the others alike.

    The rows of positive weight fitted within _SATURATED of a hard 0/1 target are the
    saturated ones. The directions that leave the other rows' logits unchanged are the
    null space of their design; along such a direction ``v`` the fit has no minimum when
    every saturated row's logit moves towards its target, ``(2 t - 1) x v >= 0``, and some
    does (a small linear program on that null space). Such a direction has a curvature
    ``v' hess v`` below ``_SATURATED`` times the design's spread along it, at most
    ``n_params`` for a unit ``v`` (standardised columns and ones): a Hessian whose
    eigenvalues all exceed ``n_params * _SATURATED`` rules the search out.
    """
    if np.linalg.eigvalsh(hess)[0] > len(hess) * _SATURATED:
        return False
    rows = weight > 0
    design, proba, target = design[rows], proba[rows], target[rows]
    saturated = ((target == 0) | (target == 1)) & (np.abs(proba - target) < _SATURATED)
    if not saturated.any():
        return False
    free = _null_space(design[~saturated])
    if free.shape[1] == 0:
        return False
    towards = (2 * target[saturated] - 1)[:, None] * (design[saturated] @ free)
    towards /= np.abs(towards).max()
    # maximise the total move towards the targets, every row moving towards its own
    result = linprog(
        -towards.sum(axis=0),
        A_ub=-towards,
        b_ub=np.zeros(len(towards)),
        bounds=[(-1.0, 1.0)] * free.shape[1],
        method="highs",
    )
    return bool(result.status == 0 and -result.fun > _RANK_RTOL * len(towards))


def _null_space(design):
    """An orthonormal basis (columns) of the directions ``v`` with ``design @ v = 0``."""
    n_params = design.shape[1]
    if design.shape[0] == 0:
        return np.eye(n_params)
    triangle = np.linalg.qr(design, mode="r")
    _, singular, right = np.linalg.svd(triangle)
    rank = int(np.sum(singular > _RANK_RTOL * singular[0])) if singular[0] > 0 else 0
    return right[rank:].T


def fit_logistic(features, target, weight, *, nonnegative=(), name="calibrator"):
    """Fit ``sigmoid(intercept + features @ coef)`` by weighted cross-entropy.

    Features that are constant or affine functions of the features before them (on the
    rows of positive weight) get the coefficient 0 (see the module docstring).

    Parameters
    ----------
    features : ndarray of shape (n_samples, n_features), float64
        Finite features.
    target : ndarray of shape (n_samples,)
        Targets in [0, 1].
    weight : ndarray of shape (n_samples,)
        Non-negative weights summing to 1.
    nonnegative : sequence of int, default=()
        Features whose coefficient must be >= 0.
    name : str, default="calibrator"
        Calibrator name for the warnings.

    Returns
    -------
    coef : ndarray of shape (n_features,)
    intercept : float
    n_iter : int
        Newton iterations (of the face that gave the solution).
    """
    full_design, centre, spread = _design(features, weight)
    n_features = features.shape[1]
    kept = _independent_features(full_design, centre, spread, weight)
    best = None
    for fixed in _faces([j for j in nonnegative if j in kept]):
        free = [j for j in kept if j not in fixed]
        if len(free) == n_features:
            design = full_design
        else:
            design = full_design[:, [*free, n_features]]
        start = _subsample_minimum(design, target, weight, name)
        params, n_iter = _newton(design, target, weight, name, start)
        if (params[: len(free)][np.isin(free, nonnegative)] < 0).any():
            continue
        coef = np.zeros(n_features)
        coef[free] = params[: len(free)] / spread[free]
        if not fixed:
            best = (coef, 0.0, params[-1], n_iter)
            break
        loss = _loss(design @ params, weight * target, weight)
        if best is None or loss < best[1]:
            best = (coef, loss, params[-1], n_iter)
    coef, _, intercept, n_iter = best
    return coef, intercept - coef @ centre, n_iter


def _subsample_minimum(design, target, weight, name):
    """The minimum on an evenly spaced subsample of a large input (None for a small one)."""
    if len(target) <= 4 * _WARM_START_ROWS:
        return None
    rows, sub_weight = weighted_subsample(len(target), _WARM_START_ROWS, weight)
    if rows is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        params, _ = _newton(design[rows], target[rows], sub_weight / sub_weight.sum(), name)
    return params


def _faces(nonnegative):
    """Subsets of ``nonnegative`` to fix at 0: none first, then by increasing size."""
    for size in range(len(nonnegative) + 1):
        yield from itertools.combinations(nonnegative, size)


class OneVsRestLogisticBase(BaseCalibrator):
    """One logistic model of each class's one-vs-rest log-odds (of the positive class if binary).

    Subclasses define ``_design(log_odds)``, the features of a column of log-odds (or
    override ``_designs(scores)``), and may override ``_targets`` (hard 0/1 targets by
    default), ``_nonnegative`` (features whose coefficient must be >= 0) and
    ``_store``/``_coefficients`` (the attribute layout).
    """

    _nonnegative = ()

    @staticmethod
    def _modelled(n_classes):
        """The classes with a model: the positive one of a binary problem, else all."""
        return [1] if n_classes == 2 else range(n_classes)

    def _designs(self, scores):
        """The design matrix of each modelled class."""
        log_odds = one_vs_rest_log_odds(scores, self.input)
        return [self._design(log_odds[:, k]) for k in self._modelled(scores.shape[1])]

    @staticmethod
    def _targets(positive, counts):
        return positive.astype(np.float64)

    def _store(self, coef, intercept, n_iter):
        self.coef_ = coef
        self.intercept_ = intercept
        self.n_iter_ = n_iter

    def _coefficients(self):
        return self.coef_

    def _fit(self, scores, y_index, sample_weight):
        counts = np.ones(len(y_index)) if sample_weight is None else sample_weight
        weight = counts / counts.sum()
        fitted = [
            fit_logistic(
                design,
                self._targets(y_index == k, counts),
                weight,
                nonnegative=self._nonnegative,
                name=type(self).__name__,
            )
            for k, design in zip(
                self._modelled(scores.shape[1]), self._designs(scores), strict=True
            )
        ]
        coef, intercept, n_iter = zip(*fitted, strict=True)
        self._store(np.array(coef), np.array(intercept), np.array(n_iter))

    def _predict_proba(self, scores):
        coef = self._coefficients()
        logits = np.column_stack(
            [design @ coef[i] for i, design in enumerate(self._designs(scores))]
        )
        logits += self.intercept_
        if scores.shape[1] == 2:
            return np.column_stack([expit(-logits[:, 0]), expit(logits[:, 0])])
        return renormalize(expit(logits))
