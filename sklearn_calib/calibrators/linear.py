"""Vector scaling and matrix (Dirichlet-style) scaling: affine maps of the logits.

Both minimise the weighted mean negative log-likelihood of ``softmax(affine(z))`` (plus
the L2 penalties of matrix scaling) with scipy's L-BFGS-B in float64 from the identity
map, with analytic gradients; the fit is deterministic. A fit that stops at ``max_iter``
before reaching ``tol`` raises a ``ConvergenceWarning`` (for instance when the scores
separate the classes and the NLL has no minimum).
"""

import numbers
import warnings

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval

from ._base import BaseCalibrator, softmax


class _AffineLogitScaling(BaseCalibrator):
    """Fit ``softmax(affine(z))`` by L-BFGS-B; subclasses define the affine map."""

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "tol": [Interval(numbers.Real, 0, None, closed="neither")],
    }

    def _fit(self, scores, y_index, sample_weight):
        logits = self._logits(scores).astype(np.float64)
        n_samples, n_classes = logits.shape
        weight = (
            np.full(n_samples, 1.0 / n_samples)
            if sample_weight is None
            else sample_weight / sample_weight.sum()
        )
        rows = np.arange(n_samples)

        def objective(params):
            calibrated = self._affine(logits, params)
            log_norm = logsumexp(calibrated, axis=1)
            loss = weight @ (log_norm - calibrated[rows, y_index])
            residual = np.exp(calibrated - log_norm[:, None])
            residual[rows, y_index] -= 1.0
            residual *= weight[:, None]
            penalty, penalty_grad = self._penalty(params, n_classes)
            return loss + penalty, self._gradient(logits, residual) + penalty_grad

        result = minimize(
            objective,
            self._identity(n_classes),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": self.max_iter, "gtol": self.tol, "ftol": 0.0},
        )
        if not result.success and result.nit >= self.max_iter:
            warnings.warn(
                f"{type(self).__name__} did not converge in max_iter={self.max_iter} "
                f"iterations ({result.message}); increase max_iter.",
                ConvergenceWarning,
                stacklevel=4,
            )
        self._store(result.x, n_classes)
        self.n_iter_ = int(result.nit)

    def _penalty(self, params, n_classes):
        return 0.0, np.zeros_like(params)

    def _predict_proba(self, scores):
        return softmax(self._apply(self._logits(scores).astype(np.float64)))


class VectorScaling(_AffineLogitScaling):
    """Vector scaling: ``p = softmax(a * z + b)`` with one scale and one bias per class.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are; probabilities become ``log(max(p, 1e-12))``. See
        :mod:`sklearn_calib.calibrators` for 1-D binary scores.
    max_iter : int, default=1000
        Largest number of L-BFGS-B iterations.
    tol : float, default=1e-10
        L-BFGS-B stops when the largest gradient entry is below ``tol``.

    Attributes
    ----------
    scale_ : ndarray of shape (n_classes,)
        Per-class scale ``a``.
    bias_ : ndarray of shape (n_classes,)
        Per-class bias ``b``.
    n_iter_ : int
        L-BFGS-B iterations.
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On Calibration of Modern Neural
    Networks", ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import VectorScaling
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(100, 3))
    >>> vs = VectorScaling().fit(logits, rng.integers(0, 3, 100))
    >>> vs.scale_.shape
    (3,)
    """

    def __init__(self, input="logits", max_iter=1000, tol=1e-10):
        self.input = input
        self.max_iter = max_iter
        self.tol = tol

    @staticmethod
    def _identity(n_classes):
        return np.concatenate([np.ones(n_classes), np.zeros(n_classes)])

    @staticmethod
    def _affine(logits, params):
        n_classes = logits.shape[1]
        return logits * params[:n_classes] + params[n_classes:]

    @staticmethod
    def _gradient(logits, residual):
        return np.concatenate([np.einsum("ij,ij->j", residual, logits), residual.sum(axis=0)])

    def _store(self, params, n_classes):
        self.scale_ = params[:n_classes].copy()
        self.bias_ = params[n_classes:].copy()

    def _apply(self, logits):
        return logits * self.scale_ + self.bias_


class MatrixScaling(_AffineLogitScaling):
    """Matrix scaling: ``p = softmax(z W^T + b)`` with L2 penalties (Dirichlet-style).

    On log-probabilities (``input="probabilities"``) this is Dirichlet calibration (Kull et
    al. 2019). The penalties are those of their ODIR variant: ``off_diagonal_l2`` times the
    mean square of the off-diagonal entries of ``W`` plus ``intercept_l2`` times the mean
    square of ``b``, added to the weighted mean NLL. The diagonal is not penalised, so
    ``W = I, b = 0`` (the start) and temperature scaling stay reachable at no cost.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are; probabilities become ``log(max(p, 1e-12))``. See
        :mod:`sklearn_calib.calibrators` for 1-D binary scores.
    off_diagonal_l2 : float, default=1e-2
        Weight of the mean square of the off-diagonal entries of ``W``.
    intercept_l2 : float, default=0.0
        Weight of the mean square of ``b``.
    max_iter : int, default=1000
        Largest number of L-BFGS-B iterations.
    tol : float, default=1e-10
        L-BFGS-B stops when the largest gradient entry is below ``tol``.

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, n_classes)
        The matrix ``W``.
    intercept_ : ndarray of shape (n_classes,)
        The bias ``b``.
    n_iter_ : int
        L-BFGS-B iterations.
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).

    References
    ----------
    M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song and P. Flach, "Beyond
    temperature scaling: Obtaining well-calibrated multiclass probabilities with Dirichlet
    calibration", NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import MatrixScaling
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(100, 3))
    >>> ms = MatrixScaling().fit(logits, rng.integers(0, 3, 100))
    >>> ms.coef_.shape
    (3, 3)
    """

    _parameter_constraints: dict = {
        **_AffineLogitScaling._parameter_constraints,
        "off_diagonal_l2": [Interval(numbers.Real, 0, None, closed="left")],
        "intercept_l2": [Interval(numbers.Real, 0, None, closed="left")],
    }

    def __init__(
        self, input="logits", off_diagonal_l2=1e-2, intercept_l2=0.0, max_iter=1000, tol=1e-10
    ):
        self.input = input
        self.off_diagonal_l2 = off_diagonal_l2
        self.intercept_l2 = intercept_l2
        self.max_iter = max_iter
        self.tol = tol

    @staticmethod
    def _identity(n_classes):
        return np.concatenate([np.eye(n_classes).ravel(), np.zeros(n_classes)])

    @staticmethod
    def _affine(logits, params):
        n_classes = logits.shape[1]
        matrix = params[: n_classes * n_classes].reshape(n_classes, n_classes)
        return logits @ matrix.T + params[n_classes * n_classes :]

    @staticmethod
    def _gradient(logits, residual):
        return np.concatenate([(residual.T @ logits).ravel(), residual.sum(axis=0)])

    def _penalty(self, params, n_classes):
        matrix = params[: n_classes * n_classes].reshape(n_classes, n_classes)
        bias = params[n_classes * n_classes :]
        off = matrix - np.diag(np.diag(matrix))
        off_scale = self.off_diagonal_l2 / (n_classes * (n_classes - 1))
        bias_scale = self.intercept_l2 / n_classes
        penalty = off_scale * np.sum(off * off) + bias_scale * bias @ bias
        grad = np.concatenate([(2 * off_scale * off).ravel(), 2 * bias_scale * bias])
        return penalty, grad

    def _store(self, params, n_classes):
        self.coef_ = params[: n_classes * n_classes].reshape(n_classes, n_classes).copy()
        self.intercept_ = params[n_classes * n_classes :].copy()

    def _apply(self, logits):
        return logits @ self.coef_.T + self.intercept_
