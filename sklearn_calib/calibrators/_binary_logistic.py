"""Weighted binary logistic regression on a few features of a class's log-odds.

:class:`OneVsRestLogisticBase` is the calibrator built on it: a binary problem fits one
model, on the positive class, and sets ``p_0 = 1 - p_1``; a multiclass problem fits one
model per class (one-vs-rest) and divides each row by its sum, as scikit-learn's
``CalibratedClassifierCV(method="sigmoid")`` does.


Platt, quadratic and beta calibration each fit ``p = sigmoid(c + sum_j coef_j f_j(s))`` where
``s`` is the one-vs-rest log-odds of a class under the scores (see
:func:`one_vs_rest_log_odds`), by minimising the weighted mean cross-entropy against
targets in [0, 1]. The fit is Newton's method with the analytic gradient and Hessian and a
backtracking line search, in float64, on standardised features (each centred and divided by
its weighted standard deviation, so that a large offset or scale of the scores does not
make the Hessian singular; the fit is affine invariant, so the coefficients follow from the
standardised solution exactly). Coefficients may be constrained to be non-negative: the
exact constrained minimum is the best feasible minimum over the faces of the constraint set.
"""

import itertools
import warnings

import numpy as np
from scipy.special import expit, log_expit
from sklearn.exceptions import ConvergenceWarning

from ._base import PROBABILITY_FLOOR, BaseCalibrator, renormalize

#: Newton stops, after taking the step, when the decrease it predicts (half the squared
#: Newton decrement of the weighted mean loss) falls below this: the step then moves the
#: logits by about 1e-7 and leaves them about 1e-14 from the optimum.
_TOL = 1e-15
_MAX_ITER = 100


def one_vs_rest_log_odds(scores, kind):
    """Return ``log p_k - log(1 - p_k)`` for every class, in float64.

    For logits that is ``z_k - logsumexp_{j != k} z_j``; for probabilities
    ``log(max(p_k, 1e-12)) - log(max(1 - p_k, 1e-12))``.
    """
    scores = scores.astype(np.float64)
    if kind == "probabilities":
        rest = scores.sum(axis=1, keepdims=True) - scores
        floor = PROBABILITY_FLOOR
        return np.log(np.maximum(scores, floor)) - np.log(np.maximum(rest, floor))
    n_samples = scores.shape[0]
    edge = np.full((n_samples, 1), -np.inf)
    before = np.logaddexp.accumulate(scores, axis=1)
    after = np.logaddexp.accumulate(scores[:, ::-1], axis=1)[:, ::-1]
    others = np.logaddexp(np.hstack([edge, before[:, :-1]]), np.hstack([after[:, 1:], edge]))
    return scores - others


def _loss(params, design, target, weight):
    """Weighted mean cross-entropy of ``sigmoid(design @ params)`` with soft targets."""
    logit = design @ params
    return -weight @ (target * log_expit(logit) + (1.0 - target) * log_expit(-logit))


def _standardise(features, weight):
    """Return the standardised features with their weighted centres and spreads."""
    centre = weight @ features
    deviation = features - centre
    largest = np.abs(deviation).max(axis=0)
    safe = np.where(largest > 0, largest, 1.0)
    # the weighted standard deviation, computed without squaring huge deviations
    spread = safe * np.sqrt(weight @ (deviation / safe) ** 2)
    spread = np.where(spread > 0, spread, 1.0)
    return deviation / spread, centre, spread


def _newton(design, target, weight, name):
    """Minimise the weighted cross-entropy of ``sigmoid(design @ params)`` (last column: 1)."""
    mean_target = np.clip(weight @ target, PROBABILITY_FLOOR, 1.0 - PROBABILITY_FLOOR)
    params = np.zeros(design.shape[1])
    params[-1] = np.log(mean_target / (1.0 - mean_target))
    loss = _loss(params, design, target, weight)
    for iteration in range(1, _MAX_ITER + 1):
        proba = expit(design @ params)
        grad = design.T @ (weight * (proba - target))
        hess = (design * (weight * proba * (1.0 - proba))[:, None]).T @ design
        step = np.linalg.lstsq(hess, -grad, rcond=None)[0]
        if -(grad @ step) / 2 <= _TOL or np.all(params + step == params):
            return params + step, loss, iteration
        slope = grad @ step
        size = 1.0
        while True:
            candidate = params + size * step
            new_loss = _loss(candidate, design, target, weight)
            if new_loss <= loss + 1e-4 * size * slope or size < 1e-10:
                break
            size /= 2
        if size < 1e-10:
            # No step decreases the loss beyond rounding: the minimum is reached.
            return params, loss, iteration
        params, loss = candidate, new_loss
    warnings.warn(
        f"{name} did not converge in {_MAX_ITER} Newton steps (predicted decrease "
        f"{-(grad @ step) / 2:.3g}), for example because the scores separate the classes.",
        ConvergenceWarning,
        stacklevel=6,
    )
    return params, loss, _MAX_ITER


def fit_logistic(features, target, weight, *, nonnegative=(), name="calibrator"):
    """Fit ``sigmoid(intercept + features @ coef)`` by weighted cross-entropy.

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
    standard, centre, spread = _standardise(features, weight)
    n_features = features.shape[1]
    best = None
    for fixed in _faces(nonnegative):
        free = [j for j in range(n_features) if j not in fixed]
        design = np.hstack([standard[:, free], np.ones((len(target), 1))])
        params, loss, n_iter = _newton(design, target, weight, name)
        if (params[: len(free)][np.isin(free, nonnegative)] < 0).any():
            continue
        if best is None or loss < best[1]:
            coef = np.zeros(n_features)
            coef[free] = params[: len(free)]
            best = (coef, loss, params[-1], n_iter)
        if not fixed:
            break
    coef, _, intercept, n_iter = best
    return coef / spread, intercept - (coef / spread) @ centre, n_iter


def _faces(nonnegative):
    """Subsets of ``nonnegative`` to fix at 0: none first, then by increasing size."""
    for size in range(len(nonnegative) + 1):
        yield from itertools.combinations(nonnegative, size)


class OneVsRestLogisticBase(BaseCalibrator):
    """One logistic model of each class's one-vs-rest log-odds (of the positive class if binary).

    Subclasses define ``_design(log_odds)``, the features of a column of log-odds, and may
    override ``_targets`` (hard 0/1 targets by default), ``_nonnegative`` (features whose
    coefficient must be >= 0) and ``_store``/``_coefficients`` (the attribute layout).
    """

    _nonnegative = ()

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
        log_odds = one_vs_rest_log_odds(scores, self.input)
        n_classes = log_odds.shape[1]
        counts = np.ones(len(y_index)) if sample_weight is None else sample_weight
        weight = counts / counts.sum()
        fitted = []
        for k in [1] if n_classes == 2 else range(n_classes):
            target = self._targets(y_index == k, counts)
            fitted.append(
                fit_logistic(
                    self._design(log_odds[:, k]),
                    target,
                    weight,
                    nonnegative=self._nonnegative,
                    name=type(self).__name__,
                )
            )
        coef, intercept, n_iter = zip(*fitted, strict=True)
        self._store(np.array(coef), np.array(intercept), np.array(n_iter))

    def _predict_proba(self, scores):
        log_odds = one_vs_rest_log_odds(scores, self.input)
        coef = self._coefficients()
        if log_odds.shape[1] == 2:
            logit = self._design(log_odds[:, 1]) @ coef[0] + self.intercept_[0]
            return np.column_stack([expit(-logit), expit(logit)])
        logits = np.column_stack(
            [self._design(log_odds[:, k]) @ coef[k] for k in range(log_odds.shape[1])]
        )
        return renormalize(expit(logits + self.intercept_))
