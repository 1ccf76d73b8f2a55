"""Quadratic scaling and beta calibration: logistic maps of a class's log-odds.

Both read the scores through the one-vs-rest log-odds ``s = log p - log(1 - p)`` of a class
(for a binary decision function ``d``, ``s = d``; see :mod:`~.platt`), fit a logistic
regression of the class indicator on a few features of ``s`` by weighted cross-entropy
against the hard labels (the Newton solver of :mod:`~._binary_logistic`), and, like
:class:`PlattScaling`, fit one map on the positive class of a binary problem and one per
class (one-vs-rest, rows renormalised) otherwise. They were designed for binary problems,
where Berta et al. rank them with Platt scaling on logits first by held-out log loss. A fit
whose scores separate a class from the rest has no minimum: it stops with saturated
probabilities and a ``ConvergenceWarning``.
"""

import numpy as np

from .._deprecation import keyword_only
from ._binary_logistic import OneVsRestLogisticBase, one_vs_rest_log_probabilities

__all__ = ["BetaCalibration", "QuadraticScaling"]

_INPUT_DOC = """input : {"logits", "probabilities"}, default="logits"
        What the scores are. See :mod:`sklearn_calib.calibrators` for 1-D binary scores;
        probabilities are floored at 1e-12 (and below 1 - 1e-12) in the log-odds."""

_COMMON_ATTRIBUTES = """n_iter_ : ndarray of shape (n_maps,)
        Newton iterations of each map.
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores)."""

_BERTA = """E. Berta, D. Holzmüller, M. I. Jordan and F. Bach, "Structured Matrix Scaling for
    Multi-Class Calibration", AISTATS 2026."""


class QuadraticScaling(OneVsRestLogisticBase):
    __doc__ = f"""Quadratic scaling: ``p = sigmoid(c + a s + b s^2)`` on the log-odds ``s``.

    Platt scaling with a quadratic term, fitted without penalty; see :mod:`~.binary`.
    The predicted class can change.

    Parameters
    ----------
    {_INPUT_DOC}

    Attributes
    ----------
    coef_ : ndarray of shape (n_maps, 2)
        ``(a, b)`` of each map: one (the positive class) for a binary problem, one per
        class otherwise.
    intercept_ : ndarray of shape (n_maps,)
        ``c`` of each map.
    {_COMMON_ATTRIBUTES}

    See Also
    --------
    PlattScaling : The linear map ``sigmoid(c + a s)`` with smoothed targets.
    BetaCalibration : A map of ``log p`` and ``log(1 - p)``.

    References
    ----------
    {_BERTA}

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import QuadraticScaling
    >>> decision = np.array([-4.0, -3.0, -1.0, 0.5, 1.0, 2.0, 3.0, -0.5])
    >>> qs = QuadraticScaling().fit(decision, [0, 0, 1, 1, 0, 1, 1, 0])
    >>> qs.coef_.shape, qs.predict_proba(decision).shape
    ((1, 2), (8, 2))
    """

    @keyword_only("input")
    def __init__(self, *, input="logits"):
        self.input = input

    @staticmethod
    def _design(log_odds):
        return np.column_stack([log_odds, log_odds * log_odds])


class BetaCalibration(OneVsRestLogisticBase):
    __doc__ = f"""Beta calibration: ``p = sigmoid(c + a log q - b log(1 - q))``, ``a, b >= 0``.

    ``q`` is the class probability under the scores (``sigmoid(s)`` of its log-odds
    ``s``). The three-parameter family of Kull, Silva Filho and Flach, which contains the
    identity and is monotone in ``q`` because ``a`` and ``b`` are constrained to be
    non-negative; the fit is the exact constrained maximum likelihood (when the
    unconstrained fit has a negative ``a`` or ``b``, the best fit with ``a = 0``, ``b = 0``
    or both). See :mod:`~.binary`.

    Parameters
    ----------
    {_INPUT_DOC}

    Attributes
    ----------
    coef_ : ndarray of shape (n_maps, 2)
        ``(a, b)`` of each map: one (the positive class) for a binary problem, one per
        class otherwise.
    intercept_ : ndarray of shape (n_maps,)
        ``c`` of each map.
    {_COMMON_ATTRIBUTES}

    See Also
    --------
    PlattScaling : ``sigmoid(c + a s)``, the special case ``a = b`` of beta calibration.
    QuadraticScaling : A quadratic map of the log-odds.

    References
    ----------
    M. Kull, T. Silva Filho and P. Flach, "Beta calibration: a well-founded and easily
    implemented improvement on logistic calibration for binary classifiers", AISTATS 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import BetaCalibration
    >>> proba = np.array([0.1, 0.2, 0.35, 0.4, 0.6, 0.7, 0.8, 0.9])
    >>> beta = BetaCalibration(input="probabilities").fit(proba, [0, 0, 1, 0, 1, 0, 1, 1])
    >>> bool((beta.coef_ >= 0).all()), beta.predict_proba(proba).shape
    (True, (8, 2))
    """

    _nonnegative = (0, 1)

    @keyword_only("input")
    def __init__(self, *, input="logits"):
        self.input = input

    def _designs(self, scores):
        log_proba, log_rest = one_vs_rest_log_probabilities(scores, self.input)
        return [
            np.column_stack([log_proba[:, k], -log_rest[:, k]])
            for k in self._modelled(scores.shape[1])
        ]
