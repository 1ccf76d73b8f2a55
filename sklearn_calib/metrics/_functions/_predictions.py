"""Checked predictions: labels, probabilities and weights validated once for the metric kernels.

Every public metric checks its inputs with :func:`check_predictions` and hands the
:class:`Predictions` to its kernel (the function of the same name with a leading
underscore), which takes checked arrays only. :func:`calibration_error_ci`,
:func:`calibration_report` and :func:`metric_values` check once and call several kernels,
which share what they derive from the predictions: each convention's scores and outcomes
and their order.
"""

import numpy as np

from ..._validation import (
    ROW_SUM_TOLERANCE,
    check_classification_inputs,
    check_probabilities,
    check_targets,
)
from .._core._scores import scores_and_outcomes
from .._fused._check import checked_probabilities, reads_in_one_pass


class Predictions:
    """Labels, probabilities and weights of one set of predictions, checked once.

    Made by :func:`check_predictions`. The arrays are shared, not copied: treat them
    and everything the methods return as read-only.

    Parameters
    ----------
    y_index : ndarray of shape (n_samples,), dtype int64
        Column of each sample's true class.
    proba : ndarray of shape (n_samples, n_classes)
        float32 or float64 probabilities.
    sample_weight : ndarray of shape (n_samples,) or None
        Non-negative float64 weights with a positive sum.
    """

    def __init__(self, y_index, proba, sample_weight):
        self.y_index = y_index
        self.proba = proba
        self.sample_weight = sample_weight
        self._scores = {}
        self._orders = {}
        self._derived = {}

    @property
    def n_samples(self):
        """Number of samples."""
        return self.proba.shape[0]

    @property
    def n_classes(self):
        """Number of classes (columns of the probabilities)."""
        return self.proba.shape[1]

    @property
    def weight(self):
        """The sample weights, or ones without them (float64)."""
        return np.ones(self.n_samples) if self.sample_weight is None else self.sample_weight

    def scores(self, convention="top_label"):
        """Each sample's score and outcome under ``convention`` (:func:`scores_and_outcomes`)."""
        if convention not in self._scores:
            self.set_scores(convention, *scores_and_outcomes(self.proba, self.y_index, convention))
        return self._scores[convention]

    def set_scores(self, convention, score, outcome):
        """Keep ``score`` and ``outcome`` as :meth:`scores` of ``convention`` (read-only)."""
        score.setflags(write=False)
        outcome.setflags(write=False)
        self._scores[convention] = score, outcome

    def has_scores(self, convention="top_label"):
        """Whether :meth:`scores` of ``convention`` are computed already."""
        return convention in self._scores

    def score_order(self, convention="top_label"):
        """Indices that sort the scores under ``convention`` (tied scores in any order)."""
        if convention not in self._orders:
            order = np.argsort(self.scores(convention)[0])
            order.setflags(write=False)
            self._orders[convention] = order
        return self._orders[convention]

    def derived(self, key, build):
        """A quantity derived from these predictions and their weights, built by ``build()``
        on first use and kept; copies with other weights or rows do not share it."""
        if key not in self._derived:
            self._derived[key] = build()
        return self._derived[key]

    def reweighted(self, sample_weight):
        """The same predictions with other weights; scores and orders stay shared."""
        other = Predictions(self.y_index, self.proba, sample_weight)
        other._scores, other._orders = self._scores, self._orders
        return other

    def rows(self, index):
        """The predictions of the rows ``index`` (integer indices), scores included."""
        weight = None if self.sample_weight is None else self.sample_weight[index]
        other = Predictions(self.y_index[index], self.proba[index], weight)
        for convention, (score, outcome) in self._scores.items():
            other._scores[convention] = score[index], outcome[index]
        return other

    def weighted_rows(self):
        """The predictions without their rows of weight 0 (themselves when there are none).

        A bootstrap resamples these: a row of weight 0 stands for no sample.
        """
        if self.sample_weight is None or self.sample_weight.all():
            return self
        return self.rows(np.flatnonzero(self.sample_weight))


def check_predictions(y_true, y_prob, *, labels=None, sample_weight=None):
    """Check one set of predictions (``check_classification_inputs``) for the kernels.

    C-ordered probabilities go to the fused check (``_fused._check``): with numba, large
    ones are checked in the same read of the rows that finds their top-label scores, which
    the predictions keep.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples,) or (n_samples, n_classes)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights.

    Returns
    -------
    predictions : Predictions
    """
    if not reads_in_one_pass(y_prob):
        return Predictions(
            *check_classification_inputs(y_true, y_prob, labels=labels, sample_weight=sample_weight)
        )
    try:
        y_index, sample_weight = check_targets(y_true, y_prob.shape, labels, sample_weight)
    except ValueError:
        check_probabilities(y_prob)  # bad probabilities are named first, as always
        raise
    proba, top_label = checked_probabilities(y_prob, y_index, ROW_SUM_TOLERANCE)
    data = Predictions(y_index, proba, sample_weight)
    if top_label is not None:
        data.set_scores("top_label", *top_label)
    return data
