"""The scores of each sample's probabilities and their means: Brier score, negative
log-likelihood, top-label accuracy, and the differentiable ECE (DECE) of soft bins.

Every public function checks its input once (:func:`check_predictions`) and calls its
kernel, the function of the same name with a leading underscore; the resampling plans of
the means resample the weighted sums of the per-sample scores.
"""

import numpy as np
from scipy.special import expit, softmax

from ..._validation import check_n_bins, check_number
from .._core._dispatch import dask_aware
from .._core._resampling import ResamplingPlan, cell_sums
from .._core._rows import row_blocks
from ._predictions import check_predictions

#: The per-sample scores of :func:`per_sample_score`.
SCORES = ("brier", "log_loss")


def _weighted_mean(values, sample_weight):
    if sample_weight is None:
        return float(np.mean(values, dtype=np.float64))
    return float(np.dot(values, sample_weight) / sample_weight.sum())


def _true_class_proba(proba, y_index):
    return proba[np.arange(proba.shape[0]), y_index].astype(np.float64)


def log_loss_clip(dtype):
    """The probabilities' clip of the log loss: ``[eps, 1 - eps]``, ``eps`` that of ``dtype``.

    scikit-learn's ``log_loss`` clips at the machine epsilon of the input's dtype too.
    """
    eps = float(np.finfo(dtype).eps)
    return eps, 1.0 - eps


def per_sample_score(proba, y_index, score):
    """Each sample's Brier score (summed over classes) or log loss (clipped, as in the NLL).

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Probabilities.
    y_index : ndarray of shape (n_samples,)
        Column of each sample's true class.
    score : {"brier", "log_loss"}
        The score.

    Returns
    -------
    values : ndarray of shape (n_samples,), float64
    """
    true_proba = _true_class_proba(proba, y_index)
    if score == "log_loss":
        return -np.log(np.clip(true_proba, *log_loss_clip(proba.dtype)))
    squares = np.empty(proba.shape[0])
    for rows in row_blocks(proba.shape[0], proba.shape[1]):
        block = proba[rows].astype(np.float64)
        squares[rows] = np.einsum("ij,ij->i", block, block)
    return squares - 2.0 * true_proba + 1.0


def mean_plan(data, values):
    """Resampling plan of the weighted mean of per-sample ``values`` (Brier, NLL, accuracy)."""
    weight = data.weight
    cell = np.zeros(values.shape[0], dtype=np.intp)

    def accumulate(group, n_groups):
        return cell_sums(group, n_groups, cell, 1, [weight, weight * values])

    def value(sums):
        return sums[..., 1] / sums[..., 0]

    return ResamplingPlan(values.shape[0], 2, accumulate, value)


def differentiable_calibration_error(
    y_true, y_prob, *, n_bins=15, t_a=100.0, t_b=0.01, labels=None, sample_weight=None
):
    """Differentiable ECE (DECE, Bohdal et al. 2021) computed with numpy.

    Soft bins: with ``cut = linspace(0, 1, M + 1)[:-1]``, ``W = [1..M]`` and
    ``b = cumsum(-cut)``, sample i belongs to bin k with weight
    ``o_ik = softmax_k((r_i W_k + b_k) / t_b)``, smoothed to
    ``(o + 1e-6) / (1 + (M + 1) 1e-6)``. Soft accuracy: the soft rank of the true class,
    ``rank_i = 0.5 + sum_b sigmoid(t_a (p_ib - p_iy))``, gives ``acc_i = relu(2 - rank_i)``.
    Then ``DECE = sum_k (sum_i o_ik / N) |acc_k - conf_k|`` with ``conf_k``, ``acc_k`` the
    ``o``-weighted means of ``r_i`` and ``acc_i``. The torch version in
    :mod:`sklearn_calib.losses` computes the same value.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    n_bins : int, default=15
        Number of soft bins ``M``.
    t_a : float, default=100.0
        Temperature of the soft rank (larger is closer to the hard accuracy).
    t_b : float, default=0.01
        Temperature of the soft binning (smaller is closer to hard bins).
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, multiplying each sample's bin memberships.

    Returns
    -------
    error : float
        The DECE, in [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import softmax
    >>> from sklearn_calib.scoring import differentiable_calibration_error
    >>> logits = np.array([[2, 1, 0], [0.5, 1.5, 0], [3, 0, 0], [0, 0, 0.2]])
    >>> round(differentiable_calibration_error([0, 0, 0, 2], softmax(logits, axis=1)), 6)
    0.322067
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return _differentiable_calibration_error(data, n_bins=n_bins, t_a=t_a, t_b=t_b)


def _differentiable_calibration_error(data, *, n_bins=15, t_a=100.0, t_b=0.01):
    """:func:`differentiable_calibration_error` of checked predictions."""
    n_bins = check_n_bins(n_bins)
    t_a = check_number("t_a", t_a, low=0, low_open=True)
    t_b = check_number("t_b", t_b, low=0, low_open=True)
    y_index, proba, sample_weight = data.y_index, data.proba, data.sample_weight
    cut = np.linspace(0.0, 1.0, n_bins + 1)[:-1]
    slope = np.arange(1.0, n_bins + 1)
    intercept = np.cumsum(-cut)
    confidence = data.scores("top_label")[0]
    mass = np.zeros(n_bins)
    confidence_sums = np.zeros(n_bins)
    accuracy_sums = np.zeros(n_bins)
    n_cols = max(proba.shape[1], n_bins)
    for rows in row_blocks(proba.shape[0], n_cols):
        block = proba[rows].astype(np.float64)
        true_proba = block[np.arange(block.shape[0]), y_index[rows]]
        rank = 0.5 + expit(t_a * (block - true_proba[:, None])).sum(axis=1)
        accuracy = np.maximum(2.0 - rank, 0.0)
        r = confidence[rows].astype(np.float64)
        membership = softmax((r[:, None] * slope + intercept) / t_b, axis=1)
        membership = (membership + 1e-6) / (1.0 + (n_bins + 1) * 1e-6)
        if sample_weight is not None:
            membership *= sample_weight[rows, None]
        mass += membership.sum(axis=0)
        confidence_sums += r @ membership
        accuracy_sums += accuracy @ membership
    total = proba.shape[0] if sample_weight is None else sample_weight.sum()
    gap = np.abs(accuracy_sums - confidence_sums) / mass
    return float(np.sum(mass / total * gap))


@dask_aware
def brier_score(y_true, y_prob, *, labels=None, sample_weight=None):
    """Multiclass Brier score: the mean over samples of ``sum_k (p_k - 1[y = k])^2``.

    It lies in [0, 2]. For a binary problem this is twice scikit-learn's default
    ``brier_score_loss`` (which scores the positive column only); it equals
    ``brier_score_loss(..., scale_by_half=False)``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    score : float
        The Brier score, in [0, 2].

    Examples
    --------
    >>> from sklearn_calib.scoring import brier_score
    >>> y_true = [0, 1, 1, 0, 2]
    >>> y_prob = [[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1],
    ...           [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]]
    >>> round(brier_score(y_true, y_prob), 4)
    0.291
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return _brier_score(data)


def _brier_score(data):
    """:func:`brier_score` of checked predictions."""
    return _weighted_mean(per_sample_score(data.proba, data.y_index, "brier"), data.sample_weight)


def brier_plan(data):
    """Resampling plan of :func:`brier_score`."""
    return mean_plan(data, per_sample_score(data.proba, data.y_index, "brier"))


@dask_aware
def negative_log_likelihood(y_true, y_prob, *, labels=None, sample_weight=None):
    """Mean negative log-likelihood of the true class, ``-mean log p_y``.

    The true class's probability is first clipped to ``[eps, 1 - eps]``, ``eps`` being the
    machine epsilon of the probabilities' dtype (about 1.2e-7 for float32, 2.2e-16 for
    float64), so a zero probability costs ``-log(eps)`` (15.9 in float32, 36.0 in float64)
    rather than infinity. This is the clipping of scikit-learn's ``log_loss``, whose value
    this equals on the same float32 or float64 input (this one takes the logarithm in
    float64).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    loss : float
        The mean negative log-likelihood, in nats.

    Examples
    --------
    >>> from sklearn_calib.scoring import negative_log_likelihood
    >>> y_true = [0, 1, 1, 0, 2]
    >>> y_prob = [[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1],
    ...           [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]]
    >>> round(negative_log_likelihood(y_true, y_prob), 4)
    0.5165
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return _negative_log_likelihood(data)


def _negative_log_likelihood(data):
    """:func:`negative_log_likelihood` of checked predictions."""
    values = per_sample_score(data.proba, data.y_index, "log_loss")
    return _weighted_mean(values, data.sample_weight)


def negative_log_likelihood_plan(data):
    """Resampling plan of :func:`negative_log_likelihood`."""
    return mean_plan(data, per_sample_score(data.proba, data.y_index, "log_loss"))


@dask_aware
def top_label_accuracy(y_true, y_prob, *, labels=None, sample_weight=None):
    """Accuracy of the most probable class (first column on ties, as ``np.argmax``).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    accuracy : float
        The fraction of samples whose most probable class is their label.

    Examples
    --------
    >>> from sklearn_calib.scoring import top_label_accuracy
    >>> y_true = [0, 1, 1, 0, 2]
    >>> y_prob = [[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1],
    ...           [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]]
    >>> top_label_accuracy(y_true, y_prob)
    0.8
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return _top_label_accuracy(data)


def _top_label_accuracy(data):
    """:func:`top_label_accuracy` of checked predictions."""
    return _weighted_mean(data.scores("top_label")[1], data.sample_weight)


def top_label_accuracy_plan(data):
    """Resampling plan of :func:`top_label_accuracy`."""
    return mean_plan(data, data.scores("top_label")[1].astype(np.float64))
