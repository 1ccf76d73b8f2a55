"""Penalised multinomial fits of affine maps of the logits: the solver of the scaling family.

For features ``x_i`` (logits or log-probabilities, shape (n, K)), classes ``y_i`` and weights
``w_i`` normalised to sum 1, the fit minimises

    F(theta) = sum_i w_i [logsumexp_k f(x_i)_k - f(x_i)_{y_i}] + sum_j lambda_j (theta_j - r_j)^2

over an affine map ``f`` of the features:

- :class:`VectorMap`: ``f(x)_k = a_k x_k + b_k``, ``theta = (a, b)``;
- :class:`MatrixMap`: ``f(x) = W x + b``, ``theta`` the rows of ``[W | b]``.

``F`` is convex. Everything is float64 with analytic gradients. Small problems take Newton
steps: the Hessian is formed exactly (on an evenly spaced subsample of rows for large
``n``, which changes the steps, not the minimum), scaled to unit diagonal and factored by
Cholesky, and each step is kept by a backtracking (Armijo) line search. Large problems
(many classes under a matrix map) take L-BFGS steps whose initial inverse Hessian is the
inverse of the Hessian's diagonal at the start.

The fit stops when the decrease of ``F`` that the step predicts, ``-g . step / 2`` (half the
squared Newton decrement), is at most ``tol``. The criterion is in units of ``F`` (nats per
sample) and does not change when the features are rescaled (the steps are invariant to a
rescaling of the parameters), unlike a tolerance on the gradient.
"""

import warnings

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from sklearn.exceptions import ConvergenceWarning

#: Rows on which the Newton Hessian is formed; larger inputs use an evenly spaced subsample.
HESSIAN_ROWS = 1 << 15
#: Largest number of parameters fitted by Newton steps; more take L-BFGS steps.
NEWTON_PARAMS = 256
#: Curvature pairs kept by L-BFGS.
_MEMORY = 20
#: Sufficient-decrease constant of the Armijo line search, and its largest number of halvings.
_ARMIJO = 1e-4
_HALVINGS = 40


class VectorMap:
    """``f(x)_k = a_k x_k + b_k``: one scale and one bias per class, ``theta = (a, b)``."""

    @staticmethod
    def n_params(n_classes):
        return 2 * n_classes

    @staticmethod
    def identity(n_classes):
        return np.concatenate([np.ones(n_classes), np.zeros(n_classes)])

    @staticmethod
    def forward(features, theta):
        n_classes = features.shape[1]
        return features * theta[:n_classes] + theta[n_classes:]

    @staticmethod
    def gradient(features, residual):
        return np.concatenate([np.einsum("ij,ij->j", residual, features), residual.sum(axis=0)])

    @staticmethod
    def hessian(features, proba, weight):
        """Hessian of the weighted NLL: diagonal blocks minus ``U' diag(w) U``, ``U = [x p, p]``."""
        n_classes = features.shape[1]
        root = np.sqrt(weight)[:, None]
        scaled = np.hstack([features * proba, proba])
        scaled *= root
        hessian = -(scaled.T @ scaled)
        weighted = proba * weight[:, None]
        cross = np.einsum("ij,ij->j", features, weighted)
        diagonal = np.arange(n_classes)
        hessian[diagonal, diagonal] += np.einsum("ij,ij->j", features * features, weighted)
        hessian[diagonal, diagonal + n_classes] += cross
        hessian[diagonal + n_classes, diagonal] += cross
        hessian[diagonal + n_classes, diagonal + n_classes] += weighted.sum(axis=0)
        return hessian

    @staticmethod
    def hessian_diagonal(features, proba, weight):
        spread = proba * (1.0 - proba) * weight[:, None]
        return np.concatenate([np.einsum("ij,ij->j", spread, features * features), spread.sum(0)])


class MatrixMap:
    """``f(x) = W x + b``: ``theta`` holds the rows of ``[W | b]``, shape (K, K + 1)."""

    @staticmethod
    def n_params(n_classes):
        return n_classes * (n_classes + 1)

    @staticmethod
    def identity(n_classes):
        return np.hstack([np.eye(n_classes), np.zeros((n_classes, 1))]).ravel()

    @staticmethod
    def split(theta, n_classes):
        """Return ``(W, b)`` as views of ``theta``."""
        rows = theta.reshape(n_classes, n_classes + 1)
        return rows[:, :n_classes], rows[:, n_classes]

    @classmethod
    def forward(cls, features, theta):
        matrix, bias = cls.split(theta, features.shape[1])
        logits = features @ matrix.T
        logits += bias
        return logits

    @staticmethod
    def gradient(features, residual):
        return np.hstack([residual.T @ features, residual.sum(axis=0)[:, None]]).ravel()

    @staticmethod
    def hessian(features, proba, weight):
        """Hessian of the weighted NLL: ``blockdiag_k(X' diag(w p_k) X) - V' diag(w) V``.

        ``X`` has a column of ones appended and ``V_i = p_i (x) x_i`` (Kronecker product).
        """
        n_samples, n_classes = features.shape
        root = np.sqrt(weight)[:, None]
        extended = np.hstack([features, np.ones((n_samples, 1))])
        extended *= root
        kron = (proba[:, :, None] * extended[:, None, :]).reshape(n_samples, -1)
        hessian = -(kron.T @ kron)
        size = n_classes + 1
        blocks = (kron.T @ extended).reshape(n_classes, size, size)
        for k in range(n_classes):
            hessian[k * size : (k + 1) * size, k * size : (k + 1) * size] += blocks[k]
        return hessian

    @staticmethod
    def hessian_diagonal(features, proba, weight):
        spread = proba * (1.0 - proba) * weight[:, None]
        return np.hstack([spread.T @ (features * features), spread.sum(axis=0)[:, None]]).ravel()


class _Objective:
    """The penalised weighted NLL ``F`` of an affine map, its gradient and curvature."""

    def __init__(self, affine, features, y_index, weight, penalty, reference):
        self.affine = affine
        self.features = features
        self.y_index = y_index
        self.rows = np.arange(len(y_index))
        self.weight = weight
        self.penalty = penalty
        self.reference = reference

    def value(self, theta):
        """Return ``F(theta)`` and the softmax probabilities it needs (kept for the gradient)."""
        logits = self.affine.forward(self.features, theta)
        true = logits[self.rows, self.y_index]
        row_max = logits.max(axis=1)
        logits -= row_max[:, None]
        np.exp(logits, out=logits)
        total = logits.sum(axis=1)
        logits /= total[:, None]
        nll = self.weight @ (np.log(total) + row_max - true)
        offset = theta - self.reference
        return nll + self.penalty @ (offset * offset), logits

    def gradient(self, theta, proba):
        residual = proba * self.weight[:, None]
        residual[self.rows, self.y_index] -= self.weight
        return self.affine.gradient(self.features, residual) + 2 * self.penalty * (
            theta - self.reference
        )

    def hessian(self, proba):
        rows = _subsample(len(self.y_index), HESSIAN_ROWS)
        weight = self.weight[rows]
        if not weight.sum() > 0:
            rows, weight = slice(None), self.weight
        hessian = self.affine.hessian(self.features[rows], proba[rows], weight / weight.sum())
        hessian[np.diag_indices_from(hessian)] += 2 * self.penalty
        return hessian

    def hessian_diagonal(self, proba):
        return self.affine.hessian_diagonal(self.features, proba, self.weight) + 2 * self.penalty


def _subsample(n_samples, size):
    """All rows, or ``size`` evenly spaced ones."""
    if n_samples <= size:
        return slice(None)
    return np.linspace(0, n_samples - 1, size).astype(np.intp)


def _positive(diagonal):
    """The diagonal with entries that are not positive replaced by 1 (flat directions)."""
    return np.where(diagonal > 0, diagonal, 1.0)


def _newton_step(hessian, gradient):
    """Solve ``H step = -g`` after scaling ``H`` to unit diagonal.

    A relative shift of 1e-12 of the scaled matrix makes the directions in which the NLL is
    flat (adding a constant to every logit) solvable; the gradient is 0 along them.
    """
    scale = 1.0 / np.sqrt(_positive(np.diag(hessian).copy()))
    scaled = hessian * scale[:, None] * scale[None, :]
    for shift in (1e-12, 1e-8, 1e-4):
        try:
            factor = cho_factor(scaled + shift * np.eye(len(scale)), check_finite=False)
        except LinAlgError:
            continue
        return -scale * cho_solve(factor, scale * gradient, check_finite=False)
    return -gradient / _positive(np.diag(hessian).copy())


def _lbfgs_direction(gradient, pairs, diagonal):
    """The L-BFGS direction ``-H g``, with initial inverse Hessian ``gamma / diagonal``."""
    direction = gradient.copy()
    alphas = []
    for s, y, rho in reversed(pairs):
        alpha = rho * (s @ direction)
        direction -= alpha * y
        alphas.append(alpha)
    if pairs:
        s, y, _ = pairs[-1]
        gamma = (s @ y) / (y @ (y / diagonal))
    else:
        gamma = 1.0
    direction *= gamma / diagonal
    for (s, y, rho), alpha in zip(pairs, reversed(alphas), strict=True):
        beta = rho * (y @ direction)
        direction += (alpha - beta) * s
    return -direction


def _line_search(objective, theta, value, step, slope):
    """Backtracking from the full step; return ``(t, value, proba)`` or None if none decreases F."""
    size = 1.0
    for _ in range(_HALVINGS):
        candidate, proba = objective.value(theta + size * step)
        if candidate <= value + _ARMIJO * size * slope:
            return size, candidate, proba
        size /= 2
    return None


def fit_affine(
    affine, features, y_index, sample_weight, *, penalty, reference, start, max_iter, tol, name
):
    """Minimise the penalised weighted NLL of ``softmax(affine(features))``.

    Parameters
    ----------
    affine : VectorMap or MatrixMap
        The affine map.
    features : ndarray of shape (n_samples, n_classes), float64
        Finite features (logits or log-probabilities).
    y_index : ndarray of shape (n_samples,)
        Column of each row's class.
    sample_weight : ndarray of shape (n_samples,) or None
        Non-negative weights with a positive sum.
    penalty : ndarray of shape (n_params,)
        Non-negative weight ``lambda_j`` of each parameter's squared distance to ``reference``.
    reference : ndarray of shape (n_params,)
        Centre ``r`` of the penalty.
    start : ndarray of shape (n_params,)
        Starting point.
    max_iter : int
        Largest number of Newton or L-BFGS steps.
    tol : float
        Stop when the decrease predicted by a step is at most ``tol`` (see module doc).
    name : str
        Calibrator name for the warnings.

    Returns
    -------
    theta : ndarray of shape (n_params,)
    n_iter : int
        Steps taken.
    """
    n_samples = features.shape[0]
    weight = (
        np.full(n_samples, 1.0 / n_samples)
        if sample_weight is None
        else sample_weight / sample_weight.sum()
    )
    objective = _Objective(affine, features, y_index, weight, penalty, reference)
    newton = len(start) <= NEWTON_PARAMS
    theta = start.astype(np.float64, copy=True)
    value, proba = objective.value(theta)
    gradient = objective.gradient(theta, proba)
    diagonal = None if newton else _positive(objective.hessian_diagonal(proba))
    pairs = []
    for iteration in range(1, max_iter + 1):
        if newton:
            step = _newton_step(objective.hessian(proba), gradient)
        else:
            step = _lbfgs_direction(gradient, pairs, diagonal)
        slope = gradient @ step
        if not np.isfinite(slope):
            raise RuntimeError(f"{name} failed: the NLL or its gradient is not finite.")
        if -slope / 2 <= tol:
            # Newton's predicted decrease is reliable: take the last (tiny) step too.
            return (theta + step if newton else theta), iteration
        found = _line_search(objective, theta, value, step, slope)
        if found is None:
            # No step decreases F beyond rounding: the minimum is reached.
            return theta, iteration
        size, value, proba = found
        theta = theta + size * step
        new_gradient = objective.gradient(theta, proba)
        if not newton:
            change = new_gradient - gradient
            curvature = size * (step @ change)
            if curvature > 1e-12 * abs(value):
                pairs = [*pairs[1 - _MEMORY :], (size * step, change, 1.0 / curvature)]
        gradient = new_gradient
    warnings.warn(
        f"{name} did not converge in max_iter={max_iter} steps (predicted decrease "
        f"{-slope / 2:.3g} > tol={tol:g}), for example because the scores separate the "
        "classes and the NLL has no minimum; increase max_iter.",
        ConvergenceWarning,
        stacklevel=4,
    )
    return theta, max_iter
