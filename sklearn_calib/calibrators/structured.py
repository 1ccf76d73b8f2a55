"""Structured vector and matrix scaling (Berta, Holzmüller, Jordan and Bach, AISTATS 2026).

Both first fit temperature scaling (unpenalised, exact NLL, as :class:`TemperatureScaling`)
and mix its probabilities with the uniform distribution at weight ``1 / (n + 1)``::

    u = log((1 - 1/(n + 1)) softmax(z / T) + 1/((n + 1) K)),

so that every feature is finite. They then fit ``softmax((I + D) u + b)`` by the weighted
mean NLL plus ridge penalties scaled with the number of classes ``K`` and the (weighted)
number of samples ``n``::

    l2_b K/n |b|^2 + l2_d K/n |diag D|^2 + l2_o K(K - 1)/n |offdiag D|^2,

with the solver of the scaling family (:mod:`~._affine_solver`), ``l2_b``, ``l2_d`` and
``l2_o`` the parameters ``l2_regularization_intercept``, ``_diagonal`` and
``_off_diagonal`` (Berta et al.'s ``lambda_b``, ``lambda_d``, ``lambda_o``). Vector scaling
keeps ``D`` diagonal. The penalties pull towards temperature scaling, and vanish as ``n`` grows.
"""

import numbers

import numpy as np
import torch
from sklearn.utils._param_validation import Hidden, Interval, StrOptions

from .._deprecation import DEPRECATED, keyword_only, parameter
from ._base import softmax, weighted_count
from ._temperature_solver import fit_inverse_temperature
from .linear import MatrixScalingBase, VectorScalingBase, matrix_penalty

__all__ = ["StructuredMatrixScaling", "StructuredVectorScaling"]

_PENALTY = [Interval(numbers.Real, 0, None, closed="left")]
_DEPRECATED_PENALTY = [Hidden(StrOptions({DEPRECATED})), *_PENALTY]
#: The former names of the penalties (Berta et al.'s lambdas).
_RENAMED = {
    f"lambda_{part}": f"l2_regularization_{part}"
    for part in ("intercept", "diagonal", "off_diagonal")
}


class _TemperatureMixture:
    """Temperature scaling, then a mixture with the uniform distribution, in log space."""

    def _fit_features(self, scores, y_index, sample_weight):
        logits = self._logits(scores)
        beta, _ = fit_inverse_temperature(logits, y_index, sample_weight)
        self.temperature_ = 1.0 / beta
        self.uniform_weight_ = 1.0 / (weighted_count(len(y_index), sample_weight) + 1.0)
        return self._features(scores)

    def _features(self, scores):
        proba = softmax(self._logits(scores), 1.0 / self.temperature_)
        proba *= 1.0 - self.uniform_weight_
        proba += self.uniform_weight_ / proba.shape[1]
        return torch.from_numpy(proba).log_().numpy()


_COMMON_PARAMETERS = """input : {"logits", "probabilities"}, default="logits"
        What the scores are; probabilities become ``log(max(p, 1e-12))`` before the
        temperature. See :mod:`sklearn_calib.calibrators` for 1-D binary scores.
    l2_regularization_intercept : float, default=1.0
        ``l2_b``: the penalty on ``|b|^2`` is ``l2_b K / n``.
    l2_regularization_diagonal : float, default=1.0
        ``l2_d``: the penalty on the squared diagonal of ``D`` is ``l2_d K / n``."""

_COMMON_END = """max_iter : int, default=1000
        Largest number of solver steps.
    tol : float, default=1e-9
        The fit stops when the decrease of the objective predicted by the next step is at
        most ``tol`` (nats per sample).
    lambda_intercept, lambda_diagonal : float
        Deprecated names of ``l2_regularization_intercept`` and
        ``l2_regularization_diagonal``.

        .. deprecated:: 0.2
           Renamed ``l2_regularization_<part>``; removed in 0.3."""

_REFERENCE = """E. Berta, D. Holzmüller, M. I. Jordan and F. Bach, "Structured Matrix Scaling for
    Multi-Class Calibration", AISTATS 2026."""


class StructuredVectorScaling(_TemperatureMixture, VectorScalingBase):
    __doc__ = f"""Structured vector scaling (SVS): penalised vector scaling after TS.

    ``p = softmax((1 + d) * u + b)`` on the temperature-scaled, uniform-mixed
    log-probabilities ``u``; see :mod:`~.structured` for the preprocessing and the
    penalties. Berta et al. rank it first on ImageNet-scale problems.

    Parameters
    ----------
    {_COMMON_PARAMETERS}
    {_COMMON_END}

    Attributes
    ----------
    temperature_ : float
        Temperature of the preprocessing.
    uniform_weight_ : float
        Weight ``1 / (n + 1)`` of the uniform distribution in the preprocessing.
    scale_ : ndarray of shape (n_classes,)
        Per-class scale ``1 + d`` of ``u``.
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
    StructuredMatrixScaling : The same with a penalised full matrix.
    VectorScaling : Unpenalised vector scaling of the logits.

    References
    ----------
    {_REFERENCE}

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import StructuredVectorScaling
    >>> rng = np.random.default_rng(0)
    >>> logits = 3 * rng.normal(size=(200, 4))
    >>> y = np.where(rng.random(200) < 0.6, logits.argmax(axis=1), rng.integers(0, 4, 200))
    >>> svs = StructuredVectorScaling().fit(logits, y)
    >>> bool(svs.temperature_ > 1), svs.scale_.shape
    (True, (4,))
    """

    _parameter_constraints: dict = {
        **VectorScalingBase._parameter_constraints,
        "l2_regularization_intercept": _PENALTY,
        "l2_regularization_diagonal": _PENALTY,
        "lambda_intercept": _DEPRECATED_PENALTY,
        "lambda_diagonal": _DEPRECATED_PENALTY,
    }
    _renamed_parameters: dict = {
        old: new for old, new in _RENAMED.items() if not old.endswith("off_diagonal")
    }

    @keyword_only("input", "lambda_intercept", "lambda_diagonal", "max_iter", "tol")
    def __init__(
        self,
        *,
        input="logits",
        l2_regularization_intercept=1.0,
        l2_regularization_diagonal=1.0,
        max_iter=1000,
        tol=1e-9,
        lambda_intercept=DEPRECATED,
        lambda_diagonal=DEPRECATED,
    ):
        self.input = input
        self.l2_regularization_intercept = l2_regularization_intercept
        self.l2_regularization_diagonal = l2_regularization_diagonal
        self.max_iter = max_iter
        self.tol = tol
        self.lambda_intercept = lambda_intercept
        self.lambda_diagonal = lambda_diagonal

    def _penalty(self, n_classes, total_weight):
        per_class = n_classes / total_weight
        return np.concatenate(
            [
                np.full(n_classes, parameter(self, "l2_regularization_diagonal") * per_class),
                np.full(n_classes, parameter(self, "l2_regularization_intercept") * per_class),
            ]
        )


class StructuredMatrixScaling(_TemperatureMixture, MatrixScalingBase):
    __doc__ = f"""Structured matrix scaling (SMS): penalised matrix scaling after TS.

    ``p = softmax((I + D) u + b)`` on the temperature-scaled, uniform-mixed
    log-probabilities ``u``; see :mod:`~.structured` for the preprocessing and the
    penalties. Berta et al. rank it first by held-out log loss on tabular and vision
    multiclass problems.

    Parameters
    ----------
    {_COMMON_PARAMETERS}
    l2_regularization_off_diagonal : float, default=1.0
        ``l2_o``: the penalty on the squared off-diagonal entries of ``D`` is
        ``l2_o K (K - 1) / n``.
    {_COMMON_END}
    lambda_off_diagonal : float
        Deprecated name of ``l2_regularization_off_diagonal``.

        .. deprecated:: 0.2
           Renamed ``l2_regularization_off_diagonal``; removed in 0.3.

    Attributes
    ----------
    temperature_ : float
        Temperature of the preprocessing.
    uniform_weight_ : float
        Weight ``1 / (n + 1)`` of the uniform distribution in the preprocessing.
    coef_ : ndarray of shape (n_classes, n_classes)
        The matrix ``I + D``.
    intercept_ : ndarray of shape (n_classes,)
        The bias ``b``.
    n_iter_ : int
        Solver steps (Newton up to 15 classes, L-BFGS beyond).
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).

    See Also
    --------
    StructuredVectorScaling : The same with a diagonal matrix.
    DirichletCalibration : Matrix scaling of log-probabilities, penalties chosen by CV.

    References
    ----------
    {_REFERENCE}

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import StructuredMatrixScaling
    >>> rng = np.random.default_rng(0)
    >>> logits = 3 * rng.normal(size=(200, 4))
    >>> y = np.where(rng.random(200) < 0.6, logits.argmax(axis=1), rng.integers(0, 4, 200))
    >>> sms = StructuredMatrixScaling().fit(logits, y)
    >>> sms.coef_.shape
    (4, 4)
    >>> np.round(sms.predict_proba(logits[:2]).sum(axis=1), 12)
    array([1., 1.])
    """

    _parameter_constraints: dict = {
        **MatrixScalingBase._parameter_constraints,
        **{new: _PENALTY for new in _RENAMED.values()},
        **{old: _DEPRECATED_PENALTY for old in _RENAMED},
    }
    _renamed_parameters: dict = _RENAMED

    @keyword_only(
        "input", "lambda_intercept", "lambda_diagonal", "lambda_off_diagonal", "max_iter", "tol"
    )
    def __init__(
        self,
        *,
        input="logits",
        l2_regularization_intercept=1.0,
        l2_regularization_diagonal=1.0,
        l2_regularization_off_diagonal=1.0,
        max_iter=1000,
        tol=1e-9,
        lambda_intercept=DEPRECATED,
        lambda_diagonal=DEPRECATED,
        lambda_off_diagonal=DEPRECATED,
    ):
        self.input = input
        self.l2_regularization_intercept = l2_regularization_intercept
        self.l2_regularization_diagonal = l2_regularization_diagonal
        self.l2_regularization_off_diagonal = l2_regularization_off_diagonal
        self.max_iter = max_iter
        self.tol = tol
        self.lambda_intercept = lambda_intercept
        self.lambda_diagonal = lambda_diagonal
        self.lambda_off_diagonal = lambda_off_diagonal

    def _penalty(self, n_classes, total_weight):
        diagonal, off_diagonal, intercept = (
            parameter(self, f"l2_regularization_{part}")
            for part in ("diagonal", "off_diagonal", "intercept")
        )
        return matrix_penalty(
            n_classes,
            diagonal=diagonal * n_classes / total_weight,
            off_diagonal=off_diagonal * n_classes * (n_classes - 1) / total_weight,
            intercept=intercept * n_classes / total_weight,
        )
