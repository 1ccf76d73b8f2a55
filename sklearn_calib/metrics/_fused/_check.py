"""The check of the probabilities, fused with the read that finds their top-label scores.

numba reads large C-ordered probabilities once for both: each row's maximum and the
column of its first maximum, and the ranges the probability checks need (entries in
[0, 1], row sums near 1). Its numpy twin is the library's check,
:func:`~sklearn_calib._validation.check_probabilities`, after which the top-label scores
are found when first needed (``Predictions.scores``: three more reads). Probabilities
that another fused pass reads next (label-shift EM's) are checked by numba in one read
when that pass takes numba (:func:`checked_rows`).
"""

import numpy as np

from ..._validation import ROW_SUM_TOLERANCE, check_probabilities
from . import _switch

#: Probabilities with fewer entries are checked by numpy (numba's threads cost more).
_CHECKED_ELEMENTS = 1 << 16
#: Rows per parallel block of the numba probability checks.
_CHECKED_ROWS = 1 << 15


def reads_in_one_pass(y_prob):
    """Whether ``y_prob`` is an array the fused check reads as it is: C-ordered, 2-D,
    native float32 or float64, of at least 2 columns."""
    return (
        isinstance(y_prob, np.ndarray)
        and y_prob.ndim == 2
        and y_prob.dtype in (np.float32, np.float64)
        and y_prob.flags.c_contiguous
        and y_prob.dtype.isnative
        and y_prob.shape[1] >= 2
    )


def takes_probabilities(y_prob):
    """Whether numba's check reads ``y_prob``: an array of :func:`reads_in_one_pass` with
    at least ``_CHECKED_ELEMENTS`` entries, on which the pass takes numba."""
    return (
        reads_in_one_pass(y_prob)
        and y_prob.size >= _CHECKED_ELEMENTS
        and _switch.numba_kernels("top_label", y_prob.size) is not None
    )


def checked_probabilities(y_prob, y_index, tol):
    """Checked probabilities, and their top-label scores where the check found them.

    Parameters
    ----------
    y_prob : ndarray of shape (n_samples, n_classes)
        Probabilities of :func:`reads_in_one_pass`.
    y_index, tol
        As :func:`checked_top_label` takes them.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes)
        :func:`~sklearn_calib._validation.check_probabilities` of ``y_prob`` (``y_prob``
        itself when it passes unchanged).
    top_label : tuple of 2 ndarray of shape (n_samples,) or None
        numba's path: each row's maximum and whether its first maximal column is the true
        class (``Predictions.scores("top_label")``), when the rows passed the fused
        check. numpy's path, or rows the checks change or reject: None.
    """
    if takes_probabilities(y_prob):
        top_label = checked_top_label(y_prob, y_index, tol)
        if top_label is not None:
            return y_prob, top_label
    return check_probabilities(y_prob), None


def checked_top_label(proba, y_index, tol):
    """numba's fused check: the top-label scores of probabilities that pass the probability
    checks, from one read of the rows; None when they do not pass.

    The rows pass when every entry is finite and in [0, 1] and every row sums to 1 within
    ``tol``: exactly the probabilities that
    :func:`~sklearn_calib._validation.check_probabilities` returns unchanged (up to the
    rounding of its row sums). Other input goes to those checks, for their errors or
    their clipping.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Probabilities that :func:`takes_probabilities` takes.
    y_index : ndarray of shape (n_samples,), dtype int64
        Column of each sample's true class.
    tol : float
        Largest accepted deviation of a row sum from 1.

    Returns
    -------
    top_label : tuple of 2 ndarray of shape (n_samples,) or None
        Each row's maximum (in the input's precision) and whether its first maximal
        column (``argmax``) is the true class.
    """
    kernels = _switch.numba_kernels("top_label", proba.size)
    with _switch.parallel_section(kernels):
        confidence, correct, ranges = kernels.probability_rows(proba, y_index, _CHECKED_ROWS)
    return (confidence, correct) if _unchanged_by_checks(ranges, tol) else None


def checked_rows(y_prob, *, kind, name):
    """:func:`~sklearn_calib._validation.check_probabilities` of ``y_prob`` (argument
    ``name``), in one read by numba where the pass of ``kind`` that follows the check takes
    numba: rows that pass are returned as they are, others go to the library's check for
    its errors or its clipping.

    Parameters
    ----------
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
    kind : str or None
        The pass of :func:`~._switch.numba_kernels` whose path the check takes; None: no
        fused pass follows, the library's check reads the rows.
    name : str
        The argument's name in error messages.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes)
    """
    if kind is not None and reads_in_one_pass(y_prob) and y_prob.size >= _CHECKED_ELEMENTS:
        kernels = _switch.numba_kernels(kind, y_prob.size)
        if kernels is not None:
            with _switch.parallel_section(kernels):
                ranges = kernels.probability_ranges(y_prob, _CHECKED_ROWS)
            if _unchanged_by_checks(ranges, ROW_SUM_TOLERANCE):
                return y_prob
    return check_probabilities(y_prob, name=name)


def _unchanged_by_checks(ranges, tol):
    """Whether the rows of the ``ranges`` of numba's checks pass the probability checks
    unchanged: every entry finite and in [0, 1], every row sum within ``tol`` of 1."""
    lowest_sum, highest_sum, smallest, largest, finite = ranges
    return bool(
        finite
        and smallest >= 0
        and largest <= 1
        and max(highest_sum - 1.0, 1.0 - lowest_sum) <= tol
    )
