import functools
import pickle

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from skorch import NeuralNetClassifier
from torch import nn

from sklearn_calib import scoring
from sklearn_calib.losses import (
    LOSSES,
    BSCELoss,
    DualFocalLoss,
    FocalLoss,
    FocalLossGRA,
    InverseFocalLoss,
    MMCELoss,
    WeightedCrossEntropy,
    differentiable_calibration_error,
    get_loss,
    mmce_weighted,
    resolve_loss,
    smooth_calibration_error,
    uncertainty_weights,
)
from sklearn_calib.losses._calibration import soft_accuracy
from sklearn_calib.losses._weights import WEIGHTS, brier_weight, focal_weight

# Hand-computed oracle of the losses: z = [2, 1, 0] for y = 0, 1, 2.
Z = torch.tensor([[2.0, 1.0, 0.0]] * 3, dtype=torch.float64)
Y = torch.tensor([0, 1, 2])
# Hand-computed batch oracle of the metrics.
ZB = torch.tensor([[2, 1, 0], [0.5, 1.5, 0], [3, 0, 0], [0, 0, 0.2]], dtype=torch.float64)
YB = torch.tensor([0, 0, 0, 2])

VALUES = [
    ("ce", {}, [0.407606, 1.407606, 2.407606]),
    ("label_smoothing", {"epsilon": 0.05}, [0.457606, 1.407606, 2.357606]),
    ("focal", {"gamma": 3}, [0.015291, 0.606444, 1.814119]),
    ("focal_gra", {"gamma": 3}, [0.015291, 0.606444, 1.814119]),
    ("flsd53", {}, [0.015291, 0.606444, 1.502171]),
    ("flsd53_gra", {}, [0.015291, 0.606444, 1.502171]),
    ("inverse_focal", {"gamma": 3}, [1.882226, 2.714595, 3.118182]),
    ("dual_focal", {"gamma": 5}, [0.026636, 0.607492, 1.502171]),
    ("dual_focal_gra", {"gamma": 5}, [0.026636, 0.607492, 1.502171]),
    ("brier", {}, [0.180061, 1.021086, 1.330482]),
    ("bsce", {"beta": 1, "gamma": 1}, [0.272900, 2.126249, 4.381696]),
    ("bsce_gra", {"beta": 2, "gamma": 4}, [0.013215, 1.467594, 4.261901]),
]

GRADIENTS = [
    ("ce", {}, [-0.334759, 0.244728, 0.090031]),
    ("focal", {"gamma": 3}, [-0.043075, 0.031490, 0.011585]),
    ("focal_gra", {"gamma": 3}, [-0.012558, 0.009181, 0.003377]),
    ("focal", {"gamma": 3, "detach_weight": True}, [-0.012558, 0.009181, 0.003377]),
    ("dual_focal", {"gamma": 5}, [-0.110470, 0.095886, 0.014584]),
    ("dual_focal_gra", {"gamma": 5}, [-0.021875, 0.015992, 0.005883]),
    ("bsce_gra", {"beta": 2, "gamma": 4}, [-0.010854, 0.007935, 0.002919]),
    ("bsce", {"beta": 2, "gamma": 4}, [-0.046019, 0.036632, 0.009387]),
    ("inverse_focal", {"gamma": 3}, [-0.790697, 0.578046, 0.212651]),
]

# One routed, non-default hyperparameter per loss (reduction for the losses without one).
ROUTED = {
    "ce": {"reduction": "sum"},
    "label_smoothing": {"epsilon": 0.1},
    "lp_norm": {"alpha": 0.05, "p": 2},
    "entropy_reg": {"alpha": 0.2},
    "focal": {"gamma": 2},
    "flsd53": {"gamma_below": 4.0},
    "inverse_focal": {"gamma": 2},
    "dual_focal": {"gamma": 2},
    "brier": {"reduction": "sum"},
    "mmce": {"lam": 1.0, "normalization": "pairs"},
    "bsce": {"beta": 2.0, "gamma": 2.0},
    "focal_gra": {"gamma": 1},
    "dual_focal_gra": {"gamma": 1},
    "flsd53_gra": {"threshold": 0.3},
    "bsce_gra": {"beta": 2.0, "gamma": 4.0},
}


def _random_batch(n=8, k=4, seed=0, dtype=torch.float64, scale=2.0):
    gen = torch.Generator().manual_seed(seed)
    logits = scale * torch.randn(n, k, generator=gen, dtype=dtype)
    target = torch.randint(0, k, (n,), generator=gen)
    return logits, target


def _grad(loss, logits, target, **kwargs):
    logits = logits.clone().requires_grad_(True)
    loss(logits, target, **kwargs).backward()
    return logits.grad


@pytest.mark.parametrize("name, params, expected", VALUES)
def test_spec_values(name, params, expected):
    loss = get_loss(name, reduction="none", **params)
    np.testing.assert_allclose(loss(Z, Y).numpy(), expected, atol=1e-5)


@pytest.mark.parametrize("name, params, expected", VALUES)
def test_mean_and_sum_reduction_over_batch(name, params, expected):
    mean = get_loss(name, **params)(Z, Y)
    total = get_loss(name, reduction="sum", **params)(Z, Y)
    assert mean.ndim == 0
    np.testing.assert_allclose(mean.item(), np.mean(expected), atol=1e-5)
    np.testing.assert_allclose(total.item(), np.sum(expected), atol=1e-5)


@pytest.mark.parametrize("name, params, expected", GRADIENTS)
def test_spec_gradients(name, params, expected):
    grad = _grad(get_loss(name, **params), Z[:1], Y[:1])
    np.testing.assert_allclose(grad[0].numpy(), expected, atol=1e-5)


def test_gradient_weighting_scales_the_cross_entropy_gradient():
    logits, target = _random_batch()
    ce_grad_per_sample = (torch.softmax(logits, 1) - F.one_hot(target, 4)) / len(target)
    for name, weight in [
        ("focal_gra", functools.partial(focal_weight, gamma=3.0)),
        ("bsce_gra", functools.partial(brier_weight, beta=1.0, gamma=1.0)),
    ]:
        u = weight(torch.softmax(logits, 1), target)
        np.testing.assert_allclose(
            _grad(get_loss(name), logits, target).numpy(),
            (u.unsqueeze(1) * ce_grad_per_sample).numpy(),
            atol=1e-12,
        )


def test_one_mechanism_serves_the_focal_family():
    for name in ["ce", "focal", "flsd53", "inverse_focal", "dual_focal", "bsce"]:
        assert issubclass(LOSSES[name], WeightedCrossEntropy)
        assert issubclass(LOSSES.get(name + "_gra", LOSSES[name]), LOSSES[name])
    logits, target = _random_batch()
    custom = WeightedCrossEntropy(weight_fn=functools.partial(focal_weight, gamma=3.0))
    torch.testing.assert_close(custom(logits, target), FocalLoss(gamma=3)(logits, target))
    torch.testing.assert_close(
        WeightedCrossEntropy()(logits, target), F.cross_entropy(logits, target)
    )


def test_label_smoothing_matches_torch():
    logits, target = _random_batch(k=5)
    for epsilon in (0.0, 0.05, 0.3):
        torch.testing.assert_close(
            get_loss("label_smoothing", epsilon=epsilon)(logits, target),
            F.cross_entropy(logits, target, label_smoothing=epsilon),
        )


@pytest.mark.parametrize("p", [1, 2, 3.5])
def test_lp_norm_against_hand_formula(p):
    logits, target = _random_batch()
    z = logits.numpy()
    log_p = z - np.log(np.exp(z).sum(1, keepdims=True))
    ce = -log_p[np.arange(len(z)), target.numpy()]
    norms = (np.abs(z) ** p).sum(1) ** (1 / p)
    expected = np.mean(ce + 0.05 * norms)
    np.testing.assert_allclose(get_loss("lp_norm", alpha=0.05, p=p)(logits, target), expected)


def test_entropy_regularization_against_hand_formula():
    logits, target = _random_batch()
    z = logits.numpy()
    prob = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    ce = -np.log(prob[np.arange(len(z)), target.numpy()])
    entropy = -(prob * np.log(prob)).sum(1)
    expected = np.mean(ce - 0.3 * entropy)
    np.testing.assert_allclose(get_loss("entropy_reg", alpha=0.3)(logits, target), expected)


def test_mmce_batch_oracle():
    probs = torch.softmax(ZB, 1)
    np.testing.assert_allclose(mmce_weighted(probs, YB).item(), 0.556026, atol=1e-5)
    np.testing.assert_allclose(
        mmce_weighted(probs, YB, normalization="pairs").item(), 0.441105, atol=1e-5
    )
    ce = F.cross_entropy(ZB, YB)
    np.testing.assert_allclose(MMCELoss()(ZB, YB).item(), ce.item() + 2 * 0.556026, atol=1e-5)
    np.testing.assert_allclose(
        MMCELoss(lam=0.5, normalization="pairs")(ZB, YB).item(),
        ce.item() + 0.5 * 0.441105,
        atol=1e-5,
    )


def test_mmce_is_zero_when_all_correct_or_all_wrong():
    probs = torch.softmax(ZB, 1)
    assert mmce_weighted(probs, probs.argmax(1)).item() == 0.0
    assert mmce_weighted(probs, (probs.argmax(1) + 1) % 3).item() == 0.0


@pytest.mark.parametrize("name", sorted(n for n in LOSSES if not n.endswith("_gra")))
def test_gradcheck_float64(name):
    # The GRA losses' gradient is by design not the derivative of their value.
    logits, _ = _random_batch(n=5, k=4, seed=3)
    # two right and three wrong predictions, so batch terms such as MMCE are not zero
    predicted = logits.argmax(1)
    target = torch.cat([predicted[:2], (predicted[2:] + 1) % 4])
    assert mmce_weighted(torch.softmax(logits, 1), target) > 0.05
    logits.requires_grad_(True)
    loss = get_loss(name)
    assert torch.autograd.gradcheck(lambda z: loss(z, target), (logits,))


@pytest.mark.parametrize("name", ["focal", "dual_focal", "bsce"])
def test_weights_stay_accurate_when_p_y_rounds_to_one(name):
    # float32 p_y = 1 - 4e-9 rounds to 1 (and the loss to 0); 1 - p_y as the sum of the
    # other probabilities keeps the weight, and so the gradient, as in float64
    logits = torch.tensor([[20.0, 0.0, 0.0]])
    loss = get_loss(name, gamma=1.0, detach_weight=True)
    expected = _grad(loss, logits.double(), torch.tensor([0]))
    assert expected[0, 1] > 1e-18
    got = _grad(loss, logits, torch.tensor([0]))
    torch.testing.assert_close(got[0, 1:].double(), expected[0, 1:], rtol=1e-4, atol=0)


EXTREME = [
    (torch.tensor([[50.0, 0.0, 0.0]]), torch.tensor([0])),
    (torch.tensor([[50.0, 0.0, 0.0]]), torch.tensor([1])),
    (torch.tensor([[50.0, 0.0, 0.0], [0.0, 0.0, 0.0]]), torch.tensor([0, 2])),
    (torch.tensor([[1e4, -1e4, 0.0], [0.0, 120.0, 0.0]]), torch.tensor([0, 1])),
]
SMALL_EXPONENTS = [
    ("focal", {"gamma": 0.5}),
    ("focal", {"gamma": 0.0}),
    ("dual_focal", {"gamma": 0.5}),
    ("bsce", {"beta": 1.0, "gamma": 0.5}),
    ("bsce", {"beta": 0.5, "gamma": 0.5}),
    ("bsce", {"beta": 2.0, "gamma": 1.0}),
]


@pytest.mark.parametrize("name, params", [(name, {}) for name in sorted(LOSSES)] + SMALL_EXPONENTS)
@pytest.mark.parametrize("logits, target", EXTREME)
def test_finite_values_and_gradients_at_extreme_logits(name, params, logits, target):
    logits = logits.clone().requires_grad_(True)
    value = get_loss(name, **params)(logits, target)
    value.backward()
    assert torch.isfinite(value)
    assert torch.isfinite(logits.grad).all()


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_bf16_autocast_gives_float32_loss(name):
    gen = torch.Generator().manual_seed(0)
    layer = nn.Linear(5, 3)
    x = torch.randn(6, 5, generator=gen)
    target = torch.randint(0, 3, (6,), generator=gen)
    loss = get_loss(name)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = layer(x)
        value = loss(logits, target)
    assert logits.dtype == torch.bfloat16
    assert value.dtype == torch.float32
    torch.testing.assert_close(value, loss(logits.float(), target))
    value.backward()
    assert torch.isfinite(layer.weight.grad).all()


@pytest.mark.parametrize(
    "loss_class, params",
    [
        (FocalLoss, {}),
        (FocalLossGRA, {}),
        (InverseFocalLoss, {}),
        (DualFocalLoss, {}),
        (BSCELoss, {"beta": 2.0}),
    ],
)
def test_per_sample_gamma_equals_constant_gamma(loss_class, params):
    logits, target = _random_batch()
    gamma = torch.full((len(target),), 2.5, dtype=torch.float64)
    per_sample = loss_class(**params)
    constant = loss_class(gamma=2.5, **params)
    torch.testing.assert_close(per_sample(logits, target, gamma=gamma), constant(logits, target))
    torch.testing.assert_close(
        _grad(per_sample, logits, target, gamma=gamma), _grad(constant, logits, target)
    )


@pytest.mark.parametrize("loss_class", [FocalLoss, FocalLossGRA])
def test_per_sample_gamma_receives_its_gradient(loss_class):
    logits, target = _random_batch()
    logits[0] = torch.tensor([60.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    target[0] = 0
    gamma = torch.linspace(0.3, 4.0, len(target), dtype=torch.float64).requires_grad_(True)
    loss_class()(logits, target, gamma=gamma).backward()
    log_p = torch.log_softmax(logits, 1).gather(1, target[:, None]).squeeze(1)
    one_minus_p = 1 - log_p.exp()
    # d/dgamma_i of mean_i -(1 - p_i)^gamma_i log p_i
    expected = -(one_minus_p**gamma) * torch.log(one_minus_p) * log_p / len(target)
    torch.testing.assert_close(gamma.grad[1:], expected.detach()[1:])
    assert torch.isfinite(gamma.grad).all()


def test_per_sample_gamma_with_wrong_shape_raises():
    logits, target = _random_batch()
    with pytest.raises(ValueError, match=r"per-sample `gamma` of shape \(8,\)"):
        FocalLoss()(logits, target, gamma=torch.ones(3))


def test_flsd53_picks_gamma_without_gradient():
    logits, target = _random_batch(n=12, scale=3.0)
    p_y = torch.softmax(logits, 1).gather(1, target[:, None]).squeeze(1)
    gamma = torch.where(p_y < 0.2, 5.0, 3.0).to(torch.float64)
    assert 0 < (gamma == 5).sum() < len(gamma)
    for name, detach in [("flsd53", False), ("flsd53_gra", True)]:
        focal = FocalLoss(detach_weight=detach)
        flsd = get_loss(name)
        torch.testing.assert_close(flsd(logits, target), focal(logits, target, gamma=gamma))
        torch.testing.assert_close(
            _grad(flsd, logits, target), _grad(focal, logits, target, gamma=gamma)
        )


def test_sece_and_dece_oracles():
    probs = torch.softmax(ZB, 1)
    np.testing.assert_allclose(smooth_calibration_error(probs, YB).item(), 0.418082, atol=1e-5)
    np.testing.assert_allclose(
        smooth_calibration_error(probs, YB, include_self=False).item(), 0.581326, atol=1e-5
    )
    np.testing.assert_allclose(
        differentiable_calibration_error(probs, YB).item(), 0.322067, atol=1e-5
    )


def _soft_sece_reference(probs, target, bandwidth, include_self, t_a):
    """Soft SECE written out in numpy: the all-pairs accuracy smoothed by the Gaussian kernel."""
    p_y = probs[np.arange(len(target)), target][:, None]
    rank = 0.5 + (1.0 / (1.0 + np.exp(-t_a * (probs - p_y)))).sum(1)
    accuracy = np.maximum(2.0 - rank, 0.0)
    r = probs.max(1)
    kernel = np.exp(-((r[:, None] - r[None, :]) ** 2) / (2 * bandwidth**2))
    if not include_self:
        np.fill_diagonal(kernel, 0.0)
    smoothed = (kernel * accuracy).sum(1) / (kernel.sum(1) + 1e-12)
    return np.abs(smoothed - r).mean()


def test_soft_sece_values():
    # SPEC batch oracle: at t_a = 10 the soft accuracies are (0.982134, 0, 0.999647,
    # 0.330726) against the correctness (1, 0, 1, 1); every r is alone within reach of the
    # h = 0.01 kernel, so SECE = mean |a_i - r_i| = 0.270432 (hard: mean |c_i - r_i| = 0.418082).
    probs = torch.softmax(ZB, 1)
    soft = smooth_calibration_error(probs, YB, accuracy="soft", t_a=10.0)
    np.testing.assert_allclose(soft.item(), 0.270432, atol=1e-6)
    # leave-one-out: no neighbour, SACC = 0, whatever the accuracy: mean r_i
    np.testing.assert_allclose(
        smooth_calibration_error(probs, YB, accuracy="soft", include_self=False).item(),
        0.581326,
        atol=1e-6,
    )
    logits, target = _random_batch(n=60, k=4, seed=5, scale=1.5)
    probs = torch.softmax(logits, 1)
    for bandwidth, include_self, t_a in [(0.01, True, 100.0), (0.1, False, 10.0), (0.3, True, 1.0)]:
        np.testing.assert_allclose(
            smooth_calibration_error(
                probs,
                target,
                bandwidth=bandwidth,
                include_self=include_self,
                accuracy="soft",
                t_a=t_a,
            ).item(),
            _soft_sece_reference(probs.numpy(), target.numpy(), bandwidth, include_self, t_a),
            rtol=1e-12,
        )


@pytest.mark.parametrize("include_self", [True, False])
def test_soft_sece_tends_to_hard_sece_as_t_a_grows(include_self):
    # |soft SECE - hard SECE| <= max_j |a_j - c_j| (the kernel average is a convex
    # combination), and the soft accuracy tends to the correctness where the top
    # probability is unique (no ties in a random batch)
    logits, target = _random_batch(n=200, k=5, seed=4, scale=1.5)
    probs = torch.softmax(logits, 1)
    correct = (probs.argmax(1) == target).double()
    hard = smooth_calibration_error(probs, target, bandwidth=0.05, include_self=include_self).item()
    gaps, bounds = [], []
    for t_a in (10.0, 100.0, 1e3, 1e4, 1e6):
        soft = smooth_calibration_error(
            probs, target, bandwidth=0.05, include_self=include_self, accuracy="soft", t_a=t_a
        )
        gaps.append(abs(soft.item() - hard))
        bounds.append((soft_accuracy(probs, target, t_a) - correct).abs().max().item())
    assert gaps[0] > 1e-2  # at a low temperature the soft accuracy is another quantity
    assert all(gap <= bound + 1e-15 for gap, bound in zip(gaps, bounds, strict=True))
    assert all(later < earlier for earlier, later in zip(bounds[:-2], bounds[1:-1], strict=True))
    assert bounds[-2] < 1e-3 and gaps[-1] < 1e-12


@pytest.mark.parametrize("n, k, seed", [(1, 3, 0), (7, 2, 1), (60, 3, 2), (200, 10, 3)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_torch_sece_and_dece_agree_with_numpy_metrics(n, k, seed, dtype):
    logits, target = _random_batch(n=n, k=k, seed=seed, dtype=dtype, scale=3.0)
    probs = torch.softmax(logits, 1)
    y, proba, labels = target.numpy(), probs.numpy(), np.arange(k)
    for bandwidth in (0.01, 0.1):
        for include_self in (True, False):
            np.testing.assert_allclose(
                smooth_calibration_error(
                    probs, target, bandwidth=bandwidth, include_self=include_self
                ).item(),
                scoring.smooth_calibration_error(
                    y, proba, bandwidth=bandwidth, include_self=include_self, labels=labels
                ),
                atol=1e-6,
            )
    for params in ({}, {"n_bins": 5, "t_a": 10.0, "t_b": 0.1}):
        np.testing.assert_allclose(
            differentiable_calibration_error(probs, target, **params).item(),
            scoring.differentiable_calibration_error(y, proba, labels=labels, **params),
            atol=1e-6,
        )


@pytest.mark.parametrize(
    "metric",
    [
        smooth_calibration_error,
        functools.partial(smooth_calibration_error, bandwidth=0.2, include_self=False),
        functools.partial(smooth_calibration_error, bandwidth=0.2, accuracy="soft", t_a=5.0),
        differentiable_calibration_error,
        functools.partial(differentiable_calibration_error, n_bins=5, t_a=10.0, t_b=0.1),
        mmce_weighted,
    ],
)
def test_torch_calibration_measures_are_differentiable(metric):
    logits, _ = _random_batch(n=10, k=3, seed=1)
    predicted = logits.argmax(1)
    target = torch.where(torch.arange(10) < 6, predicted, (predicted + 1) % 3)
    logits.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda z: metric(torch.softmax(z, 1), target), (logits,))
    metric(torch.softmax(logits, 1), target).backward()
    assert logits.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "metric",
    [
        smooth_calibration_error,
        functools.partial(smooth_calibration_error, accuracy="soft", t_a=10.0),
        differentiable_calibration_error,
        mmce_weighted,
    ],
)
def test_torch_calibration_measures_under_bf16_autocast(metric):
    probs = torch.softmax(ZB.float(), 1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        value = metric(probs.bfloat16(), YB)
    assert value.dtype == torch.float32
    torch.testing.assert_close(value, metric(probs.bfloat16().float(), YB))


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: smooth_calibration_error(
                torch.ones(3, 2) / 2, torch.zeros(4, dtype=torch.long)
            ),
            "shape",
        ),
        (
            lambda: smooth_calibration_error(torch.ones(3, 2) / 2, torch.zeros(3)),
            "integer class indices",
        ),
        (lambda: smooth_calibration_error(np.ones((3, 2)) / 2, torch.zeros(3)), "torch tensors"),
        (
            lambda: smooth_calibration_error(
                torch.ones(3, 2) / 2, torch.zeros(3).long(), bandwidth=0
            ),
            "> 0",
        ),
        (
            lambda: differentiable_calibration_error(
                torch.ones(3, 2) / 2, torch.zeros(3).long(), n_bins=0
            ),
            ">= 1",
        ),
        (
            lambda: smooth_calibration_error(
                torch.ones(3, 2) / 2, torch.zeros(3).long(), include_self="no"
            ),
            "`include_self` to be a bool",
        ),
        (
            lambda: differentiable_calibration_error(
                torch.ones(3, 2) / 2, torch.zeros(3).long(), t_b=0
            ),
            "t_b",
        ),
        (
            lambda: differentiable_calibration_error(
                torch.ones(3, 2) / 2, torch.zeros(3).long(), t_a=np.inf
            ),
            "`t_a` to be a finite number",
        ),
        (
            lambda: smooth_calibration_error(
                torch.ones(3, 2) / 2, torch.zeros(3).long(), bandwidth=np.inf
            ),
            "`bandwidth` to be a finite number",
        ),
        (
            lambda: smooth_calibration_error(
                torch.ones(3, 2) / 2, torch.zeros(3).long(), accuracy="binary"
            ),
            "`accuracy` to be 'hard' or 'soft', got 'binary'",
        ),
        (
            lambda: smooth_calibration_error(torch.ones(3, 2) / 2, torch.zeros(3).long(), t_a=0.0),
            "`t_a`",
        ),
        (
            lambda: mmce_weighted(torch.ones(3, 2) / 2, torch.zeros(3).long(), normalization="x"),
            "pairs",
        ),
        (lambda: FocalLoss()(torch.ones(3, 2), torch.zeros(3)), "integer class indices"),
        (lambda: FocalLoss()(torch.ones(3), torch.zeros(3).long()), "shape"),
        (lambda: FocalLoss()(torch.ones(0, 3), torch.zeros(0).long()), "at least one sample"),
        (lambda: FocalLoss()(torch.ones(3, 2).long(), torch.zeros(3).long()), "floating-point"),
    ],
)
def test_bad_inputs_raise(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("bad_target", [3, -100])
def test_out_of_range_targets_raise(name, bad_target):
    target = torch.tensor([0, bad_target])
    with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
        get_loss(name)(Z[:2], target)


def test_plain_cross_entropy_rejects_per_call_arguments():
    with pytest.raises(TypeError, match="no per-call arguments, got \\['gamma'\\]"):
        get_loss("ce")(Z, Y, gamma=torch.tensor(5.0))


def test_lp_norm_with_infinite_order_is_the_max_norm():
    loss = get_loss("lp_norm", alpha=0.5, p=float("inf"))
    expected = F.cross_entropy(ZB, YB, reduction="none") + 0.5 * ZB.abs().amax(1)
    torch.testing.assert_close(loss(ZB, YB), expected.mean())


#: Logit scales at which powers of the logits over- or underflow in the dtype: |z|^2 of
#: 1e20 is inf in float32 (and bfloat16, computed in float32), of 1e-30 is 0; float64's
#: squares overflow at 1e200.
LP_NORM_SCALES = [
    (torch.float32, 1e20),
    (torch.float32, 1e30),
    (torch.float32, 1e-30),
    (torch.bfloat16, 1e20),
    (torch.bfloat16, 1e-30),
    (torch.float64, 1e200),
    (torch.float64, 1e-200),
]


@pytest.mark.parametrize("p", [1, 1.5, 2, 3, 10, float("inf")])
@pytest.mark.parametrize("dtype, scale", LP_NORM_SCALES, ids=str)
def test_lp_norm_value_and_gradient_at_extreme_scales(dtype, scale, p):
    alpha = 0.5
    logits = (torch.tensor([[1.0, -0.75, 0.25], [-0.5, 0.5, 1.0]], dtype=torch.float64) * scale).to(
        dtype
    )
    target = torch.tensor([0, 1])
    z = logits.double().numpy()
    # the norm by hand, on z / max|z| (exact: the largest entry becomes 1)
    top = np.abs(z).max(1, keepdims=True)
    u = z / top
    if p == float("inf"):
        norms = top[:, 0]
        norm_grad = np.sign(u) * (np.abs(u) == 1)
    else:
        unit_norm = (np.abs(u) ** p).sum(1, keepdims=True) ** (1 / p)
        norms = top[:, 0] * unit_norm[:, 0]
        norm_grad = np.sign(u) * (np.abs(u) / unit_norm) ** (p - 1)
    shifted = z - z.max(1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    ce = -log_p[np.arange(2), target.numpy()]
    softmax_grad = np.exp(log_p) - np.eye(3)[target.numpy()]
    loss = get_loss("lp_norm", alpha=alpha, p=p, reduction="sum")
    logits.requires_grad_(True)
    value = loss(logits, target)
    value.backward()
    np.testing.assert_allclose(value.item(), (ce + alpha * norms).sum(), rtol=1e-5)
    np.testing.assert_allclose(
        logits.grad.double().numpy(), softmax_grad + alpha * norm_grad, rtol=1e-2, atol=1e-6
    )


@pytest.mark.parametrize("beta, gamma", [(2.0, 2.0), (4.0, 1.0), (10.0, 1.0), (0.5, 0.5)])
def test_brier_weight_in_float32_matches_float64_for_confident_predictions(beta, gamma):
    # the errors of a confident prediction are ~1e-13: their 4th power underflowed float32,
    # and the clamped sum made the weight ~1e-9 for a norm of ~1e-13
    logits = torch.tensor([[30.0, 0.0, 0.0], [0.0, 25.0, -3.0], [1.0, 0.5, 0.0]])
    target = torch.tensor([0, 1, 2])
    probs = torch.softmax(logits.double(), 1)
    assert 1 - probs[0, 0] < 1e-12
    expected = brier_weight(probs, target, beta, gamma)
    got = brier_weight(torch.softmax(logits, 1), target, beta, gamma)
    torch.testing.assert_close(got.double(), expected, rtol=1e-4, atol=0)


def test_entropy_regularization_with_a_masked_class_is_finite():
    logits = torch.tensor([[2.0, -torch.inf, 0.0]], requires_grad=True)
    loss = get_loss("entropy_reg", alpha=0.1)
    value = loss(logits, torch.tensor([0]))
    p = torch.softmax(torch.tensor([2.0, 0.0]), 0)
    expected = -torch.log(p[0]) + 0.1 * (p * torch.log(p)).sum()
    torch.testing.assert_close(value, expected)
    value.backward()
    assert torch.isfinite(logits.grad).all()
    assert logits.grad[0, 1] == 0


@pytest.mark.parametrize("gamma", [2.0, 5.0])
def test_dual_focal_skips_classes_tied_with_the_target(gamma):
    logits = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    target = torch.tensor([0, 1, 0])
    p = torch.softmax(logits, 1).numpy()
    p_y = p[[0, 1, 2], [0, 1, 0]]
    # p_j is the largest probability strictly below p_y: the third class, the first, none.
    p_j = np.array([p[0, 2], p[1, 0], 0.0])
    expected = -((1 - p_y + p_j) ** gamma) * np.log(p_y)
    value = DualFocalLoss(gamma=gamma, reduction="none")(logits, target)
    np.testing.assert_allclose(value.numpy(), expected, rtol=1e-12)


def test_int32_targets_are_accepted():
    torch.testing.assert_close(FocalLoss()(Z, Y.int()), FocalLoss()(Z, Y))


@pytest.mark.parametrize(
    "name, params, message",
    [
        ("focal", {"gamma": -1}, "Expected `gamma` to be a finite number >= 0, got -1."),
        ("focal", {"gamma": float("inf")}, "`gamma` to be a finite number"),
        ("flsd53", {"gamma_below": float("inf")}, "`gamma_below` to be a finite number"),
        ("bsce", {"beta": float("inf")}, "`beta` to be a finite number"),
        ("lp_norm", {"alpha": float("inf")}, "`alpha`"),
        ("entropy_reg", {"alpha": float("nan")}, "`alpha`"),
        ("mmce", {"lam": float("inf")}, "`lam`"),
        ("focal", {"gamma": "3"}, "`gamma`"),
        ("label_smoothing", {"epsilon": 1.5}, "`epsilon` to be a finite number >= 0 and <= 1"),
        ("lp_norm", {"p": 0.5}, "`p`"),
        ("bsce", {"beta": 0}, "`beta` to be a finite number > 0"),
        ("mmce", {"normalization": "sum"}, "'reference' or 'pairs'"),
        ("mmce", {"lam": -1}, "`lam`"),
        ("flsd53", {"threshold": 2}, "`threshold`"),
        ("ce", {"reduction": "max"}, "`reduction`"),
        ("focal", {"detach_weight": 1}, "`detach_weight` to be a bool"),
    ],
)
def test_bad_hyperparameters_raise(name, params, message):
    with pytest.raises(ValueError, match=message):
        get_loss(name, **params)


def test_weight_fn_must_be_callable():
    with pytest.raises(ValueError, match="callable"):
        WeightedCrossEntropy(weight_fn=3)


def test_get_loss_and_resolve_loss():
    assert isinstance(get_loss("focal", gamma=2), FocalLoss)
    assert get_loss("focal", gamma=2).gamma == 2
    assert get_loss(FocalLoss).gamma == 3.0
    for name, loss_class in LOSSES.items():
        assert resolve_loss(name) is loss_class
    assert resolve_loss(nn.CrossEntropyLoss) is nn.CrossEntropyLoss
    instance = FocalLoss()
    assert resolve_loss(instance) is instance
    with pytest.raises(
        ValueError, match=r"Unknown loss 'focall'; expected one of \['brier', 'bsce'"
    ):
        resolve_loss("focall")
    with pytest.raises(ValueError, match="torch.nn.Module subclass, got 3"):
        resolve_loss(3)
    with pytest.raises(ValueError, match="torch.nn.Module subclass"):
        resolve_loss(dict)
    with pytest.raises(ValueError, match="instance"):
        get_loss(instance)
    with pytest.raises(TypeError):
        get_loss("brier", gamma=2)


def test_registry_names():
    assert set(LOSSES) == set(ROUTED)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_pickle_round_trip(name):
    loss = get_loss(name, **ROUTED[name])
    restored = pickle.loads(pickle.dumps(loss))
    assert type(restored) is type(loss)
    assert repr(restored) == repr(loss)
    for key, value in ROUTED[name].items():
        assert getattr(restored, key) == value
    logits, target = _random_batch()
    torch.testing.assert_close(restored(logits, target), loss(logits, target))


class _TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 3)

    def forward(self, x):
        return self.layer(x)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_skorch_routes_criterion_hyperparameters(name):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=40).astype(np.int64)
    params = {f"criterion__{key}": value for key, value in ROUTED[name].items()}
    torch.manual_seed(0)
    net = NeuralNetClassifier(
        _TinyNet,
        criterion=LOSSES[name],
        max_epochs=1,
        batch_size=16,
        train_split=None,
        verbose=0,
        predict_nonlinearity=functools.partial(torch.softmax, dim=-1),
        **params,
    )
    net.fit(X, y)
    np.testing.assert_allclose(net.predict_proba(X).sum(1), 1.0, rtol=1e-5)
    assert isinstance(net.criterion_, LOSSES[name])
    for key, value in ROUTED[name].items():
        assert getattr(net.criterion_, key) == value
    assert np.isfinite(net.history[-1, "train_loss"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_cuda_bf16_autocast_matches_cpu(name):
    logits, target = _random_batch(n=16, k=5, dtype=torch.float32)
    loss = get_loss(name)
    logits_gpu = logits.cuda().bfloat16()
    target_gpu = target.cuda()
    torch.cuda.set_sync_debug_mode("error")  # a host synchronisation inside the loss raises
    try:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            value = loss(logits_gpu, target_gpu)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert value.dtype == torch.float32
    torch.testing.assert_close(value.cpu(), loss(logits_gpu.cpu().float(), target))


@pytest.mark.parametrize(
    ("weight", "params"),
    [
        ("focal", {"gamma": 2.0}),
        ("inverse_focal", {"gamma": 3.0}),
        ("dual_focal", {"gamma": 5.0}),
        ("flsd53", {}),
        ("brier", {"beta": 2.0, "gamma": 1.5}),
    ],
)
def test_uncertainty_weights_are_the_loss_weights_on_numpy_input(weight, params):
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(4), size=50)
    y = np.array(["a", "b", "c", "d"])[rng.integers(0, 4, 50)]
    values = uncertainty_weights(y, proba, weight=weight, labels=["a", "b", "c", "d"], **params)
    index = torch.as_tensor(np.searchsorted(["a", "b", "c", "d"], y))
    expected = WEIGHTS[weight](torch.as_tensor(proba), index, **params).numpy()
    assert values.dtype == np.float64 and values.shape == (50,)
    np.testing.assert_array_equal(values, expected)


def test_uncertainty_weights_of_the_focal_loss_oracle():
    # p_y = 0.5 and 0.8: (1 - p_y)^2 = 0.25 and 0.04; 1-D input is binary p(class 1)
    assert uncertainty_weights([0, 1], [[0.5, 0.5], [0.2, 0.8]], gamma=2) == pytest.approx(
        [0.25, 0.04]
    )
    assert uncertainty_weights([0, 1], [0.5, 0.8], gamma=2) == pytest.approx([0.25, 0.04])


def test_uncertainty_weights_reject_bad_input():
    with pytest.raises(ValueError, match="Expected `weight` to be one of"):
        uncertainty_weights([0, 1], [[0.5, 0.5], [0.2, 0.8]], weight="smooth", gamma=2)
    with pytest.raises(ValueError, match="y_prob"):
        uncertainty_weights([0, 1], [[0.5, 0.9], [0.2, 0.8]], gamma=2)
    with pytest.raises(ValueError, match="gamma"):
        uncertainty_weights([0, 1], [[0.5, 0.5], [0.2, 0.8]], gamma="x")


# ----------------------------------------------------------------- sample weights


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_integer_sample_weights_equal_repeated_samples(name, reduction):
    """Each loss, its value and its gradient: weight w_i is sample i repeated w_i times."""
    logits, target = _random_batch(n=9, k=4, seed=3)
    weight = torch.tensor([0, 1, 2, 3, 1, 0, 2, 1, 4], dtype=torch.float64)
    repeats = weight.long()
    loss = get_loss(name, **{**ROUTED.get(name, {}), "reduction": reduction})
    weighted_logits = logits.clone().requires_grad_(True)
    weighted = loss(weighted_logits, target, sample_weight=weight)
    repeated_logits = logits.clone().requires_grad_(True)
    repeated = loss(
        repeated_logits.repeat_interleave(repeats, 0), target.repeat_interleave(repeats)
    )
    if reduction == "none":
        if name != "mmce":  # MMCE's batch term differs between the two batches
            torch.testing.assert_close(weighted, weight * loss(logits, target))
        weighted, repeated = weighted.sum(), repeated.sum()
    torch.testing.assert_close(weighted, repeated)
    weighted.backward()
    repeated.backward()
    torch.testing.assert_close(weighted_logits.grad, repeated_logits.grad)


def test_sample_weights_with_per_sample_gamma_and_zero_total():
    logits, target = _random_batch(n=6, k=3, seed=4)
    gamma = torch.linspace(0.5, 3.0, 6, dtype=torch.float64)
    weight = torch.tensor([2.0, 0.0, 1.0, 1.0, 3.0, 0.5], dtype=torch.float64)
    loss = FocalLoss(reduction="none")
    per_sample = loss(logits, target, gamma=gamma)
    weighted = FocalLoss()(logits, target, sample_weight=weight, gamma=gamma)
    torch.testing.assert_close(weighted, (weight * per_sample).sum() / weight.sum())
    zero = FocalLoss()(logits, target, sample_weight=torch.zeros(6, dtype=torch.float64))
    assert zero.item() == 0.0
    with pytest.raises(ValueError, match=r"`sample_weight` of shape \(6,\).*got \(5,\)"):
        FocalLoss()(logits, target, sample_weight=torch.ones(5))
    with pytest.raises(ValueError, match="`sample_weight` to be a torch tensor"):
        FocalLoss()(logits, target, sample_weight=[1.0] * 6)


def test_weighted_mmce_counts_pairs_with_the_product_of_weights():
    probs = torch.softmax(ZB, 1)
    weight = torch.tensor([1.0, 2.0, 0.0, 3.0], dtype=torch.float64)
    repeats = weight.long()
    for normalization in ("reference", "pairs"):
        torch.testing.assert_close(
            mmce_weighted(probs, YB, sample_weight=weight, normalization=normalization),
            mmce_weighted(
                probs.repeat_interleave(repeats, 0),
                YB.repeat_interleave(repeats),
                normalization=normalization,
            ),
        )
    ones = torch.ones(4, dtype=torch.float64)
    assert mmce_weighted(probs, YB, sample_weight=ones).item() == pytest.approx(0.556026, abs=1e-5)
