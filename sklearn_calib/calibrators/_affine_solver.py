"""Penalised multinomial fits of affine maps of the logits: the solver of the scaling family.

For features ``x_i`` (logits or log-probabilities, shape (n, K)), classes ``y_i`` and weights
``w_i`` normalised to sum 1, the fit minimises

    F(theta) = sum_i w_i [logsumexp_k f(x_i)_k - f(x_i)_{y_i}] + sum_j lambda_j (theta_j - r_j)^2

over an affine map ``f`` of the features:

- :class:`VectorMap`: ``f(x)_k = a_k x_k + b_k``, ``theta = (a, b)``;
- :class:`TemperatureBiasMap`: ``f(x)_k = a x_k + b_k``, ``theta = (a, b)`` with one ``a``;
- :class:`MatrixMap`: ``f(x) = W x + b``, ``theta`` the rows of ``[W | b]``.

``F`` is convex. Everything is float64 with analytic gradients. Small problems (at most
NEWTON_PARAMS parameters) take Newton steps: the Hessian is formed exactly (on an evenly
spaced subsample of HESSIAN_ROWS rows for larger inputs, which changes the steps, not the
minimum), scaled to unit diagonal and factored by Cholesky. Larger ones (a matrix map over
more than 15 classes) take L-BFGS steps whose initial inverse Hessian is the inverse of the
Hessian's diagonal blocks (one block per class, formed on 1024 evenly spaced rows and again
every 10 steps). Every step is kept by a backtracking (Armijo) line search. The parameters
are held at the point of least penalty along the directions that change no softmax (see
:func:`_minimise`). Inputs of more than ``4 * HESSIAN_ROWS`` rows fitted by Newton steps
start from the minimum on a subsample.

The fit stops when the decrease of ``F`` that the step predicts, ``-g . step / 2`` (half the
squared Newton decrement), is at most ``tol``. The criterion is in units of ``F`` (nats per
sample) and does not change when the features are rescaled (the steps are invariant to a
rescaling of the parameters), unlike a tolerance on the gradient.
"""

import warnings

import numpy as np
import torch
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from sklearn.exceptions import ConvergenceWarning

from ._base import evenly_spaced_rows, normalised_weights, weighted_subsample

#: Rows on which the Newton Hessian is formed; larger inputs use an evenly spaced subsample.
HESSIAN_ROWS = 1 << 13
#: Largest number of parameters fitted by Newton steps; more take L-BFGS steps.
NEWTON_PARAMS = 256
#: Largest number of entries of the L-BFGS preconditioner's blocks; beyond, their diagonal.
PRECONDITIONER_ENTRIES = 1 << 22
#: Steps after which L-BFGS forms its preconditioner anew.
_REFRESH = 10
#: Curvature pairs kept by L-BFGS.
_MEMORY = 20
#: A Newton fit keeps its Hessian's factor for the next step while full steps shrink the
#: predicted decrease by at least this factor each (the Hessian then changes little).
_KEEP_HESSIAN = 1e-2
#: Sufficient-decrease constant of the Armijo line search, and its largest number of halvings.
_ARMIJO = 1e-4
_HALVINGS = 40
#: A fit whose weighted mean NLL is below this has saturated probabilities: the scores
#: separate the classes.
_SATURATED = 1e-6


def _product(left, right):
    """``left @ right`` by torch, on its threads: the fits run BLAS on one thread, faster
    for their many small products; the products of a matrix map with the features are
    large."""
    return (torch.from_numpy(left) @ torch.from_numpy(right)).numpy()


class VectorMap:
    """``f(x)_k = a_k x_k + b_k``: one scale and one bias per class, ``theta = (a, b)``.

    Its methods take the features as ``columns``, shape (n_classes, n_samples) (one row per
    class, so that sums over classes run along contiguous rows), and return the logits,
    probabilities and residuals in the same layout.
    """

    #: Rows on which the L-BFGS preconditioner is formed (None: all).
    preconditioner_rows = None

    @staticmethod
    def n_params(n_classes):
        return 2 * n_classes

    @staticmethod
    def identity(n_classes):
        return np.concatenate([np.ones(n_classes), np.zeros(n_classes)])

    @staticmethod
    def shift_groups(n_classes):
        """Groups of parameters to which adding one constant leaves every softmax unchanged."""
        return np.arange(n_classes, 2 * n_classes)[None, :]

    @staticmethod
    def forward(columns, theta):
        n_classes = columns.shape[0]
        logits = columns * theta[:n_classes, None]
        logits += theta[n_classes:, None]
        return logits

    @staticmethod
    def gradient(columns, residual):
        return np.concatenate([np.einsum("ij,ij->i", residual, columns), residual.sum(axis=1)])

    @staticmethod
    def hessian(columns, proba, weight):
        """Hessian of the weighted NLL: diagonal blocks minus ``U diag(w) U'``, ``U = [x p; p]``."""
        n_classes = columns.shape[0]
        root = np.sqrt(weight)
        scaled = np.empty((2 * n_classes, columns.shape[1]))
        np.multiply(proba, root, out=scaled[n_classes:])
        np.multiply(columns, scaled[n_classes:], out=scaled[:n_classes])
        hessian = scaled @ scaled.T
        np.negative(hessian, out=hessian)
        # sums over rows of w p x^2, w p x and w p, as products with sqrt(w)
        square = (scaled[:n_classes] * columns) @ root
        cross = scaled[:n_classes] @ root
        diagonal = np.arange(n_classes)
        hessian[diagonal, diagonal] += square
        hessian[diagonal, diagonal + n_classes] += cross
        hessian[diagonal + n_classes, diagonal] += cross
        hessian[diagonal + n_classes, diagonal + n_classes] += scaled[n_classes:] @ root
        return hessian

    @staticmethod
    def curvature_blocks(columns, proba, weight):
        """The Hessian's diagonal blocks, one per class on ``(a_k, b_k)``, ignoring the
        coupling between classes: groups (K, 2), blocks (K, 2, 2)."""
        n_classes = columns.shape[0]
        spread = proba * (1.0 - proba) * weight
        blocks = np.empty((n_classes, 2, 2))
        blocks[:, 0, 0] = np.einsum("ij,ij->i", spread, columns * columns)
        blocks[:, 0, 1] = blocks[:, 1, 0] = np.einsum("ij,ij->i", spread, columns)
        blocks[:, 1, 1] = spread.sum(axis=1)
        groups = np.column_stack([np.arange(n_classes), np.arange(n_classes) + n_classes])
        return groups, blocks


class TemperatureBiasMap:
    """``f(x)_k = a x_k + b_k``: one scale (an inverse temperature) and one bias per class,
    ``theta = (a, b_1, ..., b_K)``.

    Its methods take the features as ``columns``, shape (n_classes, n_samples), like
    :class:`VectorMap`'s.
    """

    #: Rows on which the L-BFGS preconditioner is formed (None: all).
    preconditioner_rows = None

    @staticmethod
    def n_params(n_classes):
        return n_classes + 1

    @staticmethod
    def identity(n_classes):
        return np.concatenate([[1.0], np.zeros(n_classes)])

    @staticmethod
    def shift_groups(n_classes):
        """Groups of parameters to which adding one constant leaves every softmax unchanged."""
        return np.arange(1, n_classes + 1)[None, :]

    @staticmethod
    def forward(columns, theta):
        logits = columns * theta[0]
        logits += theta[1:, None]
        return logits

    @staticmethod
    def gradient(columns, residual):
        return np.concatenate([[np.einsum("ij,ij->", residual, columns)], residual.sum(axis=1)])

    @staticmethod
    def hessian(columns, proba, weight):
        """Hessian of the weighted NLL: diagonal terms minus ``U diag(w) U'``, ``U = [p'x; p]``."""
        n_classes = columns.shape[0]
        root = np.sqrt(weight)
        scaled = np.empty((n_classes + 1, columns.shape[1]))
        np.multiply(proba, root, out=scaled[1:])
        product = proba * columns
        np.multiply(product.sum(axis=0), root, out=scaled[0])
        hessian = scaled @ scaled.T
        np.negative(hessian, out=hessian)
        # sums over rows of w sum_k p_k x_k^2, w p_k x_k and w p_k
        hessian[0, 0] += np.einsum("ij,ij->", product, columns * weight)
        cross = product @ weight
        hessian[0, 1:] += cross
        hessian[1:, 0] += cross
        diagonal = np.arange(1, n_classes + 1)
        hessian[diagonal, diagonal] += proba @ weight
        return hessian

    @staticmethod
    def curvature_blocks(columns, proba, weight):
        """The Hessian's diagonal as blocks of one parameter each: groups (K + 1, 1),
        blocks (K + 1, 1, 1)."""
        n_classes = columns.shape[0]
        product = proba * columns
        blocks = np.empty((n_classes + 1, 1, 1))
        blocks[0, 0, 0] = np.einsum("ij,ij->", product, columns * weight) - (
            product.sum(axis=0) ** 2 @ weight
        )
        blocks[1:, 0, 0] = (proba * (1.0 - proba)) @ weight
        return np.arange(n_classes + 1)[:, None], blocks


class MatrixMap:
    """``f(x) = W x + b``: ``theta`` holds the rows of ``[W | b]``, shape (K, K + 1).

    Its methods take the features as ``columns``, shape (n_classes, n_samples), like
    :class:`VectorMap`'s.
    """

    #: Rows on which the L-BFGS preconditioner is formed (its blocks cost K^3 per row).
    preconditioner_rows = 1 << 10

    @staticmethod
    def n_params(n_classes):
        return n_classes * (n_classes + 1)

    @staticmethod
    def identity(n_classes):
        return np.hstack([np.eye(n_classes), np.zeros((n_classes, 1))]).ravel()

    @staticmethod
    def shift_groups(n_classes):
        """Groups of parameters to which adding one constant leaves every softmax unchanged.

        Adding ``v`` to a column of ``[W | b]`` adds ``v x_a`` (or ``v``) to every logit.
        """
        return np.arange(n_classes * (n_classes + 1)).reshape(n_classes, n_classes + 1).T

    @staticmethod
    def split(theta, n_classes):
        """Return ``(W, b)`` as views of ``theta``."""
        rows = theta.reshape(n_classes, n_classes + 1)
        return rows[:, :n_classes], rows[:, n_classes]

    @classmethod
    def forward(cls, columns, theta):
        matrix, bias = cls.split(theta, columns.shape[0])
        logits = _product(matrix, columns)
        logits += bias[:, None]
        return logits

    @staticmethod
    def gradient(columns, residual):
        return np.hstack([_product(residual, columns.T), residual.sum(axis=1)[:, None]]).ravel()

    @staticmethod
    def _extended(columns):
        """The features with a row of ones appended (for the bias)."""
        return np.vstack([columns, np.ones((1, columns.shape[1]))])

    @classmethod
    def hessian(cls, columns, proba, weight):
        """Hessian of the weighted NLL: ``blockdiag_k(X diag(w p_k) X') - V diag(w) V'``.

        ``X`` has a row of ones appended and ``V_i = p_i (x) x_i`` (Kronecker product).
        """
        n_classes, n_samples = columns.shape
        extended = cls._extended(columns) * np.sqrt(weight)
        kron = (proba[:, None, :] * extended[None, :, :]).reshape(-1, n_samples)
        hessian = -(kron @ kron.T)
        size = n_classes + 1
        blocks = (kron @ extended.T).reshape(n_classes, size, size)
        for k in range(n_classes):
            hessian[k * size : (k + 1) * size, k * size : (k + 1) * size] += blocks[k]
        return hessian

    @classmethod
    def curvature_blocks(cls, columns, proba, weight):
        """The Hessian's diagonal blocks, one per row ``k`` of ``[W | b]``, ignoring the
        coupling between classes: ``X diag(w p_k (1 - p_k)) X'`` with ``X`` extended by a
        row of ones. Groups (K, K + 1), blocks (K, K + 1, K + 1)."""
        n_classes = columns.shape[0]
        extended = cls._extended(columns)
        root = np.sqrt(proba * (1.0 - proba) * weight)
        blocks = np.empty((n_classes, n_classes + 1, n_classes + 1))
        for k in range(n_classes):
            scaled = extended * root[k]
            blocks[k] = scaled @ scaled.T
        groups = np.arange(n_classes * (n_classes + 1)).reshape(n_classes, n_classes + 1)
        return groups, blocks

    @staticmethod
    def curvature_diagonal(columns, proba, weight):
        """The diagonal of the Hessian, as ``theta``."""
        spread = proba * (1.0 - proba) * weight
        return np.hstack([spread @ (columns * columns).T, spread.sum(axis=1)[:, None]]).ravel()


class _Objective:
    """The penalised weighted NLL ``F`` of an affine map, its gradient and curvature.

    ``columns`` are the features, shape (n_classes, n_samples).
    """

    def __init__(self, affine, columns, y_index, weight, penalty, reference):
        self.affine = affine
        self.columns = columns
        self.y_index = y_index
        self.rows = np.arange(len(y_index))
        self.weight = weight
        self.penalty = penalty
        self.reference = reference
        self._hessian_sample = None

    def _gauge(self):
        """The shift groups and the weights that fix a point within each of them.

        Adding one constant to a group leaves the NLL unchanged; the point of a group kept
        is the one of least penalty, or, for an unpenalised group, of least squared
        distance to the reference.
        """
        groups = self.affine.shift_groups(self.columns.shape[0])
        weights = self.penalty[groups]
        unpenalised = weights.sum(axis=1) == 0
        weights[unpenalised] = 1.0
        return groups, weights / weights.sum(axis=1, keepdims=True)

    def recentre(self, theta):
        """Move ``theta`` within its shift groups to the kept point (see :meth:`_gauge`):
        the NLL does not change and the penalty does not increase."""
        groups, weights = self._gauge()
        theta = theta.copy()
        offset = (weights * (theta[groups] - self.reference[groups])).sum(axis=1)
        theta[groups] -= offset[:, None]
        return theta

    def project(self, step):
        """Remove from ``step`` its motion along the shift groups (which changes no softmax)."""
        groups, weights = self._gauge()
        step = step.copy()
        step[groups] -= (weights * step[groups]).sum(axis=1)[:, None]
        return step

    def restricted(self, rows):
        """The objective on a subset of rows (weights renormalised), or None if they weigh 0."""
        weight = self.weight[rows]
        if not weight.sum() > 0:
            return None
        return _Objective(
            self.affine,
            self.columns[:, rows],
            self.y_index[rows],
            weight / weight.sum(),
            self.penalty,
            self.reference,
        )

    def penalty_value(self, theta):
        offset = theta - self.reference
        return self.penalty @ (offset * offset)

    def value(self, theta):
        """Return ``F(theta)`` and the :class:`_Softmax` of the logits (for the gradient)."""
        logits = self.affine.forward(self.columns, theta)
        true = logits[self.y_index, self.rows]
        # torch's elementwise kernels and reductions run on its threads, and its
        # vectorised exp is about 2.5 times numpy's (float64, one thread)
        exp = torch.from_numpy(logits)
        row_max = exp.amax(dim=0)
        exp.sub_(row_max).exp_()
        total = exp.sum(dim=0).numpy()
        nll = self.weight @ (np.log(total) + row_max.numpy() - true)
        return nll + self.penalty_value(theta), _Softmax(logits, total)

    def gradient(self, theta, softmax):
        residual = softmax.exp * (self.weight / softmax.total)
        residual[self.y_index, self.rows] -= self.weight
        return self.affine.gradient(self.columns, residual) + 2 * self.penalty * (
            theta - self.reference
        )

    def _rows_and_weights(self, size):
        """An evenly spaced subsample of at most ``size`` rows and its normalised weights."""
        rows, weight = weighted_subsample(len(self.y_index), size, self.weight)
        if rows is None:
            rows, weight = self.rows, self.weight
        return rows, weight / weight.sum()

    def hessian(self, softmax):
        """The Hessian, on an evenly spaced subsample of at most HESSIAN_ROWS rows (drawn
        once, with its features, for every Newton step)."""
        if self._hessian_sample is None:
            rows, weight = self._rows_and_weights(HESSIAN_ROWS)
            self._hessian_sample = rows, weight, self.columns[:, rows]
        rows, weight, columns = self._hessian_sample
        hessian = self.affine.hessian(columns, softmax.proba(rows), weight)
        hessian[np.diag_indices_from(hessian)] += 2 * self.penalty
        return hessian

    def preconditioner(self, softmax):
        """The inverse of the Hessian's diagonal blocks (at ``softmax``), as a function.

        The blocks are formed on an evenly spaced subsample of ``preconditioner_rows``
        rows; when they would hold more than PRECONDITIONER_ENTRIES numbers, the inverse of
        the Hessian's diagonal is used instead.
        """
        n_classes, n_samples = self.columns.shape
        block_size = len(self.reference) // n_classes
        if n_classes * block_size * block_size > PRECONDITIONER_ENTRIES:
            diagonal = self.affine.curvature_diagonal(
                self.columns, softmax.proba(self.rows), self.weight
            )
            diagonal += 2 * self.penalty
            diagonal = np.where(diagonal > 0, diagonal, 1.0)
            return lambda vector: vector / diagonal
        rows, weight = self._rows_and_weights(self.affine.preconditioner_rows or n_samples)
        groups, blocks = self.affine.curvature_blocks(
            self.columns[:, rows], softmax.proba(rows), weight
        )
        blocks += 2 * self.penalty[groups][:, :, None] * np.eye(block_size)
        inverses = _scaled_inverses(blocks)

        def apply(vector):
            out = np.empty_like(vector)
            out[groups] = np.einsum("kij,kj->ki", inverses, vector[groups])
            return out

        return apply


class _Softmax:
    """``exp(logits - max)`` and its sums over classes, shape (K, n) and (n,)."""

    def __init__(self, exp, total):
        self.exp = exp
        self.total = total

    def proba(self, rows):
        """The probabilities of some rows, shape (K, len(rows))."""
        return self.exp[:, rows] / self.total[rows]


def _scaled_inverses(blocks):
    """Inverses of positive semi-definite blocks (K, m, m), after scaling each to unit
    diagonal and adding ``1e-12 m`` (at least 1e-12 of the largest eigenvalue) to the
    diagonal, so that flat directions stay finite.

    torch's batched Cholesky inverts them (about 5 times an eigendecomposition); blocks it
    cannot factor go through their eigenvalues, those below 1e-12 m counting as 1e-12 m.
    """
    size = blocks.shape[1]
    diagonal = np.einsum("kii->ki", blocks)
    scale = 1.0 / np.sqrt(np.where(diagonal > 0, diagonal, 1.0))
    scaled = blocks * scale[:, :, None] * scale[:, None, :]
    floor = 1e-12 * size
    index = np.arange(size)
    scaled[:, index, index] += floor
    factor, info = torch.linalg.cholesky_ex(torch.from_numpy(scaled))
    inverses = torch.cholesky_inverse(factor).numpy()
    failed = info.numpy() != 0
    if failed.any():
        values, vectors = np.linalg.eigh(scaled[failed])
        values = np.maximum(values, floor)
        inverses[failed] = (vectors / values[:, None, :]) @ vectors.transpose(0, 2, 1)
    return inverses * scale[:, :, None] * scale[:, None, :]


def _newton_factor(hessian):
    """Factor ``H`` for Newton steps: ``(scale, Cholesky factor or None)``.

    ``H`` is scaled to unit diagonal; a relative shift of 1e-12 (more if needed) makes the
    directions in which the NLL is flat (adding a constant to every logit) solvable; the
    gradient is 0 along them. None when no shift gives a factor (steps along ``-g``).
    """
    diagonal = np.diag(hessian)
    scale = 1.0 / np.sqrt(np.where(diagonal > 0, diagonal, 1.0))
    scaled = hessian * scale[:, None] * scale[None, :]
    for shift in (1e-12, 1e-8, 1e-4, 1.0):
        try:
            return scale, cho_factor(scaled + shift * np.eye(len(scale)), check_finite=False)
        except LinAlgError:
            continue
    return scale, None


def _newton_step(factor, gradient):
    """Solve ``H step = -g`` with the factor of :func:`_newton_factor`."""
    scale, cholesky = factor
    if cholesky is None:
        return -gradient * scale * scale
    return -scale * cho_solve(cholesky, scale * gradient, check_finite=False)


def _lbfgs_direction(gradient, pairs, precondition):
    """The L-BFGS direction ``-H g``, with initial inverse Hessian ``gamma * precondition``."""
    direction = gradient.copy()
    alphas = []
    for s, y, rho in reversed(pairs):
        alpha = rho * (s @ direction)
        direction -= alpha * y
        alphas.append(alpha)
    gamma = 1.0
    if pairs:
        s, y, _ = pairs[-1]
        gamma = (s @ y) / (y @ precondition(y))
    direction = gamma * precondition(direction)
    for (s, y, rho), alpha in zip(pairs, reversed(alphas), strict=True):
        beta = rho * (y @ direction)
        direction += (alpha - beta) * s
    return -direction


def _line_search(objective, theta, value, step, slope):
    """Backtrack from the full step; return ``(t, value, softmax)``, None if F never decreases."""
    size = 1.0
    for _ in range(_HALVINGS):
        candidate, softmax = objective.value(theta + size * step)
        if candidate <= value + _ARMIJO * size * slope:
            return size, candidate, softmax
        size /= 2
    return None


def _minimise(objective, theta, max_iter, tol):
    """Newton or L-BFGS steps from ``theta``.

    Return ``(theta, n_iter, predicted decrease, F)``: the predicted decrease is 0 when the
    fit converged (or no step decreases ``F``); ``F`` is its value at the last point
    evaluated (before a final Newton step, which changes it by at most ``tol``). The
    parameters start at, and each step keeps them at, the point of their shift groups
    (directions that leave every softmax unchanged, such as adding one vector to all rows
    of ``[W | b]``) of least penalty: there only the penalty has curvature, so these
    directions would converge slowly, or drift without bound where they are unpenalised.
    """
    newton = len(theta) <= NEWTON_PARAMS
    theta = objective.recentre(theta)
    value, softmax = objective.value(theta)
    gradient = objective.gradient(theta, softmax)
    precondition = None if newton else objective.preconditioner(softmax)
    pairs = []
    decrease = previous = np.inf
    factor = None
    for iteration in range(1, max_iter + 1):
        if newton:
            if factor is None:
                factor = _newton_factor(objective.hessian(softmax))
            step = _newton_step(factor, gradient)
        else:
            if iteration % _REFRESH == 0:
                precondition = objective.preconditioner(softmax)
            step = _lbfgs_direction(gradient, pairs, precondition)
        step = objective.project(step)
        slope = gradient @ step
        if not np.isfinite(slope):
            raise RuntimeError("The NLL or its gradient is not finite.")
        decrease = -slope / 2
        if decrease <= tol:
            # Newton's predicted decrease is reliable: take the last (tiny) step too.
            return (theta + step if newton else theta), iteration, 0.0, value
        found = _line_search(objective, theta, value, step, slope)
        if found is None:
            # No step decreases F beyond rounding: the minimum is reached.
            return theta, iteration, 0.0, value
        size, value, softmax = found
        theta = theta + size * step
        if newton and not (size == 1.0 and decrease <= _KEEP_HESSIAN * previous):
            # Keep the factor only while full steps shrink the predicted decrease fast.
            factor = None
        previous = decrease
        new_gradient = objective.gradient(theta, softmax)
        if not newton:
            change = new_gradient - gradient
            curvature = size * (step @ change)
            if curvature > 1e-12 * abs(value):
                pairs = [*pairs[1 - _MEMORY :], (size * step, change, 1.0 / curvature)]
        gradient = new_gradient
    return theta, max_iter, decrease, value


def fit_affine(
    affine, features, y_index, sample_weight, *, penalty, reference, start, max_iter, tol, name
):
    """Minimise the penalised weighted NLL of ``softmax(affine(features))``.

    Newton fits of more than ``4 * HESSIAN_ROWS`` rows start from the minimum on an evenly
    spaced subsample of ``HESSIAN_ROWS`` rows.

    Parameters
    ----------
    affine : VectorMap, TemperatureBiasMap or MatrixMap
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
        Steps taken on the full input.

    Warns
    -----
    ConvergenceWarning
        When the fit reaches ``max_iter`` before the criterion, or stops with a mean NLL
        below 1e-6 (scores that separate the classes).
    """
    n_samples = features.shape[0]
    weight = normalised_weights(n_samples, sample_weight)
    columns = np.ascontiguousarray(features.T, dtype=np.float64)
    objective = _Objective(affine, columns, y_index, weight, penalty, reference)
    theta = start.astype(np.float64, copy=True)
    if len(theta) <= NEWTON_PARAMS and n_samples > 4 * HESSIAN_ROWS:
        subsample = objective.restricted(evenly_spaced_rows(n_samples, HESSIAN_ROWS))
        if subsample is not None:
            theta, *_ = _minimise(subsample, theta, max_iter, tol)
    try:
        theta, n_iter, decrease, value = _minimise(objective, theta, max_iter, tol)
    except RuntimeError as exc:
        raise RuntimeError(f"{name} failed: {exc}") from None
    nll = value - objective.penalty_value(theta)
    if nll < _SATURATED:
        warnings.warn(
            f"{name}: the scores separate the classes, so the NLL may have no minimum; the fit "
            f"stopped with saturated probabilities (mean NLL {nll:.3g} < {_SATURATED:g}).",
            ConvergenceWarning,
            stacklevel=4,
        )
    elif decrease > tol:
        warnings.warn(
            f"{name} did not converge in max_iter={max_iter} steps (predicted decrease "
            f"{decrease:.3g} > tol={tol:g}), for example because the scores separate the "
            "classes and the NLL has no minimum; increase max_iter.",
            ConvergenceWarning,
            stacklevel=4,
        )
    return theta, n_iter
