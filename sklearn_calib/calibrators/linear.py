"""Vector scaling and matrix scaling: affine maps of the logits fitted by penalised NLL.

Both minimise the weighted mean negative log-likelihood of ``softmax(affine(z))`` (plus the
L2 penalties of matrix scaling) from the identity map with the shared solver of
:mod:`~._affine_solver`: float64, analytic gradients, Newton steps (L-BFGS steps for a
matrix over many classes), stopped by a criterion that does not depend on the scale of the
logits. A fit that reaches ``max_iter`` first raises a ``ConvergenceWarning``, and so does
one whose scores separate the classes (the NLL may then have no minimum: the fit stops
where the probabilities saturate, at a mean NLL below 1e-6, whatever the row order).
"""

import numbers
import warnings

import numpy as np
from sklearn.utils._param_validation import Hidden, Interval, StrOptions

from .._deprecation import DEPRECATED, keyword_only, parameter
from ._affine_solver import HESSIAN_ROWS, MatrixMap, VectorMap, fit_affine
from ._base import BaseCalibrator, softmax, weighted_count, weighted_subsample
from ._temperature_solver import fit_inverse_temperature

__all__ = ["MatrixScaling", "VectorScaling"]


class AffineScalingBase(BaseCalibrator):
    """Fit ``softmax(affine(features))`` with :func:`fit_affine`.

    Subclasses set ``_affine`` (:class:`VectorMap` or :class:`MatrixMap`) and define the
    features (``_fit_features`` at fit, ``_features`` at predict), the penalty
    (``_penalty``) and how the parameters are stored (``_store``, ``_parameters``).
    """

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "tol": [Interval(numbers.Real, 0, None, closed="neither")],
    }

    #: Whether the fit starts from temperature scaling of the features (the identity map
    #: times their NLL-optimal inverse temperature) rather than from the identity map.
    _start_at_temperature = False

    def _fit_features(self, scores, y_index, sample_weight):
        """Features of the fit data (and any preprocessing fitted on them)."""
        return self._features(scores)

    def _features(self, scores):
        """Features the affine map acts on: the logits, in float64."""
        return self._logits(scores).astype(np.float64)

    def _penalty(self, n_classes, total_weight):
        """Per-parameter weights of the squared distance to the identity map."""
        return np.zeros(self._affine.n_params(n_classes))

    def _fit(self, scores, y_index, sample_weight):
        features = self._fit_features(scores, y_index, sample_weight)
        n_samples, n_classes = features.shape
        total_weight = weighted_count(n_samples, sample_weight)
        identity = self._affine.identity(n_classes)
        theta, self.n_iter_ = fit_affine(
            self._affine,
            features,
            y_index,
            sample_weight,
            penalty=self._penalty(n_classes, total_weight),
            reference=identity,
            start=self._start(features, y_index, sample_weight, identity),
            max_iter=self.max_iter,
            tol=self.tol,
            name=type(self).__name__,
        )
        self._store(theta, n_classes)

    def _start(self, features, y_index, sample_weight, identity):
        """The solver's starting point: the identity map, or, with
        ``_start_at_temperature``, the identity times the inverse temperature fitted on an
        evenly spaced subsample of HESSIAN_ROWS rows (fewer Newton steps from there)."""
        if not self._start_at_temperature:
            return identity
        rows, weight = weighted_subsample(len(y_index), HESSIAN_ROWS, sample_weight)
        if rows is None:
            return identity
        with warnings.catch_warnings():
            # separable or tied scores: the affine fit warns about them itself
            warnings.simplefilter("ignore")
            beta, _ = fit_inverse_temperature(features[rows], y_index[rows], weight)
        return beta * identity

    def _predict_proba(self, scores):
        logits = self._affine.forward(self._features(scores).T, self._parameters())
        return softmax(logits.T)


class VectorScalingBase(AffineScalingBase):
    """Per-class scale and bias: ``softmax(a * features + b)``."""

    _affine = VectorMap

    def _store(self, theta, n_classes):
        self.scale_ = theta[:n_classes].copy()
        self.bias_ = theta[n_classes:].copy()

    def _parameters(self):
        return np.concatenate([self.scale_, self.bias_])


class MatrixScalingBase(AffineScalingBase):
    """Full matrix and bias: ``softmax(features W^T + b)``."""

    _affine = MatrixMap

    def _store(self, theta, n_classes):
        matrix, bias = MatrixMap.split(theta, n_classes)
        self.coef_ = matrix.copy()
        self.intercept_ = bias.copy()

    def _parameters(self):
        return np.hstack([self.coef_, self.intercept_[:, None]]).ravel()


def matrix_penalty(n_classes, *, diagonal, off_diagonal, intercept):
    """Per-parameter penalty weights of a matrix map (rows of ``[W | b]``)."""
    weights = np.full((n_classes, n_classes + 1), float(off_diagonal))
    weights[np.arange(n_classes), np.arange(n_classes)] = diagonal
    weights[:, n_classes] = intercept
    return weights.ravel()


class VectorScaling(VectorScalingBase):
    """Vector scaling: ``p = softmax(a * z + b)`` with one scale and one bias per class.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are; probabilities become ``log(max(p, 1e-12))``. See
        :mod:`sklearn_calib.calibrators` for 1-D binary scores.
    max_iter : int, default=1000
        Largest number of Newton (or L-BFGS, beyond 128 classes) steps.
    tol : float, default=1e-10
        The fit stops when the decrease of the mean NLL predicted by the next step is at
        most ``tol`` (nats per sample); the criterion does not depend on the scale of the
        logits.

    Attributes
    ----------
    scale_ : ndarray of shape (n_classes,)
        Per-class scale ``a``.
    bias_ : ndarray of shape (n_classes,)
        Per-class bias ``b``.
    n_iter_ : int
        Solver steps.
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).

    See Also
    --------
    StructuredVectorScaling : Vector scaling after temperature scaling, with penalties.

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

    _start_at_temperature = True

    @keyword_only("input", "max_iter", "tol")
    def __init__(self, *, input="logits", max_iter=1000, tol=1e-10):
        self.input = input
        self.max_iter = max_iter
        self.tol = tol


class MatrixScaling(MatrixScalingBase):
    """Matrix scaling: ``p = softmax(z W^T + b)`` with optional L2 penalties.

    The penalties are ``l2_regularization_off_diagonal`` times the mean square of the
    off-diagonal entries of ``W`` plus ``l2_regularization_intercept`` times the mean square
    of ``b``, added to the
    weighted mean NLL (the form of the ODIR penalties of Kull et al. 2019). The diagonal is
    not penalised, so ``W = I, b = 0`` (the start) and temperature scaling stay reachable at
    no cost. :class:`DirichletCalibration` fits this map on log-probabilities with the
    penalties chosen by cross-validation; :class:`StructuredMatrixScaling` with the
    published penalties after temperature scaling.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are; probabilities become ``log(max(p, 1e-12))``. See
        :mod:`sklearn_calib.calibrators` for 1-D binary scores.
    l2_regularization_off_diagonal : float, default=1e-2
        Weight of the mean square of the off-diagonal entries of ``W``.
    l2_regularization_intercept : float, default=0.0
        Weight of the mean square of ``b``.
    max_iter : int, default=1000
        Largest number of Newton steps (L-BFGS steps beyond 15 classes).
    tol : float, default=1e-10
        The fit stops when the decrease of the objective predicted by the next step is at
        most ``tol`` (nats per sample).
    off_diagonal_l2 : float
        Deprecated name of ``l2_regularization_off_diagonal``.

        .. deprecated:: 0.2
           Renamed ``l2_regularization_off_diagonal``; removed in 0.3.
    intercept_l2 : float
        Deprecated name of ``l2_regularization_intercept``.

        .. deprecated:: 0.2
           Renamed ``l2_regularization_intercept``; removed in 0.3.

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, n_classes)
        The matrix ``W``.
    intercept_ : ndarray of shape (n_classes,)
        The bias ``b``.
    n_iter_ : int
        Solver steps.
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).

    See Also
    --------
    StructuredMatrixScaling : Matrix scaling after temperature scaling, with penalties.
    DirichletCalibration : Matrix scaling of log-probabilities, penalties chosen by CV.

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On Calibration of Modern Neural
    Networks", ICML 2017.

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

    _start_at_temperature = True

    _parameter_constraints: dict = {
        **AffineScalingBase._parameter_constraints,
        **{
            name: [Interval(numbers.Real, 0, None, closed="left")]
            for name in ("l2_regularization_off_diagonal", "l2_regularization_intercept")
        },
        **{
            name: [Hidden(StrOptions({DEPRECATED})), Interval(numbers.Real, 0, None, closed="left")]
            for name in ("off_diagonal_l2", "intercept_l2")
        },
    }
    _renamed_parameters: dict = {
        "off_diagonal_l2": "l2_regularization_off_diagonal",
        "intercept_l2": "l2_regularization_intercept",
    }

    @keyword_only("input", "off_diagonal_l2", "intercept_l2", "max_iter", "tol")
    def __init__(
        self,
        *,
        input="logits",
        l2_regularization_off_diagonal=1e-2,
        l2_regularization_intercept=0.0,
        max_iter=1000,
        tol=1e-10,
        off_diagonal_l2=DEPRECATED,
        intercept_l2=DEPRECATED,
    ):
        self.input = input
        self.l2_regularization_off_diagonal = l2_regularization_off_diagonal
        self.l2_regularization_intercept = l2_regularization_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.off_diagonal_l2 = off_diagonal_l2
        self.intercept_l2 = intercept_l2

    def _penalty(self, n_classes, total_weight):
        return odir_penalty(
            n_classes,
            parameter(self, "l2_regularization_off_diagonal"),
            parameter(self, "l2_regularization_intercept"),
        )


def odir_penalty(n_classes, off_diagonal, intercept):
    """Penalty weights of the mean squares of the off-diagonal entries and of the bias."""
    return matrix_penalty(
        n_classes,
        diagonal=0.0,
        off_diagonal=off_diagonal / (n_classes * (n_classes - 1)),
        intercept=intercept / n_classes,
    )
