"""Score decompositions: miscalibration, discrimination and uncertainty (CORP), and the
calibration/refinement split by temperature scaling."""

import numpy as np
from sklearn.utils import Bunch

from ..._validation import check_option
from .._core._weights import sample_count
from .._functions._predictions import check_predictions
from .._functions._scores import SCORES, _weighted_mean, log_loss_clip, per_sample_score
from .._fused._isotonic import isotonic_scores
from ._tempered import fit_inverse_temperature, logit_gaps, tempered_scores

_METHODS = ("isotonic", "temperature")


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
    total = 0.0
    for column_score in column_scores:
        total += column_score
    if score == "brier" and n_classes == 2:
        total *= 2.0  # the negative column is 1 - g, with the same squared errors
    return float(total / data.weight.sum())


def _temperature_refinement(data, score):
    """The weighted mean score after temperature scaling fitted on the same data, mixed
    with ``1 / (n + 1)`` uniform mass, ``n`` the number of samples the rows stand for;
    and the temperature."""
    proba, y_index = data.proba, data.y_index
    n_rows = proba.shape[0]
    gap, true_gap = logit_gaps(proba, y_index, data.scores("top_label")[0])
    beta, nll = fit_inverse_temperature(gap, true_gap, data.weight)
    mixing = 1.0 / (sample_count(data.sample_weight, n_rows) + 1)
    values = tempered_scores(gap, true_gap, beta, nll.row_totals(beta), mixing, score)
    return _weighted_mean(values, data.sample_weight), float(1.0 / beta)


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
        The refinement loss.

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
