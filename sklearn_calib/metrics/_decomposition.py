"""Score decompositions: miscalibration, discrimination and uncertainty (CORP), and the
calibration/refinement split by temperature scaling."""

import numpy as np
from sklearn.isotonic import isotonic_regression
from sklearn.utils import Bunch

from .._validation import check_option
from ._metrics import SCORES, _row_blocks, _weighted_mean, per_sample_score
from ._predictions import check_predictions
from ._weights import sample_count

_METHODS = ("isotonic", "temperature")


def _isotonic_fit(values, target, weight):
    """Weighted least-squares non-decreasing fit of ``target`` on ``values`` (PAV).

    Tied values are pooled first (their weighted mean target), so the fit is a function
    of the value; rows of zero weight take the fit of the nearest weighted value.
    """
    distinct, inverse = np.unique(values, return_inverse=True)
    mass = np.bincount(inverse, weights=weight, minlength=distinct.shape[0])
    total = np.bincount(inverse, weights=weight * target, minlength=distinct.shape[0])
    held = mass > 0
    fitted = isotonic_regression(total[held] / mass[held], sample_weight=mass[held])
    if not held.all():
        fitted = np.interp(distinct, distinct[held], fitted)
    return fitted[inverse]


def _isotonic_recalibration(proba, y_index, weight, score):
    """CORP: each class's probability refitted by isotonic regression on its indicator."""
    n_classes = proba.shape[1]
    if score == "log_loss" and n_classes > 2:
        raise ValueError(
            f"Expected a binary problem for score='log_loss' with method='isotonic', got "
            f"{n_classes} classes: isotonic recalibration of the log loss needs a single "
            "score per sample; use method='temperature', or score='brier' (decomposed class "
            "by class)."
        )
    if n_classes == 2:
        positive = _isotonic_fit(proba[:, 1].astype(np.float64), y_index == 1, weight)
        return np.column_stack([1.0 - positive, positive])
    return np.column_stack(
        [
            _isotonic_fit(proba[:, k].astype(np.float64), y_index == k, weight)
            for k in range(n_classes)
        ]
    )


#: The inverse temperature is searched in [1 / MAX_TEMPERATURE, MAX_TEMPERATURE].
MAX_TEMPERATURE = 1e4
#: Probabilities are floored here before their logarithm becomes the logits (as the
#: calibrators' ``input="probabilities"`` do): a 1-D positive-class input loses about
#: 1e-16 in ``1 - p``, which must not matter.
LOGIT_FLOOR = 1e-12
_TEMPERATURE_RTOL = 1e-12
_TEMPERATURE_STEPS = 200


def _nll_derivatives(gap, true_gap, share, beta):
    """First and second derivative in ``beta`` of the mean NLL of ``softmax(beta * gap)``."""
    first = second = 0.0
    for rows in _row_blocks(gap.shape[0], gap.shape[1]):
        expo = np.exp(beta * gap[rows])
        total = expo.sum(axis=1)
        mean = np.einsum("ij,ij->i", expo, gap[rows]) / total
        square = np.einsum("ij,ij,ij->i", expo, gap[rows], gap[rows]) / total
        first += share[rows] @ (mean - true_gap[rows])
        second += share[rows] @ (square - mean * mean)
    return first, second


def _inverse_temperature(log_proba, y_index, weight):
    """The ``beta`` minimising the weighted mean NLL of ``softmax(beta * log p)``.

    The NLL is convex in ``beta``, so its derivative (the mean of ``log p`` under the
    scaled softmax minus that of the true class) is increasing: Newton steps, kept inside
    a bracket of the root and replaced by a bisection (in ``log beta``) when they leave
    it. When the derivative keeps its sign over the searched range (scores that separate
    the classes, or that favour the wrong ones on average) the bound is returned: the NLL
    there equals its infimum to rounding.
    """
    gap = log_proba - log_proba.max(axis=1, keepdims=True)
    true_gap = gap[np.arange(gap.shape[0]), y_index]
    share = weight / weight.sum()
    low, high = 1.0 / MAX_TEMPERATURE, MAX_TEMPERATURE
    if _nll_derivatives(gap, true_gap, share, low)[0] >= 0:
        return low
    if _nll_derivatives(gap, true_gap, share, high)[0] <= 0:
        return high
    beta = 1.0
    for _ in range(_TEMPERATURE_STEPS):
        first, second = _nll_derivatives(gap, true_gap, share, beta)
        if first > 0:
            high = beta
        else:
            low = beta
        step = beta - first / second if second > 0 else np.nan
        following = step if low < step < high else np.sqrt(low * high)
        if abs(following - beta) <= _TEMPERATURE_RTOL * beta:
            return following
        beta = following
    return beta


def _temperature_recalibration(proba, y_index, weight, n_samples):
    """Temperature scaling fitted on the same data, mixed with 1 / (n + 1) uniform mass.

    ``n_samples`` is the number of samples the weighted rows stand for.
    """
    n_classes = proba.shape[1]
    log_proba = np.log(np.maximum(proba.astype(np.float64), LOGIT_FLOOR))
    beta = _inverse_temperature(log_proba, y_index, weight)
    scaled = beta * (log_proba - log_proba.max(axis=1, keepdims=True))
    recalibrated = np.exp(scaled)
    recalibrated /= recalibrated.sum(axis=1, keepdims=True)
    mixing = 1.0 / (n_samples + 1)
    return (1.0 - mixing) * recalibrated + mixing / n_classes, 1.0 / beta


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
    weight = data.weight
    extra = {}
    if method == "isotonic":
        recalibrated = _isotonic_recalibration(proba, y_index, weight, score)
    else:
        n_samples = sample_count(sample_weight, proba.shape[0])
        recalibrated, temperature = _temperature_recalibration(proba, y_index, weight, n_samples)
        extra["temperature"] = float(temperature)
    frequencies = np.bincount(y_index, weights=weight, minlength=proba.shape[1]) / weight.sum()
    marginal = np.broadcast_to(frequencies, proba.shape)
    original = _weighted_mean(per_sample_score(proba, y_index, score), sample_weight)
    refined = _weighted_mean(per_sample_score(recalibrated, y_index, score), sample_weight)
    uncertainty = _weighted_mean(per_sample_score(marginal, y_index, score), sample_weight)
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
