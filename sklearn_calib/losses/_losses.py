"""Training losses of the calibration literature as ``nn.Module(logits, target) -> scalar``.

Every loss takes logits (n, K) and integer class indices (n,), returns the mean over the
batch by default (``reduction="sum"`` gives the summed form of the papers' code), and takes its
hyperparameters as constructor arguments, so skorch routes them:
``NetClassifier(module, criterion=FocalLoss, criterion__gamma=3)``. A plain skorch
``NeuralNetClassifier`` applies softmax in ``predict_proba`` only for
``torch.nn.CrossEntropyLoss``; with these losses pass
``predict_nonlinearity=functools.partial(torch.softmax, dim=-1)`` (``NetClassifier`` does
this itself), or ``predict_proba`` returns logits. Logits are cast to
float32 and autocast is switched off inside every loss, so a bf16 forward pass still gets a
float32 loss computed from ``log_softmax``.

The focal family is one mechanism (Lin et al. 2025): :class:`WeightedCrossEntropy` computes
``u(p) * CE`` with a per-sample weight ``u`` from :mod:`sklearn_calib.losses._weights`; with
``detach_weight=True`` the weight is computed from detached probabilities, so it scales the
gradient instead of being differentiated ("GRA"). The named losses only pick the weight and
its defaults.

The differentiable calibration measures :func:`smooth_calibration_error` (SECE),
:func:`differentiable_calibration_error` (DECE) and :func:`mmce_weighted` take
probabilities and are re-exported here.
"""

import inspect

import torch
from torch import nn

from sklearn_calib._validation import check_number
from sklearn_calib.losses._base import (
    GammaWeighted,
    Loss,
    WeightedCrossEntropy,
    log_probs_and_nll,
)
from sklearn_calib.losses._calibration import mmce_weighted
from sklearn_calib.losses._weights import (
    brier_weight,
    complement_probability,
    dual_focal_weight,
    flsd53_weight,
    focal_weight,
    inverse_focal_weight,
    row_scale,
)


class CrossEntropy(WeightedCrossEntropy):
    """Cross-entropy ``-log p_y`` ("ce").

    Parameters
    ----------
    reduction : {"mean", "sum", "none"}, default="mean"
    """

    def __init__(self, reduction="mean"):
        super().__init__(reduction=reduction)


class FocalLoss(GammaWeighted):
    """Focal loss ``-(1 - p_y)^gamma log p_y``, weight differentiated ("focal").

    Parameters
    ----------
    gamma : float, default=3.0
        Exponent (Mukhoti et al. use 3; Wang et al. search {1, 3, 5, 7, 9}).
    detach_weight : bool, default=False
        See :class:`WeightedCrossEntropy`; True is :class:`FocalLossGRA`.
    reduction : {"mean", "sum", "none"}, default="mean"

    References
    ----------
    T.-Y. Lin, P. Goyal, R. Girshick, K. He and P. Dollar, "Focal Loss for Dense
    Object Detection", ICCV 2017.

    J. Mukhoti, V. Kulharia, A. Sanyal, S. Golodetz, P. H. S. Torr and P. K. Dokania,
    "On using Focal Loss for Neural Network Calibration", ICML 2020 Workshop on
    Uncertainty and Robustness in Deep Learning.

    D.-B. Wang, L. Feng and M.-L. Zhang, "Rethinking Calibration of Deep Neural
    Networks: Do Not Be Afraid of Overconfidence", NeurIPS 2021.
    """

    _weight = staticmethod(focal_weight)

    def __init__(self, gamma=3.0, detach_weight=False, reduction="mean"):
        super().__init__(gamma, detach_weight, reduction)


class FocalLossGRA(FocalLoss):
    """Focal weight applied to the gradient ("focal_gra"); Wang et al.'s "focal loss".

    Parameters
    ----------
    gamma : float, default=3.0
        As in :class:`FocalLoss`.
    detach_weight : bool, default=True
        As in :class:`FocalLoss`; True applies the weight to the gradient only.
    reduction : {"mean", "sum", "none"}, default="mean"
        As in :class:`FocalLoss`.

    References
    ----------
    D.-B. Wang, L. Feng and M.-L. Zhang, "Rethinking Calibration of Deep Neural
    Networks: Do Not Be Afraid of Overconfidence", NeurIPS 2021.

    J. Lin, L. Tao, M. Dong and C. Xu, "Uncertainty Weighted Gradients for Model
    Calibration", CVPR 2025.
    """

    def __init__(self, gamma=3.0, detach_weight=True, reduction="mean"):
        super().__init__(gamma, detach_weight, reduction)


class InverseFocalLoss(GammaWeighted):
    """Inverse focal loss ``-(1 + p_y)^gamma log p_y`` ("inverse_focal").

    Parameters
    ----------
    gamma : float, default=3.0
        Exponent of the weight ``(1 + p_y)^gamma``.
    detach_weight : bool, default=False
        See :class:`WeightedCrossEntropy`.
    reduction : {"mean", "sum", "none"}, default="mean"

    References
    ----------
    D.-B. Wang, L. Feng and M.-L. Zhang, "Rethinking Calibration of Deep Neural
    Networks: Do Not Be Afraid of Overconfidence", NeurIPS 2021.
    """

    _weight = staticmethod(inverse_focal_weight)

    def __init__(self, gamma=3.0, detach_weight=False, reduction="mean"):
        super().__init__(gamma, detach_weight, reduction)


class DualFocalLoss(GammaWeighted):
    """Dual focal loss ``-(1 - p_y + p_j)^gamma log p_y`` ("dual_focal").

    ``p_j`` is the largest probability below ``p_y`` (0 if none).

    Parameters
    ----------
    gamma : float, default=5.0
        The value of Tao et al., also used by Lin et al.
    detach_weight : bool, default=False
        See :class:`WeightedCrossEntropy`; True is :class:`DualFocalLossGRA`.
    reduction : {"mean", "sum", "none"}, default="mean"

    References
    ----------
    L. Tao, M. Dong and C. Xu, "Dual Focal Loss for Calibration", ICML 2023.

    J. Lin, L. Tao, M. Dong and C. Xu, "Uncertainty Weighted Gradients for Model
    Calibration", CVPR 2025.
    """

    _weight = staticmethod(dual_focal_weight)

    def __init__(self, gamma=5.0, detach_weight=False, reduction="mean"):
        super().__init__(gamma, detach_weight, reduction)


class DualFocalLossGRA(DualFocalLoss):
    """Dual focal weight applied to the gradient ("dual_focal_gra").

    Parameters
    ----------
    gamma : float, default=5.0
        As in :class:`DualFocalLoss`.
    detach_weight : bool, default=True
        As in :class:`DualFocalLoss`; True applies the weight to the gradient only.
    reduction : {"mean", "sum", "none"}, default="mean"
        As in :class:`DualFocalLoss`.
    """

    def __init__(self, gamma=5.0, detach_weight=True, reduction="mean"):
        super().__init__(gamma, detach_weight, reduction)


class FLSD53Loss(WeightedCrossEntropy):
    """FLSD-53: focal loss with gamma picked per sample ("flsd53").

    ``gamma = gamma_below`` where ``p_y < threshold`` else ``gamma_above``; the choice carries
    no gradient.

    Parameters
    ----------
    gamma_below : float, default=5.0
        Gamma of the samples with ``p_y < threshold``.
    gamma_above : float, default=3.0
        Gamma of the others.
    threshold : float, default=0.2
        Probability of the true class below which ``gamma_below`` applies.
    detach_weight : bool, default=False
        See :class:`WeightedCrossEntropy`; True is :class:`FLSD53LossGRA`.
    reduction : {"mean", "sum", "none"}, default="mean"

    References
    ----------
    J. Mukhoti, V. Kulharia, A. Sanyal, S. Golodetz, P. H. S. Torr and P. K. Dokania,
    "On using Focal Loss for Neural Network Calibration", ICML 2020 Workshop on
    Uncertainty and Robustness in Deep Learning.
    """

    def __init__(
        self,
        gamma_below=5.0,
        gamma_above=3.0,
        threshold=0.2,
        detach_weight=False,
        reduction="mean",
    ):
        super().__init__(detach_weight=detach_weight, reduction=reduction)
        check_number("gamma_below", gamma_below, low=0)
        check_number("gamma_above", gamma_above, low=0)
        check_number("threshold", threshold, low=0, high=1)
        self.gamma_below = gamma_below
        self.gamma_above = gamma_above
        self.threshold = threshold

    def sample_weight(self, probs, target):
        return flsd53_weight(probs, target, self.gamma_below, self.gamma_above, self.threshold)


class FLSD53LossGRA(FLSD53Loss):
    """FLSD-53 weight applied to the gradient ("flsd53_gra").

    Parameters
    ----------
    gamma_below : float, default=5.0
        As in :class:`FLSD53Loss`.
    gamma_above : float, default=3.0
        As in :class:`FLSD53Loss`.
    threshold : float, default=0.2
        As in :class:`FLSD53Loss`.
    detach_weight : bool, default=True
        As in :class:`FLSD53Loss`; True applies the weight to the gradient only.
    reduction : {"mean", "sum", "none"}, default="mean"
        As in :class:`FLSD53Loss`.
    """

    def __init__(
        self,
        gamma_below=5.0,
        gamma_above=3.0,
        threshold=0.2,
        detach_weight=True,
        reduction="mean",
    ):
        super().__init__(gamma_below, gamma_above, threshold, detach_weight, reduction)


class BSCELoss(GammaWeighted):
    """Brier-score weighted cross-entropy ``-||e_y - p||_beta^gamma log p_y`` ("bsce").

    Parameters
    ----------
    beta : float, default=1.0
        Order of the norm. With ``beta = 1`` the weight is focal loss's times a constant:
        ``||e_y - p||_1 = (1 - p_y) + sum_{k != y} p_k = 2 (1 - p_y)``, so the weight is
        ``2^gamma (1 - p_y)^gamma`` (the defaults ``beta = gamma = 1`` make this loss twice
        focal loss with ``gamma = 1``). The defaults are those of Lin et al.'s training
        script; the paper tunes ``beta`` and ``gamma`` by cross-validation (its Figure 6
        and Table 6) and notes that ``beta = gamma = 2`` is the Brier score.
    gamma : float, default=1.0
        Exponent of the norm.
    detach_weight : bool, default=False
        True is :class:`BSCELossGRA`, the loss Lin et al. propose.
    reduction : {"mean", "sum", "none"}, default="mean"

    References
    ----------
    J. Lin, L. Tao, M. Dong and C. Xu, "Uncertainty Weighted Gradients for Model
    Calibration", CVPR 2025.
    """

    def __init__(self, beta=1.0, gamma=1.0, detach_weight=False, reduction="mean"):
        super().__init__(gamma, detach_weight, reduction)
        check_number("beta", beta, low=0, low_open=True)
        self.beta = beta

    def sample_weight(self, probs, target, gamma=None):
        return brier_weight(probs, target, self.beta, self.gamma if gamma is None else gamma)


class BSCELossGRA(BSCELoss):
    """Brier-score weight applied to the gradient, BSCE-GRA ("bsce_gra").

    Parameters
    ----------
    beta : float, default=1.0
        As in :class:`BSCELoss`.
    gamma : float, default=1.0
        As in :class:`BSCELoss`.
    detach_weight : bool, default=True
        As in :class:`BSCELoss`; True applies the weight to the gradient only.
    reduction : {"mean", "sum", "none"}, default="mean"
        As in :class:`BSCELoss`.

    References
    ----------
    J. Lin, L. Tao, M. Dong and C. Xu, "Uncertainty Weighted Gradients for Model
    Calibration", CVPR 2025.
    """

    def __init__(self, beta=1.0, gamma=1.0, detach_weight=True, reduction="mean"):
        super().__init__(beta, gamma, detach_weight, reduction)


class LabelSmoothingLoss(Loss):
    """Cross-entropy against ``(1 - epsilon) e_y + epsilon / K`` ("label_smoothing").

    Parameters
    ----------
    epsilon : float, default=0.05
        Smoothing (Wang et al. search {0.01, 0.03, 0.05, 0.07, 0.09}).
    reduction : {"mean", "sum", "none"}, default="mean"

    References
    ----------
    R. Muller, S. Kornblith and G. Hinton, "When Does Label Smoothing Help?",
    NeurIPS 2019.

    D.-B. Wang, L. Feng and M.-L. Zhang, "Rethinking Calibration of Deep Neural
    Networks: Do Not Be Afraid of Overconfidence", NeurIPS 2021.
    """

    def __init__(self, epsilon=0.05, reduction="mean"):
        super().__init__(reduction)
        check_number("epsilon", epsilon, low=0, high=1)
        self.epsilon = epsilon

    def per_sample_loss(self, logits, target):
        log_probs, nll = log_probs_and_nll(logits, target)
        return (1.0 - self.epsilon) * nll - self.epsilon * log_probs.mean(1)


class LpNormLoss(Loss):
    """Cross-entropy plus ``alpha * ||z||_p`` of each sample's logits ("lp_norm").

    The logit-norm penalty of Wang et al.; their code adds the batch mean of ``||z_i||_1``.

    Parameters
    ----------
    alpha : float, default=0.01
        Strength (Wang et al. search {0.001, 0.005, 0.01, 0.05, 0.1}).
    p : float, default=1
        Order of the norm, >= 1 (``float("inf")`` allowed).
    reduction : {"mean", "sum", "none"}, default="mean"

    References
    ----------
    D.-B. Wang, L. Feng and M.-L. Zhang, "Rethinking Calibration of Deep Neural
    Networks: Do Not Be Afraid of Overconfidence", NeurIPS 2021.
    """

    def __init__(self, alpha=0.01, p=1, reduction="mean"):
        super().__init__(reduction)
        check_number("alpha", alpha, low=0)
        check_number("p", p, low=1, allow_inf=True)
        self.alpha = alpha
        self.p = p

    def per_sample_loss(self, logits, target):
        _, nll = log_probs_and_nll(logits, target)
        scale = row_scale(logits)
        norm = scale.squeeze(1) * torch.linalg.vector_norm(logits / scale, ord=self.p, dim=1)
        return nll + self.alpha * norm


class EntropyRegularizedLoss(Loss):
    """Cross-entropy minus ``alpha * H(p)``, a confidence penalty ("entropy_reg").

    Parameters
    ----------
    alpha : float, default=0.1
        Strength of the entropy bonus.
    reduction : {"mean", "sum", "none"}, default="mean"

    References
    ----------
    G. Pereyra, G. Tucker, J. Chorowski, L. Kaiser and G. Hinton, "Regularizing
    Neural Networks by Penalizing Confident Output Distributions", ICLR 2017 Workshop.

    D.-B. Wang, L. Feng and M.-L. Zhang, "Rethinking Calibration of Deep Neural
    Networks: Do Not Be Afraid of Overconfidence", NeurIPS 2021.
    """

    def __init__(self, alpha=0.1, reduction="mean"):
        super().__init__(reduction)
        check_number("alpha", alpha, low=0)
        self.alpha = alpha

    def per_sample_loss(self, logits, target):
        log_probs, nll = log_probs_and_nll(logits, target)
        probs = log_probs.exp()
        # 0 * log 0 = 0: a class with probability 0 (a -inf logit) adds no entropy, no NaN.
        entropy = -(probs * log_probs.masked_fill(probs == 0, 0.0)).sum(1)
        return nll - self.alpha * entropy


class BrierLoss(Loss):
    """Brier score ``sum_k (p_k - e_{y,k})^2`` as a loss ("brier").

    Parameters
    ----------
    reduction : {"mean", "sum", "none"}, default="mean"

    References
    ----------
    G. W. Brier, "Verification of Forecasts Expressed in Terms of Probability",
    Monthly Weather Review, 1950.

    J. Mukhoti, V. Kulharia, A. Sanyal, S. Golodetz, P. H. S. Torr and P. K. Dokania,
    "On using Focal Loss for Neural Network Calibration", ICML 2020 Workshop on
    Uncertainty and Robustness in Deep Learning.
    """

    def per_sample_loss(self, logits, target):
        probs = torch.softmax(logits, dim=1)
        # e_y - p in absolute value; scatter rejects an out-of-range target like gather does.
        error = probs.scatter(
            1, target.unsqueeze(1), complement_probability(probs, target).unsqueeze(1)
        )
        return (error**2).sum(1)


class MMCELoss(Loss):
    """Cross-entropy plus ``lam * MMCE_w`` ("mmce"), a baseline of Mukhoti et al.

    MMCE_w is :func:`mmce_weighted`, a batch-level term: per sample (``reduction="none"``)
    the loss is ``CE_i + lam * MMCE_w(batch)``, so ``"sum"`` gives ``sum CE + n lam MMCE_w``.
    With ``sample_weight`` MMCE_w is computed with the weights too.

    Parameters
    ----------
    lam : float, default=2.0
        Weight of the MMCE term (Mukhoti et al.'s value).
    normalization : {"reference", "pairs"}, default="reference"
        ``"reference"`` divides the within-group kernel sums by m^4, n^4 and (mn)^2, as the
        code behind Mukhoti et al.'s tables does (it averages over pairs, then divides by m^2,
        n^2, mn again); ``"pairs"`` divides once (m^2, n^2, mn), the textbook estimator.
        The default is "reference" because the strength ``lam = 2`` was tuned for it:
        measured on Fashion-MNIST / ResNet-20 (24 epochs, lam = 2), "reference" trains
        normally (accuracy 92.8 %, ECE 2.7 %) while "pairs" collapses (accuracy 87.6 %,
        ECE 20 %, optimal temperature at the grid floor).
    kernel_width : float, default=0.4
        Width of the Laplacian kernel on confidences.
    reduction : {"mean", "sum", "none"}, default="mean"

    References
    ----------
    A. Kumar, S. Sarawagi and U. Jain, "Trainable Calibration Measures for Neural
    Networks from Kernel Mean Embeddings", ICML 2018.

    J. Mukhoti, V. Kulharia, A. Sanyal, S. Golodetz, P. H. S. Torr and P. K. Dokania,
    "On using Focal Loss for Neural Network Calibration", ICML 2020 Workshop on
    Uncertainty and Robustness in Deep Learning.
    """

    def __init__(self, lam=2.0, normalization="reference", kernel_width=0.4, reduction="mean"):
        super().__init__(reduction)
        check_number("lam", lam, low=0)
        check_number("kernel_width", kernel_width, low=0, low_open=True)
        if normalization not in ("reference", "pairs"):
            raise ValueError(
                f"Expected `normalization` to be 'reference' or 'pairs', got {normalization!r}."
            )
        self.lam = lam
        self.normalization = normalization
        self.kernel_width = kernel_width

    def per_sample_loss(self, logits, target):
        return log_probs_and_nll(logits, target)[1]

    def batch_term(self, logits, target, sample_weight):
        mmce = mmce_weighted(
            torch.softmax(logits, dim=1),
            target,
            sample_weight=sample_weight,
            normalization=self.normalization,
            kernel_width=self.kernel_width,
        )
        return self.lam * mmce


#: Loss classes by name, for ``criterion="focal"`` and :func:`get_loss`.
LOSSES = {
    "ce": CrossEntropy,
    "label_smoothing": LabelSmoothingLoss,
    "lp_norm": LpNormLoss,
    "entropy_reg": EntropyRegularizedLoss,
    "focal": FocalLoss,
    "flsd53": FLSD53Loss,
    "inverse_focal": InverseFocalLoss,
    "dual_focal": DualFocalLoss,
    "brier": BrierLoss,
    "mmce": MMCELoss,
    "bsce": BSCELoss,
    "focal_gra": FocalLossGRA,
    "dual_focal_gra": DualFocalLossGRA,
    "flsd53_gra": FLSD53LossGRA,
    "bsce_gra": BSCELossGRA,
}


def resolve_loss(criterion):
    """Return the loss class named by ``criterion``.

    Parameters
    ----------
    criterion : str, type of torch.nn.Module or torch.nn.Module
        A name from :data:`LOSSES`, an ``nn.Module`` subclass (returned unchanged) or an
        ``nn.Module`` instance (returned unchanged; skorch accepts those too).

    Returns
    -------
    criterion : type of torch.nn.Module or torch.nn.Module
        The loss class, or the loss given.
    """
    if isinstance(criterion, str):
        try:
            return LOSSES[criterion]
        except KeyError:
            raise ValueError(
                f"Unknown loss {criterion!r}; expected one of {sorted(LOSSES)} "
                "or a torch.nn.Module subclass."
            ) from None
    if (inspect.isclass(criterion) and issubclass(criterion, nn.Module)) or isinstance(
        criterion, nn.Module
    ):
        return criterion
    raise ValueError(
        f"Expected `criterion` to be a loss name from {sorted(LOSSES)} or a torch.nn.Module "
        f"subclass, got {criterion!r}."
    )


def get_loss(name, **params):
    """Return an instance of the loss ``name`` built with ``params``.

    Parameters
    ----------
    name : str or type of torch.nn.Module
        A name from :data:`LOSSES` or an ``nn.Module`` subclass.
    **params
        Constructor arguments, e.g. ``gamma=3``.

    Returns
    -------
    loss : torch.nn.Module
        The loss, built with ``params``.

    Examples
    --------
    >>> import torch
    >>> from sklearn_calib.losses import get_loss
    >>> loss = get_loss("focal", gamma=3)
    >>> round(loss(torch.tensor([[2.0, 1.0, 0.0]]), torch.tensor([0])).item(), 6)
    0.015291
    """
    criterion = resolve_loss(name)
    if isinstance(criterion, nn.Module):
        raise ValueError(f"Expected a loss name or class, got the instance {criterion!r}.")
    return criterion(**params)
