"""The training weights of a fit: sample weights times class weights, as in scikit-learn."""

import numpy as np
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.validation import _check_sample_weight


def fit_weights(X, y_index, classes, sample_weight, class_weight):
    """Return the per-sample weights of a fit, or None when every weight is 1.

    Parameters
    ----------
    X : ndarray of shape (n_samples, ...)
        Validated inputs (for the number of samples).
    y_index : ndarray of shape (n_samples,)
        Class indices into ``classes``.
    classes : ndarray of shape (n_classes,)
        The sorted class labels.
    sample_weight : array-like of shape (n_samples,) or None
        Non-negative, finite, not all zero.
    class_weight : dict, "balanced" or None
        A dict maps class labels to weights (absent labels weigh 1); "balanced" weighs
        class k by ``n / (K n_k)`` with the (sample-weighted) counts ``n_k`` of the K
        classes present, as scikit-learn's ``compute_class_weight``.

    Returns
    -------
    weight : ndarray of shape (n_samples,), dtype float32, or None
    """
    if sample_weight is None and class_weight is None:
        return None
    weight = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    if class_weight is not None:
        weight = weight * _class_weights(y_index, len(classes), classes, weight, class_weight)
        if not np.all(np.isfinite(weight)) or np.any(weight < 0):
            raise ValueError(
                f"Expected `class_weight` to give finite, non-negative weights, got "
                f"{class_weight!r}."
            )
    present = np.unique(y_index[weight > 0])
    if len(present) < 2:
        raise ValueError(
            f"Expected samples of at least 2 classes with a positive weight, got "
            f"{len(present)} class: {classes[present].tolist()}."
        )
    if np.all(weight == 1.0):
        return None
    return weight.astype(np.float32)


def _class_weights(y_index, n_classes, classes, sample_weight, class_weight):
    """Return the weight of each class (index), 1 for classes the weights do not name."""
    if isinstance(class_weight, str):
        positive = sample_weight > 0
        present = np.unique(y_index[positive])
        weights = np.ones(n_classes)
        weights[present] = compute_class_weight(
            "balanced",
            classes=present,
            y=y_index[positive],
            sample_weight=sample_weight[positive],
        )
        return weights[y_index]
    unknown = [label for label in class_weight if label not in set(classes.tolist())]
    if unknown:
        raise ValueError(
            f"`class_weight` names labels that are not classes: {unknown}; the classes are "
            f"{classes.tolist()}."
        )
    weights = np.array([float(class_weight.get(label, 1.0)) for label in classes.tolist()])
    return weights[y_index]


__all__ = ["fit_weights"]
