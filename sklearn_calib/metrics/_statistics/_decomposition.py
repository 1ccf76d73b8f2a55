"""Score decompositions: miscalibration, discrimination and uncertainty (CORP), and the
calibration/refinement split by temperature scaling."""

import numpy as np
from sklearn.isotonic import isotonic_regression
from sklearn.utils import Bunch

from ..._validation import check_option
from .._core._weights import sample_count
from .._functions._binned import SCORES, _weighted_mean, log_loss_clip, per_sample_score
from .._functions._predictions import _row_blocks, check_predictions
from .._fused._passes import isotonic_scores, tempered_moments

_METHODS = ("isotonic", "temperature")


def _dot(a, b):
    """Dot product of two vectors, without starting BLAS threads (cheaper than BLAS's
    threads on a busy machine for many calls)."""
    return np.einsum("i,i->", a, b)


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
        return _dot(positive, hit) + _dot(mass - positive, miss)
    # sum of w (g - 1[y = k])^2, the indicator being 1 on the positive weight
    return _dot(mass, fitted**2) - 2.0 * _dot(positive, fitted) + positive.sum()


def _isotonic_refinement(data, score):
    """CORP: the weighted mean score once each class's probability is refitted by isotonic
    regression on its indicator (the positive class's alone for a binary problem)."""
    proba, y_index, weight = data.proba, data.y_index, data.sample_weight
    n_classes = proba.shape[1]
    if score == "log_loss" and n_classes > 2:
        raise ValueError(
            f"Expected a binary problem for score='log_loss' with method='isotonic', got "
            f"{n_classes} classes: isotonic recalibration of the log loss needs a single "
            "score per sample; use method='temperature', or score='brier' (decomposed class "
            "by class)."
        )
    classes = [1] if n_classes == 2 else list(range(n_classes))
    clip = log_loss_clip(np.float64) if score == "log_loss" else None
    column_scores = isotonic_scores(proba, y_index, classes, weight, clip)
    if column_scores is None:
        keys = _indicator_keys(proba, y_index, classes)
        column_scores = (_isotonic_score(key, weight, clip) for key in keys)
    total = 0.0
    for column_score in column_scores:
        total += column_score
    if score == "brier" and n_classes == 2:
        total *= 2.0  # the negative column is 1 - g, with the same squared errors
    return float(total / data.weight.sum())


#: The inverse temperature is searched in [1 / MAX_TEMPERATURE, MAX_TEMPERATURE].
MAX_TEMPERATURE = 1e4
#: Probabilities are floored here before their logarithm becomes the logits (as the
#: calibrators' ``input="probabilities"`` do): a 1-D positive-class input loses about
#: 1e-16 in ``1 - p``, which must not matter.
LOGIT_FLOOR = 1e-12
_TEMPERATURE_RTOL = 1e-12
_TEMPERATURE_STEPS = 200
#: Rows of the subsample whose optimal temperature starts the search on more rows.
_WARM_START_ROWS = 1 << 15


def _row_sums(block):
    """Row sums of a 2-D block (einsum's loop: faster than ``sum(axis=1)`` for few
    columns, and unlike a matrix-vector product it starts no BLAS threads)."""
    return np.einsum("ij->i", block)


def _scaled_exponentials(gap, beta):
    """Yield each block of rows with ``exp(beta * gap)`` of its rows (a reused buffer)."""
    buffer = None
    for rows in _row_blocks(gap.shape[0], gap.shape[1]):
        block = gap[rows]
        if buffer is None:
            buffer = np.empty_like(block)
        expo = buffer[: block.shape[0]]
        np.multiply(block, beta, out=expo)
        np.exp(expo, out=expo)
        yield rows, block, expo


class _TemperedNLL:
    """The weighted mean NLL of ``softmax(beta * gap)`` on fixed rows, as a function of
    ``beta``; it keeps the softmax's row totals at the last ``beta`` it was evaluated at.
    """

    def __init__(self, gap, true_gap, share):
        self.gap, self.true_gap, self.share = gap, true_gap, share
        self.beta, self.totals = None, None

    def derivatives(self, beta):
        """First and second derivative in ``beta``."""
        first = second = 0.0
        totals = np.empty(self.gap.shape[0])
        for rows, block, expo in _scaled_exponentials(self.gap, beta):
            share, true_gap = self.share[rows], self.true_gap[rows]
            parts = tempered_moments(expo, block, share, true_gap, totals[rows], self.gap.size)
            if parts is None:
                parts = _moments(expo, block, share, true_gap, totals[rows])
            first += parts[0]
            second += parts[1]
        self.beta, self.totals = beta, totals
        return first, second

    def row_totals(self, beta):
        """The row totals of ``exp(beta * gap)``, kept from the last evaluation if at ``beta``."""
        if self.beta == beta:
            return self.totals
        return exponential_row_totals(self.gap, beta)


def _moments(expo, gap, share, true_gap, totals):
    """numpy's :func:`~._fused.tempered_moments`: the derivatives' terms of a block of
    rows from three row sums, its row totals written to ``totals`` (``expo`` is
    overwritten)."""
    totals[:] = _row_sums(expo)
    expo *= gap
    mean = _row_sums(expo) / totals
    expo *= gap
    square = _row_sums(expo) / totals
    return _dot(share, mean - true_gap), _dot(share, square - mean * mean)


def exponential_row_totals(gap, beta):
    """The row totals of ``exp(beta * gap)``."""
    totals = np.empty(gap.shape[0])
    for rows, _, expo in _scaled_exponentials(gap, beta):
        totals[rows] = _row_sums(expo)
    return totals


def _inverse_temperature(nll, start=1.0):
    """The ``beta`` minimising a :class:`_TemperedNLL`.

    The NLL is convex in ``beta``, so its derivative (the mean of ``gap`` under the
    scaled softmax minus that of the true class) is increasing. When it keeps its sign
    over the searched range (scores that separate the classes, or that favour the wrong
    ones on average) the bound is returned: the NLL there equals its infimum to rounding.
    Otherwise Newton steps from ``start``, kept inside a bracket of the root and replaced
    by a bisection (in ``log beta``) when they leave it.
    """
    low, high = 1.0 / MAX_TEMPERATURE, MAX_TEMPERATURE
    if nll.derivatives(low)[0] >= 0:
        return low
    if nll.derivatives(high)[0] <= 0:
        return high
    return _newton_root(nll.derivatives, low, high, start)


def _newton_root(derivatives, low, high, beta):
    """The root in ``(low, high)`` of an increasing ``derivatives(beta)[0]``, from ``beta``.

    The last point evaluated is returned once the next is within the tolerance of it.
    """
    for _ in range(_TEMPERATURE_STEPS):
        first, second = derivatives(beta)
        if first > 0:
            high = beta
        else:
            low = beta
        step = beta - first / second if second > 0 else np.nan
        # a step below rounding lands on beta, the bracket's new end: converged, not outside
        if abs(step - beta) <= _TEMPERATURE_RTOL * beta:
            return beta
        following = step if low < step < high else np.sqrt(low * high)
        if abs(following - beta) <= _TEMPERATURE_RTOL * beta:
            return beta
        beta = following
    return beta


def _warm_inverse_temperature(gap, true_gap, weight):
    """:func:`_inverse_temperature` on all rows, started from the optimum of a subsample.

    On many rows, the optimum of an evenly spaced subsample starts Newton's steps close
    to the root, which saves most of the passes over all rows; the bounds of the search
    are checked on the subsample, and a bound it returns is confirmed on all rows.

    Returns
    -------
    beta : float
    nll : _TemperedNLL
        The NLL on all rows, last evaluated at ``beta`` when it could be.
    """
    nll = _TemperedNLL(gap, true_gap, weight / weight.sum())
    n_rows = gap.shape[0]
    rows = np.linspace(0, n_rows - 1, _WARM_START_ROWS).astype(np.intp)
    if n_rows <= 2 * _WARM_START_ROWS or weight[rows].sum() <= 0:
        return _inverse_temperature(nll), nll
    sample = _TemperedNLL(gap[rows], true_gap[rows], weight[rows] / weight[rows].sum())
    start = _inverse_temperature(sample)
    low, high = 1.0 / MAX_TEMPERATURE, MAX_TEMPERATURE
    if start == low and nll.derivatives(low)[0] >= 0:
        return low, nll
    if start == high and nll.derivatives(high)[0] <= 0:
        return high, nll
    start = start if low < start < high else 1.0
    return _newton_root(nll.derivatives, low, high, start), nll


def _logit_gaps(proba, top):
    """``log max(p, floor)`` minus its row maximum, in float64, from the row maxima ``top``."""
    gap = np.empty(proba.shape)
    log_top = np.log(np.maximum(top.astype(np.float64), LOGIT_FLOOR))
    for rows in _row_blocks(proba.shape[0], proba.shape[1]):
        block = gap[rows]
        np.maximum(proba[rows], LOGIT_FLOOR, out=block)
        np.log(block, out=block)
        block -= log_top[rows, None]
    return gap


def _temperature_refinement(data, score):
    """The weighted mean score after temperature scaling fitted on the same data, mixed
    with ``1 / (n + 1)`` uniform mass, ``n`` the number of samples the rows stand for;
    and the temperature."""
    proba, y_index = data.proba, data.y_index
    n_rows = proba.shape[0]
    gap, true_gap = logit_gaps(proba, y_index, data.scores("top_label")[0])
    beta, nll = _warm_inverse_temperature(gap, true_gap, data.weight)
    mixing = 1.0 / (sample_count(data.sample_weight, n_rows) + 1)
    values = tempered_scores(gap, true_gap, beta, nll.row_totals(beta), mixing, score)
    return _weighted_mean(values, data.sample_weight), float(1.0 / beta)


def logit_gaps(proba, y_index, top):
    """The logit gaps of :func:`_logit_gaps` and those of each row's true class."""
    gap = _logit_gaps(proba, top)
    return gap, gap[np.arange(proba.shape[0]), y_index]


def tempered_scores(gap, true_gap, beta, totals, mixing, score):
    """Each row's score of ``softmax(beta * gap)`` mixed with ``mixing`` uniform mass.

    Parameters
    ----------
    gap, true_gap : ndarray of shape (n_rows, n_classes) and (n_rows,)
        The logit gaps (:func:`logit_gaps`).
    beta : float
        The inverse temperature.
    totals : ndarray of shape (n_rows,)
        The row totals of ``exp(beta * gap)`` (:meth:`_TemperedNLL.row_totals`).
    mixing : float
        The uniform distribution's weight in the mixture.
    score : {"brier", "log_loss"}
        The score.

    Returns
    -------
    values : ndarray of shape (n_rows,)
    """
    n_classes = gap.shape[1]
    true_proba = (1.0 - mixing) * np.exp(beta * true_gap) / totals + mixing / n_classes
    if score == "log_loss":
        return -np.log(np.clip(true_proba, *log_loss_clip(np.float64)))
    # sum_k r_k^2 of r = (1 - m) q + m / K, with sum_k q_k = 1
    squares = np.empty(gap.shape[0])
    for rows, _, expo in _scaled_exponentials(gap, beta):
        expo *= expo
        squares[rows] = _row_sums(expo)
    squares *= (1.0 - mixing) ** 2 / totals**2
    squares += (2.0 - mixing) * mixing / n_classes
    return squares - 2.0 * true_proba + 1.0


def marginal_scores(frequencies, score):
    """Each class's score when the class frequencies are the forecast and it is the truth."""
    if score == "log_loss":
        return -np.log(np.clip(frequencies, *log_loss_clip(np.float64)))
    return frequencies @ frequencies - 2.0 * frequencies + 1.0


def _marginal_score(frequencies, y_index, score, sample_weight):
    """The weighted mean score of the class frequencies as every sample's forecast."""
    return _weighted_mean(marginal_scores(frequencies, score)[y_index], sample_weight)


def calibration_decomposition(
    y_true, y_prob, *, score="brier", method="isotonic", labels=None, sample_weight=None
):
    """Decompose a proper score into miscalibration, discrimination and uncertainty.

    With the recalibrated probabilities ``g(p)`` and the score ``S`` (mean over samples):
    ``MCB = S(p) - S(g(p))`` is what recalibration removes, ``DSC = S(y_bar) - S(g(p))``
    what the recalibrated forecast gains over the class frequencies ``y_bar``, and
    ``UNC = S(y_bar)``, so that ``S(p) = MCB - DSC + UNC`` exactly (up to rounding). The
    score that no recalibration by ``g`` can remove is the refinement, ``S(g(p)) =
    UNC - DSC``.

    - ``method="isotonic"`` is the CORP decomposition (Dimitriadis, Gneiting & Jordan
      2021): ``g`` is the isotonic (PAV) regression of the outcome on the forecast, the
      optimal non-decreasing recalibration, so ``MCB >= 0`` and ``DSC >= 0``. A binary
      problem is decomposed on its positive-class probability; with more classes the
      Brier score (a sum over classes) is decomposed class by class (each column against
      its indicator; the refitted columns need not sum to 1). The log loss of more than
      two classes has no isotonic recalibration: use ``method="temperature"``.
    - ``method="temperature"`` is the calibration/refinement split of Berta et al.
      (2025): ``g`` is temperature scaling fitted (NLL) on the same data (the logits are
      ``log max(p, 1e-12)``, the temperature is searched in [1e-4, 1e4]), its output
      mixed with the uniform distribution at weight ``1 / (n + 1)`` as they do, so the
      log loss stays finite; with ``sample_weight``, ``n`` is the number of samples the
      rows stand for (the total of integer weights, which count repeated rows; else the
      number of positive weights). The refinement is what post-hoc calibration cannot
      fix; selecting a network by it and calibrating afterwards is their
      refine-then-calibrate recipe (:func:`refinement_loss` and the ``neg_refinement_*``
      scorers).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    score : {"brier", "log_loss"}, default="brier"
        The proper score: :func:`brier_score` (summed over classes) or
        :func:`negative_log_likelihood`.
    method : {"isotonic", "temperature"}, default="isotonic"
        The recalibration ``g``.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights (in the means, the class frequencies and the fit of ``g``).

    Returns
    -------
    decomposition : :class:`~sklearn.utils.Bunch`
        ``score``, ``miscalibration``, ``discrimination``, ``uncertainty`` and
        ``refinement`` (floats); ``temperature`` (float) for ``method="temperature"``.

    See Also
    --------
    refinement_loss : The refinement alone, for model selection.

    References
    ----------
    .. [1] T. Dimitriadis, T. Gneiting and A. I. Jordan, "Stable reliability diagrams for
       probabilistic classifiers", Proceedings of the National Academy of Sciences 118(8),
       2021.
    .. [2] E. Berta, D. Holzmüller, M. I. Jordan and F. Bach, "Rethinking Early Stopping:
       Refine, Then Calibrate", arXiv:2501.19195, 2025.

    Examples
    --------
    >>> from sklearn_calib.scoring import calibration_decomposition
    >>> y_true = [0, 0, 1, 1, 1, 0]
    >>> y_prob = [0.1, 0.6, 0.7, 0.8, 0.4, 0.2]
    >>> parts = calibration_decomposition(y_true, y_prob)
    >>> round(parts.score, 4), round(parts.miscalibration, 4)
    (0.3, 0.1333)
    >>> round(parts.miscalibration - parts.discrimination + parts.uncertainty, 4)
    0.3
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return _calibration_decomposition(data, score=score, method=method)


def _calibration_decomposition(data, *, score="brier", method="isotonic"):
    """:func:`calibration_decomposition` of checked predictions."""
    check_option(score, "score", SCORES)
    check_option(method, "method", _METHODS)
    y_index, proba, sample_weight = data.y_index, data.proba, data.sample_weight
    extra = {}
    if method == "isotonic":
        refined = _isotonic_refinement(data, score)
    else:
        refined, extra["temperature"] = _temperature_refinement(data, score)
    weight = data.weight
    frequencies = np.bincount(y_index, weights=weight, minlength=proba.shape[1]) / weight.sum()
    original = _weighted_mean(per_sample_score(proba, y_index, score), sample_weight)
    uncertainty = _marginal_score(frequencies, y_index, score, sample_weight)
    return Bunch(
        score=original,
        miscalibration=original - refined,
        discrimination=uncertainty - refined,
        uncertainty=uncertainty,
        refinement=refined,
        **extra,
    )


def refinement_loss(
    y_true, y_prob, *, score="log_loss", method="temperature", labels=None, sample_weight=None
):
    """The part of a proper score that recalibration cannot remove (Berta et al. 2025).

    ``calibration_decomposition(...).refinement``: by default the log loss after
    temperature scaling fitted on the same data. A network selected (or early-stopped) by
    its refinement and calibrated afterwards beats one selected by its raw log loss,
    which stops too early to calibrate well; use it through the ``neg_refinement_log_loss``
    and ``neg_refinement_brier`` scorers.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    score : {"log_loss", "brier"}, default="log_loss"
        The proper score.
    method : {"temperature", "isotonic"}, default="temperature"
        The recalibration; see :func:`calibration_decomposition`.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    loss : float

    See Also
    --------
    calibration_decomposition : The whole decomposition, refinement included.

    References
    ----------
    .. [1] E. Berta, D. Holzmüller, M. I. Jordan and F. Bach, "Rethinking Early Stopping:
       Refine, Then Calibrate", arXiv:2501.19195, 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.scoring import negative_log_likelihood, refinement_loss
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(1000)
    >>> y = rng.random(1000) < p
    >>> overconfident = p ** 3 / (p ** 3 + (1 - p) ** 3)  # same ranking, sharper
    >>> bool(negative_log_likelihood(y, overconfident) > negative_log_likelihood(y, p))
    True
    >>> bool(abs(refinement_loss(y, overconfident) - refinement_loss(y, p)) < 1e-3)
    True
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return _refinement_loss(data, score=score, method=method)


def _refinement_loss(data, *, score="log_loss", method="temperature"):
    """:func:`refinement_loss` of checked predictions."""
    return _calibration_decomposition(data, score=score, method=method).refinement
