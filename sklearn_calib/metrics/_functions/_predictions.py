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
    check_option,
    check_probabilities,
    check_targets,
)
from .._fused._passes import checked_top_label, takes_probabilities

#: What a sample is judged on: its top-label confidence against whether the prediction is
#: right, or (binary problems) the positive-class probability against ``y == positive``.
CONVENTIONS = ("top_label", "positive_class")

#: ``convention="auto"``: the positive class for the values by group of a binary problem
#: (a group shifted one way hides among calibrated ones once both tails fold onto
#: [0.5, 1]), else the top label.
AUTO = "auto"


def resolve_convention(convention, n_classes, by_group):
    """The convention that ``convention`` stands for (``"auto"`` resolved).

    Parameters
    ----------
    convention : {"auto", "top_label", "positive_class"}
    n_classes : int or None
        Number of classes (only read for the values by group).
    by_group : bool
        Whether the values are computed by group.

    Returns
    -------
    convention : {"top_label", "positive_class"}
    """
    check_option(convention, "convention", (AUTO, *CONVENTIONS))
    if convention != AUTO:
        return convention
    return "positive_class" if by_group and n_classes == 2 else "top_label"


#: Number of elements of one block when a computation runs over blocks of rows.
_BLOCK_ELEMENTS = 1 << 20
#: The most columns whose row maxima are taken column by column, and the rows of a block.
_COLUMN_MAXIMA = 16
_MAXIMA_ROWS = 1 << 14


def block_rows(n_cols):
    """Rows of one block of :func:`_row_blocks` (about ``_BLOCK_ELEMENTS`` elements)."""
    return max(1, _BLOCK_ELEMENTS // max(n_cols, 1))


def _row_blocks(n_rows, n_cols):
    """Yield slices of consecutive rows holding about ``_BLOCK_ELEMENTS`` elements each."""
    step = block_rows(n_cols)
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def _confidence(proba):
    """Return the row maxima (top-label confidences) in the input's precision.

    With up to ``_COLUMN_MAXIMA`` columns, the maxima are taken column by column over
    blocks of rows (``np.maximum`` of whole columns, three times as fast as numpy's
    reduction along each short row).
    """
    n_rows, n_cols = proba.shape
    if n_cols > _COLUMN_MAXIMA or n_cols < 2:
        return proba.max(axis=1)
    confidence = np.empty(n_rows, proba.dtype)
    for start in range(0, n_rows, _MAXIMA_ROWS):
        block, out = proba[start : start + _MAXIMA_ROWS], confidence[start : start + _MAXIMA_ROWS]
        np.maximum(block[:, 0], block[:, 1], out=out)
        for column in range(2, n_cols):
            np.maximum(out, block[:, column], out=out)
    return confidence


def _confidence_and_correct(proba, y_index):
    """Return each row's confidence and whether its prediction (``argmax``) is right.

    The prediction is right when the true class attains the row maximum, unless an
    earlier column ties with it (``argmax`` takes the first maximal column). Two entries
    equal to the maximum need ``2 max <= row sum``, so only rows whose maximum is at most
    one half (plus the row-sum tolerance) can tie; only those are searched for their
    first maximal column. This avoids the slow index-tracking reduction on every row.
    """
    confidence = _confidence(proba)
    true_proba = proba[np.arange(proba.shape[0]), y_index]
    correct = true_proba == confidence
    maybe_tied = correct & (y_index > 0) & (confidence <= 0.5 + ROW_SUM_TOLERANCE)
    candidates = np.flatnonzero(maybe_tied)
    step = max(1, _BLOCK_ELEMENTS // proba.shape[1])
    for start in range(0, candidates.shape[0], step):
        rows = candidates[start : start + step]
        is_maximum = np.take(proba, rows, axis=0) == confidence[rows, None]
        correct[rows] = is_maximum.argmax(axis=1) == y_index[rows]
    return confidence, correct


def scores_and_outcomes(proba, y_index, convention="top_label"):
    """Return the score each sample is judged on and whether its event happened.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Validated probabilities.
    y_index : ndarray of shape (n_samples,)
        Column of each sample's true class.
    convention : {"top_label", "positive_class"}, default="top_label"
        ``"top_label"``: the row maximum and whether ``argmax`` is the true class.
        ``"positive_class"`` (two columns only): the second column (the positive class,
        ``labels[1]``) and whether the true class is that class.

    Returns
    -------
    score : ndarray of shape (n_samples,)
        In the input's precision.
    outcome : ndarray of shape (n_samples,), dtype bool
    """
    check_option(convention, "convention", CONVENTIONS)
    if convention == "top_label":
        return _confidence_and_correct(proba, y_index)
    if proba.shape[1] != 2:
        raise ValueError(
            "Expected a binary problem (2 classes) for convention='positive_class', got "
            f"{proba.shape[1]} classes; use convention='top_label' or "
            "classwise_calibration_error for more classes."
        )
    return np.ascontiguousarray(proba[:, 1]), y_index == 1


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

    With numba, large C-ordered probabilities are checked in the same read of the rows
    that finds their top-label scores (:func:`~sklearn_calib.metrics._fused.checked_top_label`);
    the predictions keep those scores.

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
    if not takes_probabilities(y_prob):
        return Predictions(
            *check_classification_inputs(y_true, y_prob, labels=labels, sample_weight=sample_weight)
        )
    try:
        y_index, sample_weight = check_targets(y_true, y_prob.shape, labels, sample_weight)
    except ValueError:
        check_probabilities(y_prob)  # bad probabilities are named first, as always
        raise
    top_label = checked_top_label(y_prob, y_index, ROW_SUM_TOLERANCE)
    if top_label is None:
        return Predictions(y_index, check_probabilities(y_prob), sample_weight)
    data = Predictions(y_index, y_prob, sample_weight)
    data.set_scores("top_label", *top_label)
    return data
