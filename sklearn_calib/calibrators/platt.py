"""Platt scaling (Platt 1999): a logistic regression of the label on a class's score.

Each calibrated class ``k`` gets ``p_k = sigmoid(a_k s_k + b_k)``, where ``s_k`` is the
one-vs-rest log-odds of class ``k`` under the scores, ``log p_k - log(1 - p_k)``:
``z_k - logsumexp_{j != k} z_j`` for logits (so a binary decision function ``d``, read
as the logits ``(0, d)``, gives ``s_1 = d``), ``log(max(p_k, 1e-12)) -
log(max(1 - p_k, 1e-12))`` for probabilities. A binary problem fits one sigmoid, on the
positive class, and sets ``p_0 = 1 - p_1``; a multiclass problem fits one sigmoid per
class (one-vs-rest) and divides each row by its sum, as scikit-learn's
``CalibratedClassifierCV(method="sigmoid")`` does.

``(a, b)`` minimise the weighted cross-entropy against Platt's smoothed targets
``(N+ + 1) / (N+ + 2)`` for the positives and ``1 / (N- + 2)`` for the negatives (``N+``,
``N-``: weighted counts), as scikit-learn does; the smoothing keeps the minimum finite
when the scores separate the classes. The fit is Newton's method with the analytic
gradient and Hessian and a backtracking line search, in float64, on the standardised
score (so a large offset or scale of the scores does not make the Hessian singular).
"""

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


def _one_vs_rest_log_odds(scores, kind):
    """Return ``log p_k - log(1 - p_k)`` for every class, in float64."""
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


def _sigmoid_loss(params, score, target, weight):
    """Weighted mean cross-entropy of ``sigmoid(a s + b)`` with soft targets."""
    logit = params[0] * score + params[1]
    return -weight @ (target * log_expit(logit) + (1.0 - target) * log_expit(-logit))


def _fit_sigmoid(score, target, weight):
    """Return ``(a, b)`` of ``sigmoid(a s + b)`` and the Newton iterations.

    Newton runs on the standardised score ``(s - mean) / std`` (weighted), where the
    Hessian is well conditioned whatever the offset and scale of ``s``; the fit is affine
    invariant, so ``(a, b)`` follow from the standardised solution exactly.
    """
    centre = weight @ score
    deviation = score - centre
    largest = np.abs(deviation).max()
    # the weighted standard deviation, computed without squaring huge deviations
    spread = largest * np.sqrt(weight @ (deviation / largest) ** 2) if largest > 0 else 1.0
    (slope, intercept), iterations = _newton(deviation / spread, target, weight)
    return np.array([slope / spread, intercept - slope * centre / spread]), iterations


def _newton(score, target, weight):
    """Minimise the weighted cross-entropy of ``sigmoid(a s + b)`` against ``target``."""
    mean_target = weight @ target
    params = np.array([0.0, np.log(mean_target / (1.0 - mean_target))])
    loss = _sigmoid_loss(params, score, target, weight)
    for iteration in range(1, _MAX_ITER + 1):
        proba = expit(params[0] * score + params[1])
        residual = weight * (proba - target)
        grad = np.array([residual @ score, residual.sum()])
        curvature = weight * proba * (1.0 - proba)
        hess = np.array(
            [
                [curvature @ (score * score), curvature @ score],
                [curvature @ score, curvature.sum()],
            ]
        )
        step = np.linalg.lstsq(hess, -grad, rcond=None)[0]
        if -(grad @ step) / 2 <= _TOL or np.all(params + step == params):
            return params + step, iteration
        slope = grad @ step
        size = 1.0
        while True:
            candidate = params + size * step
            new_loss = _sigmoid_loss(candidate, score, target, weight)
            if new_loss <= loss + 1e-4 * size * slope or size < 1e-10:
                break
            size /= 2
        if size < 1e-10:
            # No step decreases the loss beyond rounding: the minimum is reached.
            return params, iteration
        params, loss = candidate, new_loss
    warnings.warn(
        f"PlattScaling did not converge in {_MAX_ITER} Newton steps (predicted decrease "
        f"{-(grad @ step) / 2:.3g}).",
        ConvergenceWarning,
        stacklevel=4,
    )
    return params, _MAX_ITER


class PlattScaling(BaseCalibrator):
    """Platt scaling: a sigmoid of each class's log-odds, one-vs-rest and renormalised.

    See :mod:`~.platt` for the score each sigmoid sees, the smoothed targets and the fit.
    The predicted class of a binary problem can change (when ``a < 0`` or through ``b``);
    so can a multiclass one.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are. See :mod:`sklearn_calib.calibrators` for 1-D binary scores.

    Attributes
    ----------
    coef_ : ndarray of shape (n_sigmoids,)
        Slope ``a`` of each sigmoid: one (the positive class) for a binary problem, one
        per class otherwise.
    intercept_ : ndarray of shape (n_sigmoids,)
        Intercept ``b`` of each sigmoid.
    n_iter_ : ndarray of shape (n_sigmoids,)
        Newton iterations of each sigmoid.
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).

    References
    ----------
    J. Platt, "Probabilistic outputs for support vector machines and comparisons to
    regularized likelihood methods", Advances in Large Margin Classifiers, 1999.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import PlattScaling
    >>> decision = np.array([-3.0, -1.0, 0.5, 1.0, 2.0, 4.0])
    >>> platt = PlattScaling().fit(decision, [0, 0, 1, 0, 1, 1])
    >>> platt.predict_proba(decision).shape
    (6, 2)
    >>> bool(platt.coef_[0] > 0)
    True
    """

    def __init__(self, input="logits"):
        self.input = input

    def _fit(self, scores, y_index, sample_weight):
        log_odds = _one_vs_rest_log_odds(scores, self.input)
        n_classes = log_odds.shape[1]
        counts = np.ones(len(y_index)) if sample_weight is None else sample_weight
        weight = counts / counts.sum()
        columns = [1] if n_classes == 2 else range(n_classes)
        coef, intercept, n_iter = [], [], []
        for k in columns:
            positive = y_index == k
            n_positive = counts[positive].sum()
            n_negative = counts[~positive].sum()
            target = np.where(positive, (n_positive + 1) / (n_positive + 2), 1 / (n_negative + 2))
            params, iterations = _fit_sigmoid(log_odds[:, k], target, weight)
            coef.append(params[0])
            intercept.append(params[1])
            n_iter.append(iterations)
        self.coef_ = np.array(coef)
        self.intercept_ = np.array(intercept)
        self.n_iter_ = np.array(n_iter)

    def _predict_proba(self, scores):
        log_odds = _one_vs_rest_log_odds(scores, self.input)
        if log_odds.shape[1] == 2:
            logit = self.coef_[0] * log_odds[:, 1] + self.intercept_[0]
            return np.column_stack([expit(-logit), expit(logit)])
        return renormalize(expit(log_odds * self.coef_ + self.intercept_))
