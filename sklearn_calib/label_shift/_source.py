"""What label-shift adaptation keeps of the labelled source rows, and the checks of priors."""

from dataclasses import dataclass

import numpy as np

from ._confusion import confusion_matrix, predictions

#: Largest distance of a sum of priors from 1.
PRIOR_SUM_TOLERANCE = 1e-6


def check_prior(prior, name, n_classes, *, allow_zero):
    """Return class priors as a float64 array after checking them.

    Parameters
    ----------
    prior : array-like of shape (n_classes,)
    name : str
        Name of the argument in error messages.
    n_classes : int
    allow_zero : bool
        Whether a class may have prior 0 (a target without the class); a source prior of
        0 leaves nothing to reweight.

    Returns
    -------
    ndarray of shape (n_classes,)
    """
    values = np.asarray(prior, dtype=np.float64)
    if values.shape != (n_classes,):
        raise ValueError(
            f"Expected `{name}` to hold one prior per class ({n_classes}), got shape "
            f"{values.shape}."
        )
    if not np.isfinite(values).all() or (values < 0).any():
        raise ValueError(f"Expected `{name}` to be finite and non-negative, got {values}.")
    total = float(values.sum())
    if abs(total - 1.0) > PRIOR_SUM_TOLERANCE:
        raise ValueError(f"Expected `{name}` to sum to 1, got a sum of {total:.8g}.")
    if not allow_zero and (values == 0).any():
        raise ValueError(
            f"Expected `{name}` to be positive for every class, got 0 for class index "
            f"{np.flatnonzero(values == 0).tolist()}: a class of source prior 0 has no "
            "probability to reweight."
        )
    return values / total


@dataclass
class SourceSummary:
    """The source's priors and confusion matrix, from calibrated probabilities and labels.

    Parameters
    ----------
    prior : ndarray of shape (n_classes,)
        The priors the calibrated probabilities answer to (EM's ``pi``, and the
        denominator of the class weights).
    label_prior : ndarray of shape (n_classes,)
        The weighted label frequencies (the column sums of ``confusion``).
    confusion : ndarray of shape (n_classes, n_classes)
        The joint of prediction and class (:func:`~._confusion.confusion_matrix`).
    prediction_counts : ndarray of shape (n_classes,)
        The number of rows predicted as each class (Lipton et al.'s test).
    n_samples : float
        The weighted number of rows (RLLS's concentration bound).
    """

    prior: np.ndarray
    label_prior: np.ndarray
    confusion: np.ndarray
    prediction_counts: np.ndarray
    n_samples: float


def summarise_source(proba, y_index, sample_weight, *, source_prior, confusion):
    """The :class:`SourceSummary` of calibrated source rows.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Calibrated probabilities of the source rows.
    y_index : ndarray of shape (n_samples,)
        Column of each row's class.
    sample_weight : ndarray of shape (n_samples,) or None
    source_prior : {"predictions", "labels"} or array-like of shape (n_classes,)
    confusion : {"hard", "soft"}

    Returns
    -------
    SourceSummary
    """
    n_samples, n_classes = proba.shape
    weight = np.ones(n_samples) if sample_weight is None else sample_weight
    total = float(weight.sum())
    normalised = weight / total
    label_prior = np.bincount(y_index, weights=normalised, minlength=n_classes)
    if isinstance(source_prior, str):
        prior = label_prior if source_prior == "labels" else normalised @ proba
        prior = prior / prior.sum()
    else:
        prior = check_prior(source_prior, "source_prior", n_classes, allow_zero=False)
    return SourceSummary(
        prior=prior,
        label_prior=label_prior,
        confusion=confusion_matrix(proba, y_index, normalised, confusion),
        prediction_counts=weight @ predictions(proba, "hard"),
        n_samples=total,
    )


def check_adaptable(source, classes, target_prior=None):
    """Raise a ValueError when a class the target may hold has no source to reweight.

    Estimating target priors needs every class in the labelled source data (and a positive
    source prior); known target priors need them for the classes they give a positive
    prior.

    Parameters
    ----------
    source : SourceSummary
    classes : ndarray of shape (n_classes,)
        The labels, for the message.
    target_prior : ndarray of shape (n_classes,) or None, default=None
        Known target priors; None when they are estimated.
    """
    missing = (source.label_prior == 0) | (source.prior == 0)
    if target_prior is not None:
        missing &= target_prior > 0
    if missing.any():
        raise ValueError(
            f"The class(es) {classes[missing].tolist()} have no labelled source sample (of "
            "positive weight) or a source prior of 0"
            + (", but a positive target prior" if target_prior is not None else "")
            + ": label-shift adaptation re-weights the source's probabilities, and cannot "
            "tell how a class unseen at the source changes. Fit on source data that holds "
            "every class."
        )
