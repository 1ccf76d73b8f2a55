"""One-vs-rest isotonic regression calibration (Zadrozny and Elkan 2002)."""

import numpy as np
from sklearn.isotonic import IsotonicRegression

from .._deprecation import keyword_only
from ._base import BaseCalibrator, renormalize

__all__ = ["IsotonicCalibration"]


class IsotonicCalibration(BaseCalibrator):
    """Isotonic regression of each class probability on its one-vs-rest indicator.

    For each class ``k`` a non-decreasing step function of ``p_k`` is fitted to
    ``1[y = k]`` (scikit-learn's :class:`~sklearn.isotonic.IsotonicRegression`, values in
    [0, 1], inputs outside the fit range clipped to it); each output row is then divided
    by its sum (an all-zero row becomes uniform). A binary problem fits one function, on
    the positive class, and sets ``p_0 = 1 - p_1``. The predicted class can change.
    scikit-learn's ``CalibratedClassifierCV(method="isotonic")`` regresses on each class's
    column of the decision function instead, where the classifier has one: on a binary
    problem that gives the same values at the fit scores (interpolated in the decision
    function between them), beyond two classes a different map.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are; logits are turned into ``softmax`` probabilities. See
        :mod:`sklearn_calib.calibrators` for 1-D binary scores.

    Attributes
    ----------
    calibrators_ : list of IsotonicRegression
        One fitted regressor per class (one for a binary problem).
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).

    References
    ----------
    B. Zadrozny and C. Elkan, "Transforming classifier scores into accurate multiclass
    probability estimates", KDD 2002.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import IsotonicCalibration
    >>> proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]])
    >>> iso = IsotonicCalibration(input="probabilities").fit(proba, [0, 0, 1, 1])
    >>> iso.predict_proba(proba)[:, 1]
    array([0., 0., 1., 1.])
    """

    @keyword_only("input")
    def __init__(self, *, input="logits"):
        self.input = input

    def _fit(self, scores, y_index, sample_weight):
        proba = self._probabilities(scores)
        columns = [1] if proba.shape[1] == 2 else range(proba.shape[1])
        self.calibrators_ = [
            IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(
                proba[:, k], (y_index == k).astype(np.float64), sample_weight=sample_weight
            )
            for k in columns
        ]

    def _predict_proba(self, scores):
        proba = self._probabilities(scores)
        if proba.shape[1] == 2:
            positive = self.calibrators_[0].predict(proba[:, 1])
            return np.column_stack([1.0 - positive, positive])
        calibrated = np.column_stack(
            [regressor.predict(proba[:, k]) for k, regressor in enumerate(self.calibrators_)]
        )
        return renormalize(calibrated)
