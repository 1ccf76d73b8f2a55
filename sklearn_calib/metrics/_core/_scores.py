"""What each sample is judged on: its convention, its score and whether its event happened.

The top-label convention judges each row's largest probability against whether its
prediction (the first maximal column, as ``np.argmax``) is right; the positive-class
convention (binary problems) the second column against ``y == labels[1]``.
"""

import numpy as np

from ..._validation import ROW_SUM_TOLERANCE, check_option
from ._rows import block_rows

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


#: The most columns whose row maxima are taken column by column, and the rows of a block.
_COLUMN_MAXIMA = 16


_MAXIMA_ROWS = 1 << 14


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
    step = block_rows(proba.shape[1])
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
