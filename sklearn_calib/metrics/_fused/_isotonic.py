"""The CORP decomposition's isotonic fits: each column's score against the isotonic
(pool-adjacent-violators) fit of its class's indicator, a numba kernel and its numpy twin.

Both sort each column's keys (the probability's bits with the indicator in the freed
bit) with numpy. numba then pools ties and runs the pool-adjacent-violators algorithm in
one pass, adding one term per block of the fit; numpy pools ties with
``np.add.reduceat`` and fits with scikit-learn's ``isotonic_regression``. Their sums
agree to rounding (about 1e-14 relative, numpy's the further from exact for the Brier
score's cancelling terms). On many entries numba's columns are shared by two threads.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from sklearn.isotonic import isotonic_regression

from .._core._rows import dot
from . import _switch

#: Threads of the isotonic fits (numpy's sort and the kernels release the GIL), and the
#: fewest entries worth starting them for.
_ISOTONIC_THREADS = 2
_THREADED_ENTRIES = 1 << 18


def isotonic_scores(proba, y_index, classes, sample_weight, clip):
    """Each column's summed score against the isotonic fit of its class's indicator.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes), float32 or float64
        Checked probabilities.
    y_index : ndarray of shape (n_samples,), dtype int64
        Column of each sample's true class.
    classes : list of int
        The columns to fit.
    sample_weight : ndarray of shape (n_samples,) or None
        Sample weights; values of zero total weight are left out.
    clip : tuple of 2 float or None
        The log loss's clip of the fit; None for the Brier score.

    Returns
    -------
    scores : list of float
        Per column of ``classes``, in order: the weighted sum of the score of the fit
        against the indicator.
    """
    kernels = _switch.numba_kernels("isotonic", proba.shape[0] * len(classes))
    if kernels is None:
        keys = _indicator_keys(proba, y_index, classes)
        return [_isotonic_score(key, sample_weight, clip) for key in keys]
    bits = proba.view(np.uint32 if proba.dtype == np.float32 else np.uint64)
    weighted = sample_weight is not None
    low, high = (0.0, 1.0) if clip is None else clip

    def column_score(column):
        key = kernels.column_keys(bits, y_index, column)
        if weighted:
            order = np.argsort(key)
            key, weight = key[order], sample_weight[order]
        else:
            key.sort()
            weight = np.empty(0)
        return kernels.isotonic_score_sum(key, weight, weighted, clip is not None, low, high)

    if len(classes) == 1 or proba.shape[0] * len(classes) < _THREADED_ENTRIES:
        return [column_score(column) for column in classes]
    with ThreadPoolExecutor(_ISOTONIC_THREADS) as pool:
        return list(pool.map(column_score, classes))


def _indicator_keys(proba, y_index, classes):
    """Sort keys of the columns ``classes``: each probability's bits shifted left by one,
    with the indicator of the column's class in the freed bit; one contiguous row per class.

    The bits of a float of at least 0 order like the float, and those of a value in
    [0, 1] stay below 2**30 (float32) or 2**62 (float64), so the key keeps the width of
    the value; the sign bit of -0.0 shifts out.

    Returns
    -------
    keys : ndarray of shape (len(classes), n_samples), dtype uint32 or uint64
    """
    uint = np.uint32 if proba.dtype == np.float32 else np.uint64
    keys = proba.view(uint).T[classes]
    keys <<= uint(1)
    row_of = np.full(proba.shape[1], -1)
    row_of[classes] = np.arange(len(classes))
    rows = row_of[y_index]
    held = np.flatnonzero(rows >= 0)
    keys[rows[held], held] |= uint(1)
    return keys


def _isotonic_fit(key, weight):
    """Weighted least-squares non-decreasing fit of an indicator on a column (PAV).

    Tied values are pooled first (their weighted mean indicator), so the fit is a
    function of the value; values of zero weight are left out.

    Parameters
    ----------
    key : ndarray of shape (n_samples,)
        The column's keys from :func:`_indicator_keys`; sorted in place.
    weight : ndarray of shape (n_samples,) or None
        Sample weights.

    Returns
    -------
    fitted, mass, positive : ndarray of shape (n_weighted,)
        At each distinct value of positive weight, ascending: the fit, the value's total
        weight and the weight of its rows whose indicator is 1.
    """
    if weight is None:
        key.sort()
    else:
        order = np.argsort(key)
        key, weight = key[order], weight[order]
    one = key.dtype.type(1)
    hit = (key & one).astype(np.float64)
    key >>= one
    starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    if weight is None:
        mass = np.diff(np.append(starts, key.shape[0])).astype(np.float64)
        positive = np.add.reduceat(hit, starts)
    else:
        mass = np.add.reduceat(weight, starts)
        positive = np.add.reduceat(weight * hit, starts)
        held = mass > 0
        mass, positive = mass[held], positive[held]
    return isotonic_regression(positive / mass, sample_weight=mass), mass, positive


def _isotonic_score(key, weight, clip):
    """The weighted sum of the score of a column's isotonic fit against its indicator:
    the log loss with the fit clipped to ``clip``, or the Brier score when it is None."""
    fitted, mass, positive = _isotonic_fit(key, weight)
    if clip is not None:
        hit = -np.log(np.clip(fitted, *clip))
        miss = -np.log(np.clip(1.0 - fitted, *clip))
        return dot(positive, hit) + dot(mass - positive, miss)
    # sum of w (g - 1[y = k])^2, the indicator being 1 on the positive weight
    return dot(mass, fitted**2) - 2.0 * dot(positive, fitted) + positive.sum()
