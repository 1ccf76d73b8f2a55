"""Target priors from the confusion matrix: BBSE (Lipton et al. 2018) and RLLS
(Azizzadenesheli et al. 2019).

On the source, ``C[i, j]`` is the joint probability of predicting ``i`` and the class being
``j``: with hard predictions ``mean [argmax p(x) = i][y = j]``, with soft ones
``mean p_i(x) [y = j]`` (Alexandari et al. 2020's soft variant). Under label shift the
target's mean prediction is ``mu = C w`` with ``w_j = q_j / pi_j`` the class weights
(``pi`` the source's label frequencies, the column sums of ``C``). BBSE solves
``C w = mu``; RLLS solves for ``theta = w - 1`` with a penalty that pulls the weights
towards 1 (no shift)::

    theta = argmin |C theta - b|_2 + delta |theta|_2  subject to theta >= -1,
    b = mu - C 1,  delta = regularization * Delta_C,
    Delta_C = 3 (2 log(2K / 0.05) / (3 n) + sqrt(2 log(2K / 0.05) / n)),

``Delta_C`` the concentration bound of ``C`` estimated from ``n`` source rows (confidence
0.05). Negative weights are set to 0 and the priors ``q_j ~ w_j pi_j`` normalised.
"""

import math

import numpy as np
from scipy.optimize import minimize

#: Confidence of the concentration bound of RLLS's penalty.
_DELTA = 0.05
#: Smoothing of RLLS's norms (relative to the norm of ``b``): both norms are differentiable.
_SMOOTHING = 1e-12


def predictions(proba, confusion):
    """The predictions of the confusion matrix: one-hot top classes, or the probabilities.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
    confusion : {"hard", "soft"}

    Returns
    -------
    ndarray of shape (n_samples, n_classes)
    """
    if confusion == "soft":
        return proba
    hard = np.zeros_like(proba)
    hard[np.arange(proba.shape[0]), proba.argmax(axis=1)] = 1.0
    return hard


def confusion_matrix(proba, y_index, weight, confusion):
    """The joint ``C[i, j]`` of prediction ``i`` and class ``j`` on the source rows.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Calibrated source probabilities.
    y_index : ndarray of shape (n_samples,)
        Column of each row's class.
    weight : ndarray of shape (n_samples,)
        Row weights summing to 1.
    confusion : {"hard", "soft"}

    Returns
    -------
    ndarray of shape (n_classes, n_classes)
    """
    onehot = np.zeros_like(proba)
    onehot[np.arange(proba.shape[0]), y_index] = 1.0
    return (predictions(proba, confusion) * weight[:, None]).T @ onehot


def bbse_weights(matrix, mean_prediction):
    """BBSE's class weights ``w`` solving ``C w = mu`` for every row of ``mean_prediction``.

    Parameters
    ----------
    matrix : ndarray of shape (n_classes, n_classes)
    mean_prediction : ndarray of shape (n_replicates, n_classes)

    Returns
    -------
    ndarray of shape (n_replicates, n_classes)
    """
    try:
        return np.linalg.solve(matrix, mean_prediction.T).T
    except np.linalg.LinAlgError:
        raise ValueError(
            "BBSE needs an invertible confusion matrix, got a singular one (a class is never "
            "predicted on the calibration data, or two classes are predicted alike); use "
            "method='em' or method='rlls', or confusion='soft'."
        ) from None


def rlls_penalty(n_classes, n_source, regularization):
    """RLLS's penalty weight ``regularization * Delta_C`` (module docstring)."""
    log_term = 2.0 * math.log(2.0 * n_classes / _DELTA)
    bound = 3.0 * (log_term / (3.0 * n_source) + math.sqrt(log_term / n_source))
    return regularization * bound


def rlls_weights(matrix, mean_prediction, penalty):
    """RLLS's class weights ``w = 1 + theta`` for one mean prediction.

    The norms are smoothed by ``1e-12 |b|`` and minimised by L-BFGS-B under the bounds
    ``theta >= -1``; ``theta = 0`` (no shift) is returned when it is at least as good.

    Parameters
    ----------
    matrix : ndarray of shape (n_classes, n_classes)
    mean_prediction : ndarray of shape (n_classes,)
    penalty : float
        The weight ``delta`` of ``|theta|_2``.

    Returns
    -------
    weights : ndarray of shape (n_classes,)
    n_iter : int
        Solver steps.
    """
    n_classes = matrix.shape[0]
    b = mean_prediction - matrix.sum(axis=1)
    eps = _SMOOTHING * max(float(np.linalg.norm(b)), np.finfo(np.float64).tiny)

    def objective(theta):
        residual = matrix @ theta - b
        fit = math.sqrt(residual @ residual + eps * eps)
        size = math.sqrt(theta @ theta + eps * eps)
        value = fit + penalty * size
        return value, matrix.T @ residual / fit + penalty * theta / size

    result = minimize(
        objective,
        np.zeros(n_classes),
        jac=True,
        method="L-BFGS-B",
        bounds=[(-1.0, None)] * n_classes,
        options={"maxiter": 10000, "ftol": 1e-15, "gtol": 1e-12},
    )
    theta = result.x
    if objective(np.zeros(n_classes))[0] <= result.fun:
        theta = np.zeros(n_classes)
    return 1.0 + theta, int(result.nit)


def priors_from_weights(weights, label_prior):
    """The priors ``q ~ max(w, 0) * pi`` of class weights (rows), normalised.

    Parameters
    ----------
    weights : ndarray of shape (n_replicates, n_classes)
    label_prior : ndarray of shape (n_classes,)

    Returns
    -------
    ndarray of shape (n_replicates, n_classes)
    """
    prior = np.maximum(weights, 0.0) * label_prior
    total = prior.sum(axis=1, keepdims=True)
    if not (total > 0).all():
        raise ValueError(
            "Every estimated class weight is 0 or negative: the target's predictions match no "
            "mixture of the source's classes (is the target from the same classifier?)."
        )
    return prior / total
