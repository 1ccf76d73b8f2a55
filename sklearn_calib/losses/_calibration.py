"""Differentiable calibration measures in torch: SECE, DECE and MMCE.

Each takes probabilities (n, K) and integer targets (n,) and returns a 0-d tensor that is
differentiable with respect to the probabilities (through the confidence ``r = max_k p_k``
and, for DECE and the soft SECE, the all-pairs soft accuracy). They are training
objectives: inputs are checked for shape and dtype only (checking values would cost a
device-to-host synchronisation); the numpy metrics of :mod:`sklearn_calib.scoring` validate
their inputs fully. Computation runs with autocast disabled, in float32 (float64 input
stays float64). Each builds an (n, n) matrix, so it is meant for mini-batches.
"""

import contextlib

import torch

from sklearn_calib._validation import check_n_bins, check_number
from sklearn_calib.metrics._functions._sece import SECE_EPS

#: What SECE smooths: the 0/1 correctness or the all-pairs soft accuracy.
SECE_ACCURACIES = ("hard", "soft")


def full_precision(device):
    """Context in which autocast is off on ``device``, so ops run in their inputs' dtype."""
    if torch.amp.is_autocast_available(device.type):
        return torch.autocast(device.type, enabled=False)
    return contextlib.nullcontext()


def prepare_inputs(values, target, name="probs"):
    """Check shapes and dtypes; return float (at least float32) values and int64 targets.

    Parameters
    ----------
    values : torch.Tensor of shape (n_samples, n_classes)
        Probabilities or logits; float16/bfloat16 are cast to float32, float64 is kept.
    target : torch.Tensor of shape (n_samples,)
        Integer class indices (any integer dtype).
    name : str, default="probs"
        Name of ``values`` in error messages.

    Returns
    -------
    values : torch.Tensor
    target : torch.Tensor of dtype int64
    """
    if not isinstance(values, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise ValueError(
            f"Expected `{name}` and `target` to be torch tensors, got "
            f"{type(values).__name__} and {type(target).__name__}."
        )
    if values.ndim != 2 or target.ndim != 1 or values.shape[0] != target.shape[0]:
        raise ValueError(
            f"Expected `{name}` of shape (n_samples, n_classes) and `target` of shape "
            f"(n_samples,), got {tuple(values.shape)} and {tuple(target.shape)}."
        )
    if values.shape[0] == 0:
        raise ValueError(f"Expected at least one sample, got empty `{name}`.")
    if not values.is_floating_point():
        raise ValueError(f"Expected floating-point `{name}`, got dtype {values.dtype}.")
    if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
        raise ValueError(f"Expected integer class indices in `target`, got dtype {target.dtype}.")
    if values.dtype not in (torch.float32, torch.float64):
        values = values.float()
    return values, target.long()


def prepare_sample_weight(sample_weight, values):
    """Check per-sample weights' shape and type; return them in the dtype of ``values``.

    Parameters
    ----------
    sample_weight : torch.Tensor of shape (n_samples,) or None
        Weights of the rows of ``values`` (their values are not checked: that would
        synchronise with the host).
    values : torch.Tensor of shape (n_samples, n_classes)
        Checked probabilities or logits.

    Returns
    -------
    sample_weight : torch.Tensor or None
    """
    if sample_weight is None:
        return None
    if not isinstance(sample_weight, torch.Tensor):
        raise ValueError(
            f"Expected `sample_weight` to be a torch tensor or None, got "
            f"{type(sample_weight).__name__}."
        )
    if sample_weight.shape != values.shape[:1]:
        raise ValueError(
            f"Expected `sample_weight` of shape ({values.shape[0]},) (one weight per "
            f"sample), got {tuple(sample_weight.shape)}."
        )
    return sample_weight.to(values.dtype)


def _quadratic_form(u, kernel, v):
    """``u^T K v`` as an elementwise sum: exact float32 even where matmuls use TF32."""
    return (u.unsqueeze(1) * kernel * v.unsqueeze(0)).sum()


def _confidence_and_correct(probs, target):
    confidence, predicted = probs.max(1)
    return confidence, (predicted == target).to(probs.dtype)


def soft_accuracy(probs, target, t_a):
    """All-pairs soft accuracy of each sample (Qin et al. 2010; Bohdal et al. 2021).

    ``acc_i = relu(2 - rank_{i,y})`` with the soft rank of the true class
    ``rank_{i,y} = 0.5 + sum_b sigmoid(t_a (p_ib - p_iy))`` (the term ``b = y`` is 0.5).
    As ``t_a`` grows it tends to the 0/1 correctness of the top-1 prediction wherever the
    largest probability is unique.

    Parameters
    ----------
    probs : torch.Tensor of shape (n_samples, n_classes)
        Checked probabilities (see :func:`prepare_inputs`).
    target : torch.Tensor of shape (n_samples,)
        Class indices, int64.
    t_a : float
        Temperature of the soft ranking.

    Returns
    -------
    accuracy : torch.Tensor of shape (n_samples,)
    """
    p_y = probs.gather(1, target.unsqueeze(1))
    rank = 0.5 + torch.sigmoid(t_a * (probs - p_y)).sum(1)
    return torch.relu(2.0 - rank)


def smooth_calibration_error(
    probs, target, *, bandwidth=0.01, include_self=True, accuracy="hard", t_a=100.0
):
    """Smooth expected calibration error (SECE) in torch, differentiable.

    ``SACC_i = sum_j K(r_i, r_j) a_j / (sum_j K(r_i, r_j) + 1e-12)`` with the Gaussian kernel
    ``K(u, v) = exp(-(u - v)^2 / (2 h^2))``, and ``SECE = mean_i |SACC_i - r_i|``, where
    ``r`` is the confidence and ``a`` the accuracy of each sample:

    - ``accuracy="hard"``: the 0/1 correctness of the top-1 prediction, as the numpy metric
      :func:`~sklearn_calib.metrics.smooth_calibration_error` (the two agree to 1e-6).
      The gradient flows through ``r`` only (the correctness is a step function).
    - ``accuracy="soft"``: the all-pairs soft accuracy of Qin et al. (2010) that DECE uses,
      ``a_i = relu(2 - rank_{i,y})`` with ``rank_{i,y} = 0.5 + sum_b sigmoid(t_a (p_ib -
      p_iy))``. This is the SECE that Wang and Golebiowski train with (their Section 4.2:
      the binary accuracy replaced by the all-pairs one "results in SECE, which is
      differentiable"): the gradient also flows through the accuracy. It tends to the hard
      SECE as ``t_a`` grows.

    Parameters
    ----------
    probs : torch.Tensor of shape (n_samples, n_classes)
        Predicted probabilities (softmax of the logits).
    target : torch.Tensor of shape (n_samples,)
        Integer class indices.
    bandwidth : float, default=0.01
        Kernel bandwidth h (the paper's value).
    include_self : bool, default=True
        Whether ``j = i`` is in the sums. The paper's formula (its Eq. 5 and the KDE estimate
        of its Eq. 12) sums over all samples, so the default includes it; ``False`` gives a
        leave-one-out estimate of the accuracy, where a sample with no neighbour within reach
        of the kernel gets ``SACC = 0``.
    accuracy : {"hard", "soft"}, default="hard"
        The accuracy ``a`` smoothed by the kernel (see above).
    t_a : float, default=100.0
        Temperature of the soft ranking (``accuracy="soft"`` only; DECE's default).

    Returns
    -------
    sece : torch.Tensor
        0-d tensor.

    References
    ----------
    C. Wang and J. Golebiowski, "Towards Unbiased Calibration using
    Meta-Regularization", Transactions on Machine Learning Research, 2024.

    T. Qin, T.-Y. Liu and H. Li, "A General Approximation Framework for Direct
    Optimization of Information Retrieval Measures", Information Retrieval 13(4), 2010.
    """
    check_number("bandwidth", bandwidth, low=0, low_open=True)
    if not isinstance(include_self, bool):
        raise ValueError(f"Expected `include_self` to be a bool, got {include_self!r}.")
    if accuracy not in SECE_ACCURACIES:
        raise ValueError(f"Expected `accuracy` to be 'hard' or 'soft', got {accuracy!r}.")
    check_number("t_a", t_a, low=0, low_open=True)
    probs, target = prepare_inputs(probs, target)
    with full_precision(probs.device):
        if accuracy == "soft":
            confidence = probs.max(1).values
            outcome = soft_accuracy(probs, target, t_a)
        else:
            confidence, outcome = _confidence_and_correct(probs, target)
        # dividing by sqrt(2) h (not multiplying by 1 / (2 h^2)) keeps a tiny bandwidth
        # from making 0 * inf on the diagonal
        scaled = (confidence.unsqueeze(1) - confidence.unsqueeze(0)) / (2.0**0.5 * bandwidth)
        kernel = torch.exp(-(scaled**2))
        if not include_self:
            kernel = kernel.masked_fill(
                torch.eye(kernel.shape[0], dtype=torch.bool, device=kernel.device), 0.0
            )
        smoothed = (kernel * outcome.unsqueeze(0)).sum(1) / (kernel.sum(1) + SECE_EPS)
        return (smoothed - confidence).abs().mean()


def differentiable_calibration_error(probs, target, *, n_bins=15, t_a=100.0, t_b=0.01):
    """Differentiable ECE with soft bins and soft accuracy (DECE).

    Soft bin membership ``o_ik = softmax_k((r_i W_k + b_k) / t_b)`` with ``W = (1..M)`` and
    ``b = cumsum(-cut)``, ``cut = linspace(0, 1, M + 1)[:-1]``, smoothed as
    ``(o + 1e-6) / (1 + (M + 1) 1e-6)``; soft accuracy ``acc_i = relu(2 - rank_{i,y})`` with
    ``rank_{i,y} = 0.5 + sum_b sigmoid(t_a (p_ib - p_iy))``;
    ``DECE = sum_k (sum_i o_ik / n) |acc_k - conf_k|`` with the o-weighted bin means.

    Parameters
    ----------
    probs : torch.Tensor of shape (n_samples, n_classes)
        Predicted probabilities (softmax of the logits).
    target : torch.Tensor of shape (n_samples,)
        Integer class indices.
    n_bins : int, default=15
        Number of soft bins M.
    t_a : float, default=100.0
        Temperature of the soft ranking (larger: closer to the 0/1 accuracy).
    t_b : float, default=0.01
        Temperature of the soft binning (smaller: closer to hard bins).

    Returns
    -------
    dece : torch.Tensor
        0-d tensor.

    References
    ----------
    O. Bohdal, Y. Yang and T. Hospedales, "Meta-Calibration: Learning of Model
    Calibration Using Differentiable Expected Calibration Error", arXiv:2106.09613, 2021.
    """
    n_bins = check_n_bins(n_bins)
    check_number("t_a", t_a, low=0, low_open=True)
    check_number("t_b", t_b, low=0, low_open=True)
    probs, target = prepare_inputs(probs, target)
    with full_precision(probs.device):
        confidence = probs.max(1).values
        cut = torch.linspace(0.0, 1.0, n_bins + 1, dtype=probs.dtype, device=probs.device)[:-1]
        slope = torch.arange(1, n_bins + 1, dtype=probs.dtype, device=probs.device)
        offset = torch.cumsum(-cut, 0)
        membership = torch.softmax((confidence.unsqueeze(1) * slope + offset) / t_b, dim=1)
        membership = (membership + 1e-6) / (1.0 + (n_bins + 1) * 1e-6)

        accuracy = soft_accuracy(probs, target, t_a)

        mass = membership.sum(0)
        bin_confidence = (membership * confidence.unsqueeze(1)).sum(0) / mass
        bin_accuracy = (membership * accuracy.unsqueeze(1)).sum(0) / mass
        return ((mass / probs.shape[0]) * (bin_accuracy - bin_confidence).abs()).sum()


def mmce_weighted(
    probs, target, *, sample_weight=None, normalization="reference", kernel_width=0.4
):
    """Weighted maximum mean calibration error MMCE_w.

    With ``k(r, r') = exp(-|r - r'| / kernel_width)``, correct set C (m samples) and wrong
    set W (n samples): ``S_cc = sum_{C x C} (1 - r_i)(1 - r_j) k``,
    ``S_ww = sum_{W x W} r_i r_j k`` and ``S_cw = sum_{C x W} (1 - r_i) r_j k``.
    ``"reference"``: ``sqrt(S_cc / m^4 + S_ww / n^4 - 2 S_cw / (m n)^2)`` (the code behind
    Mukhoti et al.'s tables, which averages over pairs and then divides by m^2, n^2, mn again);
    ``"pairs"``: ``sqrt(S_cc / m^2 + S_ww / n^2 - 2 S_cw / (m n))``. 0 when m or n is 0.
    With sample weights, each pair of the sums counts ``w_i w_j`` times and m and n are
    the weights' sums over C and W, as if each sample were repeated ``w_i`` times.

    Parameters
    ----------
    probs : torch.Tensor of shape (n_samples, n_classes)
        Predicted probabilities (softmax of the logits).
    target : torch.Tensor of shape (n_samples,)
        Integer class indices.
    sample_weight : torch.Tensor of shape (n_samples,) or None, default=None
        Non-negative weights (not checked: that would synchronise with the host).
    normalization : {"reference", "pairs"}, default="reference"
        See above and :class:`sklearn_calib.losses.MMCELoss` for why "reference" is default.
    kernel_width : float, default=0.4
        Width of the Laplacian kernel.

    Returns
    -------
    mmce : torch.Tensor
        0-d tensor.

    References
    ----------
    A. Kumar, S. Sarawagi and U. Jain, "Trainable Calibration Measures for Neural
    Networks from Kernel Mean Embeddings", ICML 2018.

    J. Mukhoti, V. Kulharia, A. Sanyal, S. Golodetz, P. H. S. Torr and P. K. Dokania,
    "On using Focal Loss for Neural Network Calibration", ICML 2020 Workshop on
    Uncertainty and Robustness in Deep Learning.
    """
    if normalization not in ("reference", "pairs"):
        raise ValueError(
            f"Expected `normalization` to be 'reference' or 'pairs', got {normalization!r}."
        )
    check_number("kernel_width", kernel_width, low=0, low_open=True)
    probs, target = prepare_inputs(probs, target)
    weight = prepare_sample_weight(sample_weight, probs)
    with full_precision(probs.device):
        confidence, correct = _confidence_and_correct(probs, target)
        wrong = 1.0 - correct
        if weight is not None:
            correct, wrong = correct * weight, wrong * weight
        kernel = torch.exp(
            -(confidence.unsqueeze(1) - confidence.unsqueeze(0)).abs() / kernel_width
        )
        a = correct * (1.0 - confidence)
        b = wrong * confidence
        s_cc = _quadratic_form(a, kernel, a)
        s_ww = _quadratic_form(b, kernel, b)
        s_cw = _quadratic_form(a, kernel, b)
        m = correct.sum()
        n = wrong.sum()
        power = 2 if normalization == "reference" else 1
        m_norm = torch.where(m > 0, m, 1.0) ** power
        n_norm = torch.where(n > 0, n, 1.0) ** power
        squared = s_cc / m_norm**2 + s_ww / n_norm**2 - 2.0 * s_cw / (m_norm * n_norm)
        both = ((m > 0) & (n > 0)).to(probs.dtype)
        return both * torch.sqrt(squared.clamp_min(torch.finfo(probs.dtype).tiny))
