"""Per-sample weights u(p) of the focal family: every such loss is u(p) * cross-entropy.

Lin et al. (2025, BSCE-GRA) read focal loss, dual focal loss, FLSD-53 and the Brier-score
weighted cross-entropy as one loss ``u(p) * CE`` that differs only in the weight ``u``. Each
function here takes the probabilities ``probs`` (n, K) and integer targets ``target`` (n,) and
returns the weights (n,). Whether the weight is differentiated (applied to the loss) or
detached (applied to the gradient, "GRA") is decided by the caller,
:class:`sklearn_calib.losses.WeightedCrossEntropy`, which passes detached probabilities.

Numerical care: ``1 - p_y`` is computed as the sum of the other probabilities, which stays
accurate when ``p_y`` rounds to 1, powers go through :func:`safe_pow`, whose gradient is
finite for a zero base and an exponent below 1, and p-norms are taken of rows divided by
their :func:`row_scale`, so that no power over- or underflows.
"""

import numbers

import numpy as np
import torch

from sklearn_calib._validation import check_classification_inputs


def safe_pow(base, exponent):
    """``base ** exponent`` for ``base >= 0`` with finite gradients at ``base = 0``.

    The base is clamped to the smallest normal number of its dtype, so ``0 ** 0.5`` has a
    finite derivative (``0.5 / sqrt(tiny)`` times a zero upstream gradient) instead of
    ``inf * 0 = nan``, and ``0 ** gamma`` has a finite derivative in ``gamma``.

    Parameters
    ----------
    base : torch.Tensor
        Non-negative values.
    exponent : float or torch.Tensor
        Exponent, broadcast against ``base``.

    Returns
    -------
    power : torch.Tensor
    """
    return base.clamp_min(torch.finfo(base.dtype).tiny) ** exponent


def row_scale(values):
    """Return each row's largest magnitude, shape (n, 1), detached; 1 where it is 0 or inf.

    A p-norm taken of ``values / scale`` and multiplied back by ``scale`` neither overflows
    nor underflows: the powers of the scaled entries lie in [0, 1] and the largest is 1,
    where ``|z| ** 2`` is inf for a float32 logit of 1e20 and 0 for one of 1e-30. A norm is
    homogeneous, so dividing by a detached scale leaves its gradient unchanged.

    Parameters
    ----------
    values : torch.Tensor of shape (n, K)

    Returns
    -------
    scale : torch.Tensor of shape (n, 1)
    """
    scale = values.detach().abs().amax(dim=1, keepdim=True)
    return torch.where((scale > 0) & torch.isfinite(scale), scale, torch.ones_like(scale))


def target_probability(probs, target):
    """Return ``p_y``, the probability of the true class of each sample, shape (n,)."""
    return probs.gather(1, target.unsqueeze(1)).squeeze(1)


def target_mask(probs, target):
    """Return the boolean one-hot matrix of ``target``, shape (n, K), without a host sync."""
    classes = torch.arange(probs.shape[1], device=target.device)
    return target.unsqueeze(1) == classes


def complement_probability(probs, target):
    """Return ``1 - p_y`` as the sum of the other classes' probabilities, shape (n,)."""
    return probs.masked_fill(target_mask(probs, target), 0.0).sum(1)


def _check_gamma(gamma, n_samples):
    """Accept a number or a tensor of shape () or (n_samples,) as exponent."""
    if isinstance(gamma, torch.Tensor):
        if gamma.ndim == 0 or gamma.shape == (n_samples,):
            return gamma
        raise ValueError(
            f"Expected a per-sample `gamma` of shape ({n_samples},) or a scalar, got a tensor "
            f"of shape {tuple(gamma.shape)}."
        )
    if isinstance(gamma, numbers.Real) and not isinstance(gamma, bool):
        return float(gamma)
    raise ValueError(f"Expected `gamma` to be a number or a tensor, got {gamma!r}.")


def focal_weight(probs, target, gamma):
    """Focal-loss weight ``(1 - p_y) ** gamma``.

    Parameters
    ----------
    probs : torch.Tensor of shape (n, K)
    target : torch.Tensor of shape (n,), int64
    gamma : float or torch.Tensor of shape () or (n,)
        Exponent; a tensor gives each sample its own gamma (the gamma-Net of
        :class:`~sklearn_calib.estimators.MetaNetClassifier`), and gradients flow into it.

    Returns
    -------
    weight : torch.Tensor of shape (n,)

    References
    ----------
    T.-Y. Lin, P. Goyal, R. Girshick, K. He and P. Dollar, "Focal Loss for Dense
    Object Detection", ICCV 2017.
    """
    gamma = _check_gamma(gamma, probs.shape[0])
    return safe_pow(complement_probability(probs, target), gamma)


def flsd53_weight(probs, target, gamma_below=5.0, gamma_above=3.0, threshold=0.2):
    """FLSD-53 weight: focal weight with gamma chosen per sample from ``p_y``.

    ``gamma = gamma_below`` where ``p_y < threshold``, else ``gamma_above``; the choice is
    made without gradient.

    Parameters
    ----------
    probs : torch.Tensor of shape (n, K)
    target : torch.Tensor of shape (n,), int64
    gamma_below : float, default=5.0
    gamma_above : float, default=3.0
    threshold : float, default=0.2

    Returns
    -------
    weight : torch.Tensor of shape (n,)

    References
    ----------
    J. Mukhoti, V. Kulharia, A. Sanyal, S. Golodetz, P. H. S. Torr and P. K. Dokania,
    "On using Focal Loss for Neural Network Calibration", ICML 2020 Workshop on
    Uncertainty and Robustness in Deep Learning.
    """
    below = (target_probability(probs, target).detach() < threshold).to(probs.dtype)
    gamma = gamma_above + (gamma_below - gamma_above) * below
    return focal_weight(probs, target, gamma)


def inverse_focal_weight(probs, target, gamma):
    """Inverse-focal weight ``(1 + p_y) ** gamma``.

    Parameters
    ----------
    probs : torch.Tensor of shape (n, K)
    target : torch.Tensor of shape (n,), int64
    gamma : float or torch.Tensor of shape () or (n,)

    Returns
    -------
    weight : torch.Tensor of shape (n,)

    References
    ----------
    D.-B. Wang, L. Feng and M.-L. Zhang, "Rethinking Calibration of Deep Neural
    Networks: Do Not Be Afraid of Overconfidence", NeurIPS 2021.
    """
    gamma = _check_gamma(gamma, probs.shape[0])
    return (1.0 + target_probability(probs, target)) ** gamma


def dual_focal_weight(probs, target, gamma):
    """Dual-focal weight ``(1 - p_y + p_j) ** gamma``.

    ``p_j`` is the largest probability strictly below ``p_y`` (0 when ``p_y`` is the
    smallest); the gradient flows into ``p_j`` as well.

    Parameters
    ----------
    probs : torch.Tensor of shape (n, K)
    target : torch.Tensor of shape (n,), int64
    gamma : float or torch.Tensor of shape () or (n,)

    Returns
    -------
    weight : torch.Tensor of shape (n,)

    References
    ----------
    L. Tao, M. Dong and C. Xu, "Dual Focal Loss for Calibration", ICML 2023.

    J. Lin, L. Tao, M. Dong and C. Xu, "Uncertainty Weighted Gradients for Model
    Calibration", CVPR 2025.
    """
    gamma = _check_gamma(gamma, probs.shape[0])
    p_y = target_probability(probs, target)
    below = probs < p_y.unsqueeze(1)
    p_j = probs.masked_fill(~below, 0.0).amax(1)
    return safe_pow(complement_probability(probs, target) + p_j, gamma)


def brier_weight(probs, target, beta=1.0, gamma=1.0):
    """Generalised Brier-score weight ``||e_y - p||_beta ** gamma`` (BSCE).

    With ``beta = gamma = 2`` it is the Brier score. The entries of ``e_y - p`` are used in
    absolute value: ``1 - p_y`` (as :func:`complement_probability`) and ``p_k`` for k != y.

    Parameters
    ----------
    probs : torch.Tensor of shape (n, K)
    target : torch.Tensor of shape (n,), int64
    beta : float, default=1.0
        Order of the norm.
    gamma : float or torch.Tensor of shape () or (n,), default=1.0
        Exponent applied to the norm.

    Returns
    -------
    weight : torch.Tensor of shape (n,)

    References
    ----------
    J. Lin, L. Tao, M. Dong and C. Xu, "Uncertainty Weighted Gradients for Model
    Calibration", CVPR 2025.
    """
    gamma = _check_gamma(gamma, probs.shape[0])
    mask = target_mask(probs, target)
    error = torch.where(mask, complement_probability(probs, target).unsqueeze(1), probs)
    scale = row_scale(error)
    norm = scale.squeeze(1) * safe_pow(safe_pow(error / scale, beta).sum(1), 1.0 / beta)
    return safe_pow(norm, gamma)


#: The per-sample weights of the focal family, by name.
WEIGHTS = {
    "focal": focal_weight,
    "inverse_focal": inverse_focal_weight,
    "dual_focal": dual_focal_weight,
    "flsd53": flsd53_weight,
    "brier": brier_weight,
}


def uncertainty_weights(y_true, y_prob, *, weight="focal", labels=None, **params):
    """Per-sample weights ``u(p)`` of a focal-family loss, for numpy predictions.

    The losses of :mod:`sklearn_calib.losses` that read as ``u(p) * cross-entropy`` weight
    each sample by an estimate of its uncertainty; this function evaluates that weight on
    given probabilities, for example to compare it with a sample's true calibration error.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities (1-D: positive-class probabilities of a binary problem).
    weight : {"focal", "inverse_focal", "dual_focal", "flsd53", "brier"}, default="focal"
        The weight: ``(1 - p_y)^gamma`` (focal), ``(1 + p_y)^gamma`` (inverse focal),
        ``(1 - p_y + p_j)^gamma`` with ``p_j`` the largest probability below ``p_y``
        (dual focal), the focal weight with gamma 5 where ``p_y < 0.2`` else 3 (FLSD-53),
        or ``||e_y - p||_beta^gamma`` (generalised Brier score).
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``, as for the metrics of
        :mod:`sklearn_calib.metrics`.
    **params
        The weight's parameters: ``gamma`` (required by "focal", "inverse_focal" and
        "dual_focal"; "brier" takes ``beta`` and ``gamma``, default 1 each; "flsd53" takes
        ``gamma_below``, ``gamma_above`` and ``threshold``).

    Returns
    -------
    weights : ndarray of shape (n_samples,), float64
        The weight of each sample.

    References
    ----------
    T.-Y. Lin, P. Goyal, R. Girshick, K. He and P. Dollar, "Focal Loss for Dense Object
    Detection", ICCV 2017.

    J. Mukhoti, V. Kulharia, A. Sanyal, S. Golodetz, P. H. S. Torr and P. K. Dokania,
    "On using Focal Loss for Neural Network Calibration", ICML 2020 Workshop on
    Uncertainty and Robustness in Deep Learning.

    D.-B. Wang, L. Feng and M.-L. Zhang, "Rethinking Calibration of Deep Neural Networks:
    Do Not Be Afraid of Overconfidence", NeurIPS 2021.

    J. Lin, L. Tao, M. Dong and C. Xu, "Uncertainty Weighted Gradients for Model
    Calibration", CVPR 2025.

    Examples
    --------
    >>> from sklearn_calib.losses import uncertainty_weights
    >>> proba = [[0.5, 0.3, 0.2], [0.1, 0.8, 0.1]]
    >>> uncertainty_weights([0, 1], proba, weight="focal", gamma=2).round(4)
    array([0.25, 0.04])
    >>> uncertainty_weights([0, 1], proba, weight="brier", beta=2, gamma=2).round(4)
    array([0.38, 0.06])
    """
    if weight not in WEIGHTS:
        raise ValueError(f"Expected `weight` to be one of {sorted(WEIGHTS)}, got {weight!r}.")
    y_index, proba, _ = check_classification_inputs(y_true, y_prob, labels=labels)
    probs = torch.as_tensor(np.asarray(proba, dtype=np.float64))
    with torch.no_grad():
        return WEIGHTS[weight](probs, torch.as_tensor(y_index), **params).numpy()
