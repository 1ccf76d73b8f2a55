"""Platt scaling (Platt 1999): a logistic regression of the label on a class's score.

Each calibrated class ``k`` gets ``p_k = sigmoid(a_k s_k + b_k)``, where ``s_k`` is the
one-vs-rest log-odds of class ``k`` under the scores, ``log p_k - log(1 - p_k)``:
``z_k - logsumexp_{j != k} z_j`` for logits (so a binary decision function ``d``, read
as the logits ``(0, d)``, gives ``s_1 = d``), ``log(max(p_k, 1e-12)) -
log(max(1 - p_k, 1e-12))`` for probabilities. A binary problem fits one sigmoid, on the
positive class, and sets ``p_0 = 1 - p_1``; a multiclass problem fits one sigmoid per
class (one-vs-rest) and divides each row by its sum, as scikit-learn's
``CalibratedClassifierCV(method="sigmoid")`` does. That one fits each sigmoid to the
class's column of the decision function (or of ``predict_proba``) rather than to its
one-vs-rest log-odds: the two agree on a binary decision function, and differ beyond two
classes.

``(a, b)`` minimise the weighted cross-entropy against Platt's smoothed targets
``(N+ + 1) / (N+ + 2)`` for the positives and ``1 / (N- + 2)`` for the negatives (``N+``,
``N-``: weighted counts), as scikit-learn does; the smoothing keeps the minimum finite
when the scores separate the classes. The fit is the Newton solver of
:mod:`~._binary_logistic` on the standardised score (so a large offset or scale of the
scores does not make the Hessian singular).
"""

import numpy as np

from .._deprecation import keyword_only
from ._binary_logistic import OneVsRestLogisticBase

__all__ = ["PlattScaling"]


class PlattScaling(OneVsRestLogisticBase):
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

    See Also
    --------
    QuadraticScaling : A quadratic map of the log-odds, fitted without smoothing.
    BetaCalibration : A map of ``log p`` and ``log(1 - p)`` that contains this one.
    TemperatureScaling : One temperature for all classes, which keeps the predicted class.

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

    @keyword_only("input")
    def __init__(self, *, input="logits"):
        self.input = input

    @staticmethod
    def _design(log_odds):
        return log_odds[:, None]

    @staticmethod
    def _targets(positive, counts):
        n_positive = counts[positive].sum()
        n_negative = counts[~positive].sum()
        return np.where(positive, (n_positive + 1) / (n_positive + 2), 1 / (n_negative + 2))

    def _store(self, coef, intercept, n_iter):
        super()._store(coef[:, 0], intercept, n_iter)

    def _coefficients(self):
        return self.coef_[:, None]
