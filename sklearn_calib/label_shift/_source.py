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


def summarise_source(proba, y_index, sample_weight, *, source_prior, confusion, classes):
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
    classes : ndarray of shape (n_classes,)
        The labels, for error messages.

    Returns
    -------
    SourceSummary
    """
    n_samples, n_classes = proba.shape
    weight = np.ones(n_samples) if sample_weight is None else sample_weight
    total = float(weight.sum())
    label_weight = np.bincount(y_index, weights=weight, minlength=n_classes)
    if (label_weight == 0).any():
        unseen = classes[label_weight == 0].tolist()
        raise ValueError(
            f"Expected every class in the labelled source data, got no sample (of positive "
            f"weight) of class(es) {unseen}: label-shift adaptation cannot tell how a class "
            "unseen at the source changes."
        )
    label_prior = label_weight / total
    normalised = weight / total
    if isinstance(source_prior, str) and source_prior == "labels":
        prior = label_prior
    elif isinstance(source_prior, str):
        prior = normalised @ proba
        prior = check_prior(
            prior / prior.sum(), "the mean source prediction", n_classes, allow_zero=False
        )
    else:
        prior = check_prior(source_prior, "source_prior", n_classes, allow_zero=False)
    hard = predictions(proba, "hard")
    return SourceSummary(
        prior=prior,
        label_prior=label_prior,
        confusion=confusion_matrix(proba, y_index, normalised, confusion),
        prediction_counts=weight @ hard,
        n_samples=total,
    )
