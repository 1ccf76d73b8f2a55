"""MetaNetClassifier (Wang and Golebiowski 2024): the gamma-Net, the meta step, the estimator.

The hand-computed batch oracles of SECE and DECE are tested where the metrics live: numpy in
tests/test_scoring.py::test_spec_oracles, torch in tests/test_losses.py::
test_sece_and_dece_oracles, and their agreement to 1e-6 in tests/test_losses.py::
test_torch_sece_and_dece_agree_with_numpy_metrics. Here the meta objectives the estimator
builds are checked against the same oracles.
"""

import io
import pickle
from functools import partial

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.model_selection import GridSearchCV, cross_val_score
from skorch.callbacks import Callback
from torch import nn
from torch.utils.data import Subset

from sklearn_calib import CalibratedClassifier, MetaNetClassifier, TemperatureScaling
from sklearn_calib.estimators import LOOKAHEADS, Lookahead, NetClassifier
from sklearn_calib.estimators import _meta as meta_module
from sklearn_calib.estimators import _meta_step as meta_step_module
from sklearn_calib.estimators._gamma_net import ElementwiseL2, GammaNet, build_regularizer
from sklearn_calib.estimators._meta import _stratified_holdout
from sklearn_calib.estimators._meta_step import (
    MetaBatches,
    meta_objective,
    meta_step,
    network_meta_step,
)
from sklearn_calib.losses import CrossEntropy, FocalLoss
from sklearn_calib.scoring import expected_calibration_error

# Hand-computed batch oracle of the metrics
Z_SPEC = torch.tensor([[2.0, 1.0, 0.0], [0.5, 1.5, 0.0], [3.0, 0.0, 0.0], [0.0, 0.0, 0.2]])
Y_SPEC = torch.tensor([0, 0, 0, 2])
META_PARAMS = {
    "bandwidth": 0.01,
    "include_self": True,
    "accuracy": "hard",
    "n_bins": 15,
    "t_a": 100.0,
    "t_b": 0.01,
}

COMBINATIONS = [("gamma_net", "sece"), ("gamma_net", "dece"), ("l2", "dece"), ("l2", "sece")]


def small_meta(**params):
    defaults = {
        "module__hidden_units": (32,),
        "lr": 0.01,
        "max_epochs": 4,
        "batch_size": 64,
        "random_state": 0,
    }
    return MetaNetClassifier(**{**defaults, **params})


@pytest.fixture(scope="module")
def fitted(digits):
    X_train, _, y_train, _ = digits
    return small_meta(max_epochs=6).fit(X_train, y_train)


# ------------------------------------------------------------------ meta objectives


def test_meta_objectives_hit_the_spec_oracles():
    sece = partial(meta_objective, Z_SPEC, Y_SPEC, "sece")
    assert sece(**META_PARAMS).item() == pytest.approx(0.418082, abs=1e-5)
    assert sece(**{**META_PARAMS, "include_self": False}).item() == pytest.approx(
        0.581326, abs=1e-5
    )
    dece = meta_objective(Z_SPEC, Y_SPEC, "dece", **META_PARAMS).item()
    assert dece == pytest.approx(0.322067, abs=1e-5)
    probs = torch.softmax(Z_SPEC.double(), 1).numpy()
    ce = -np.log(probs[np.arange(4), Y_SPEC.numpy()]).mean()
    assert meta_objective(Z_SPEC, Y_SPEC, "ce_dece", **META_PARAMS).item() == pytest.approx(
        ce + 0.5 * 0.322067, abs=1e-5
    )


def test_meta_objective_smooths_the_accuracy_it_is_given():
    # SPEC batch at t_a = 10: soft accuracies (0.982134, 0, 0.999647, 0.330726), each
    # sample alone within the kernel's reach, so SECE = mean |a_i - r_i|
    soft = meta_objective(
        Z_SPEC, Y_SPEC, "sece", **{**META_PARAMS, "accuracy": "soft", "t_a": 10.0}
    )
    assert soft.item() == pytest.approx(0.270432, abs=1e-6)


def test_meta_objectives_pass_their_parameters():
    wide = meta_objective(Z_SPEC, Y_SPEC, "sece", **{**META_PARAMS, "bandwidth": 10.0})
    # a very wide kernel averages the accuracy over the batch: |0.75 - r_i| on average
    r = torch.softmax(Z_SPEC, 1).max(1).values
    assert wide.item() == pytest.approx((0.75 - r).abs().mean().item(), abs=1e-4)
    coarse = meta_objective(Z_SPEC, Y_SPEC, "dece", **{**META_PARAMS, "n_bins": 1, "t_a": 1e4})
    # one bin: |mean accuracy - mean confidence|
    assert coarse.item() == pytest.approx(abs(0.75 - r.mean().item()), abs=1e-4)


# ------------------------------------------------------------------ the gamma-Net


@pytest.mark.parametrize("d, k", [(64, 10), (3, 10), (1, 2)])
@pytest.mark.parametrize("scale", [0.1, 1.0, 30.0])
def test_gamma_net_starts_at_gamma_one(d, k, scale):
    torch.manual_seed(d + k)
    net = GammaNet(d, k, tau=0.01)
    features = scale * torch.randn(50, d).relu()
    gamma = net(features)
    assert gamma.shape == (50,)
    torch.testing.assert_close(gamma, torch.ones(50), atol=1e-3 * max(1.0, scale), rtol=0)


def test_gamma_net_formula():
    torch.manual_seed(0)
    net = GammaNet(5, 3, tau=0.1)
    with torch.no_grad():
        net.attention.normal_()
        net.weight.normal_()
    x = torch.randn(7, 5)
    A, W = net.attention.detach().double(), net.weight.detach().double()
    s = torch.softmax(x.double() @ A, 1)
    expected = ((s @ A.T) @ W).abs() / 0.1
    torch.testing.assert_close(net(x).double(), expected, rtol=1e-5, atol=1e-6)


def test_elementwise_l2_penalty_and_projection():
    head = nn.Linear(3, 2)
    l2 = ElementwiseL2(tuple(head.weight.shape), tuple(head.bias.shape))
    assert l2(head.weight, head.bias).item() == 0.0
    with torch.no_grad():
        l2.weight_coef.fill_(2.0)
        l2.bias_coef.copy_(torch.tensor([-1.0, 0.5]))
    expected = 2.0 * head.weight.square().sum() - head.bias[0] ** 2 + 0.5 * head.bias[1] ** 2
    torch.testing.assert_close(l2(head.weight, head.bias), expected)
    l2.project_()
    assert l2.bias_coef.tolist() == [0.0, 0.5]
    assert l2.matches(head) and not l2.matches(nn.Linear(3, 4))


# ------------------------------------------------------------------ the meta step


def _toy_problem(seed=0, d=16, k=4, n=256):
    """Two batches of four Gaussian classes and an overconfident head for them."""
    generator = torch.Generator().manual_seed(seed)
    centers = 1.5 * torch.randn(k, d, generator=generator)

    def batch():
        y = torch.randint(0, k, (n,), generator=generator)
        return (centers[y] + torch.randn(n, d, generator=generator)).relu(), y

    head = nn.Linear(d, k)
    with torch.no_grad():
        head.weight.copy_(centers.relu())
        head.bias.copy_(0.1 * torch.randn(k, generator=generator))
    return batch(), batch(), head


def _setup(kind, meta_loss):
    batch, meta_batch, head = _toy_problem()
    torch.manual_seed(1)
    regularizer = build_regularizer(kind, head, tau=0.01)
    optimizer = torch.optim.Adam(regularizer.parameters(), lr=1e-3)
    loss = FocalLoss(gamma=1.0) if kind == "gamma_net" else CrossEntropy()
    objective = partial(meta_objective, meta_loss=meta_loss, **META_PARAMS)
    step = partial(meta_step, regularizer, optimizer, loss, objective, batch, meta_batch, head)
    return regularizer, head, step


@pytest.mark.parametrize("kind, meta_loss", COMBINATIONS)
def test_one_meta_step_gives_finite_nonzero_gradients(kind, meta_loss):
    regularizer, head, step = _setup(kind, meta_loss)
    before = [p.detach().clone() for p in regularizer.parameters()]
    head_before = [p.detach().clone() for p in head.parameters()]
    step(0.5)
    for param in regularizer.parameters():
        assert param.grad is not None
        assert torch.isfinite(param.grad).all()
        assert param.grad.abs().sum() > 0
    after = list(regularizer.parameters())
    assert any(not torch.equal(p.detach(), old) for p, old in zip(after, before, strict=True))
    if kind == "l2":
        assert all(p.min() >= 0 for p in after)
    for param, old in zip(head.parameters(), head_before, strict=True):
        assert param.grad is None
        assert torch.equal(param.detach(), old)


@pytest.mark.parametrize("kind, meta_loss", COMBINATIONS)
def test_meta_steps_lower_the_meta_loss_on_a_fixed_batch(kind, meta_loss):
    _, _, step = _setup(kind, meta_loss)
    losses = [step(0.5).item() for _ in range(21)]
    assert losses[-1] < 0.98 * losses[0], losses


def test_virtual_step_learning_rate_scales_the_meta_gradient():
    grads = []
    for lr in (0.0, 0.5):
        regularizer, _, step = _setup("gamma_net", "sece")
        step(lr)
        grads.append(regularizer.weight.grad.abs().sum().item())
    assert grads[0] == 0.0 and grads[1] > 0.0


def _bilevel_objective(kind, params, batch, meta_batch, head, lr, objective, tau=0.01):
    """``L_meta(theta - lr * grad_theta L_train(theta, phi))`` written out from its definition.

    theta is the head ``(W, b)``; phi are the regulariser's parameters ``params``. The
    gamma-Net (``gamma = |softmax(x A) A^T w| / tau``) and the focal loss
    ``-(1 - p_y)^gamma log p_y``, or cross-entropy plus the element-wise L2 penalty, are
    spelled out here instead of taken from the library.
    """
    (features, y), (meta_features, meta_y) = batch, meta_batch
    weight, bias = (p.detach().clone().requires_grad_() for p in (head.weight, head.bias))
    log_p = torch.log_softmax(features @ weight.T + bias, 1)[torch.arange(len(y)), y]
    if kind == "gamma_net":
        attention, w = params
        mixed = torch.softmax(features @ attention, 1) @ attention.T
        gamma = (mixed @ w).abs() / tau
        inner = -((1 - log_p.exp()) ** gamma * log_p).mean()
    else:
        weight_coef, bias_coef = params
        penalty = (weight_coef * weight**2).sum() + (bias_coef * bias**2).sum()
        inner = -log_p.mean() + penalty
    grad_w, grad_b = torch.autograd.grad(inner, (weight, bias))
    logits = meta_features @ (weight - lr * grad_w).T + (bias - lr * grad_b)
    return objective(logits, meta_y)


def _bilevel_parts(kind, head, meta_loss, accuracy):
    """A float64 regulariser of ``head`` away from its start, the training loss, the objective."""
    regularizer = build_regularizer(kind, head, tau=0.01).double()
    with torch.no_grad():  # away from the initialisation, where every gamma is 1
        for param in regularizer.parameters():
            noise = torch.randn_like(param) if kind == "gamma_net" else torch.rand_like(param)
            param.add_((3e-2 if kind == "gamma_net" else 1e-3) * noise)
    loss = FocalLoss(gamma=1.0) if kind == "gamma_net" else CrossEntropy()
    objective = partial(
        meta_objective, meta_loss=meta_loss, **{**META_PARAMS, "accuracy": accuracy}
    )
    return regularizer, loss, objective


@pytest.mark.parametrize(
    "kind, meta_loss, accuracy",
    [
        *((kind, loss, "hard") for kind, loss in COMBINATIONS),
        *((kind, "sece", "soft") for kind in ("gamma_net", "l2")),
    ],
)
@pytest.mark.slow
def test_hypergradient_matches_finite_differences_of_the_bilevel_objective(
    kind, meta_loss, accuracy
):
    # The regulariser's gradient that meta_step computes (virtual head step kept in the
    # graph) against central differences of phi -> L_meta(theta - lr grad L_train(theta,
    # gamma_phi)), in float64, with the paper's SECE bandwidth 0.01 (hard or all-pairs soft
    # accuracy) and DECE temperatures.
    (features, y), (meta_features, meta_y), head = _toy_problem(d=5, k=3, n=24)
    head = head.double()
    batch, meta_batch = (features.double(), y), (meta_features.double(), meta_y)
    torch.manual_seed(2)
    regularizer, loss, objective = _bilevel_parts(kind, head, meta_loss, accuracy)
    frozen = torch.optim.SGD(regularizer.parameters(), lr=0.0)
    meta_step(regularizer, frozen, loss, objective, batch, meta_batch, head, 0.5)
    if kind == "gamma_net":
        gamma = regularizer(features.double())
        assert gamma.std() > 0.05 and gamma.min() > 0.3
    _assert_gradient_matches_central_differences(
        regularizer,
        lambda phi: _bilevel_objective(kind, phi, batch, meta_batch, head, 0.5, objective),
    )


def _assert_gradient_matches_central_differences(regularizer, bilevel):
    """The regulariser's ``.grad`` against central differences (step 1e-6) of ``bilevel``."""
    phi = [p.detach().clone() for p in regularizer.parameters()]
    for index, param in enumerate(phi):
        numeric = torch.zeros_like(param)
        for i in range(param.numel()):
            values = []
            for step in (1e-6, -1e-6):
                shifted = [p.clone() for p in phi]
                shifted[index].view(-1)[i] += step
                values.append(bilevel(shifted))
            numeric.view(-1)[i] = (values[0] - values[1]) / 2e-6
        analytic = list(regularizer.parameters())[index].grad
        error = (analytic - numeric).norm() / numeric.norm()
        assert error < 1e-5, (index, error.item())
        assert numeric.abs().max() > 1e-4


class _TwoLayer(nn.Module):
    """``features``: linear + batch norm + tanh; ``head``: linear (the zoo's protocol)."""

    def __init__(self, d, hidden, k):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(d, hidden), nn.BatchNorm1d(hidden), nn.Tanh())
        self.head = nn.Linear(hidden, k)

    def forward(self, x):
        return self.head(self.features(x))


def _network_problem(kind, meta_loss, accuracy="soft"):
    """A float64 two-layer network, a regulariser away from its start, and two batches."""
    (X, y), (X_meta, y_meta), _ = _toy_problem(d=5, k=3, n=24)
    torch.manual_seed(3)
    network = _TwoLayer(5, 4, 3).double()
    with torch.no_grad():
        network.head.weight.mul_(4.0)
    regularizer, loss, objective = _bilevel_parts(kind, network.head, meta_loss, accuracy)
    return network, regularizer, loss, objective, (X.double(), y), (X_meta.double(), y_meta)


def _network_bilevel_objective(kind, phi, network, batch, meta_batch, lr, objective, tau=0.01):
    """``L_meta(theta - lr grad_theta L_train(theta, phi))`` with theta every network weight.

    The network (linear, batch norm in training mode with its affine parameters, tanh,
    linear), the gamma-Net and the losses are written out here, not taken from the library.
    """
    (X, y), (X_meta, meta_y) = batch, meta_batch
    theta = [p.detach().clone().requires_grad_() for p in network.parameters()]

    def forward(weights, inputs):
        w1, b1, scale, shift, w2, b2 = weights
        hidden = inputs @ w1.T + b1
        mean, var = hidden.mean(0), hidden.var(0, unbiased=False)
        features = torch.tanh((hidden - mean) / torch.sqrt(var + 1e-5) * scale + shift)
        return features, features @ w2.T + b2

    features, logits = forward(theta, X)
    log_p = torch.log_softmax(logits, 1)[torch.arange(len(y)), y]
    if kind == "gamma_net":
        attention, w = phi
        features = features.detach()
        gamma = ((torch.softmax(features @ attention, 1) @ attention.T) @ w).abs() / tau
        inner = -((1 - log_p.exp()) ** gamma * log_p).mean()
    else:
        weight_coef, bias_coef = phi
        inner = (
            -log_p.mean() + (weight_coef * theta[4] ** 2).sum() + (bias_coef * theta[5] ** 2).sum()
        )
    grads = torch.autograd.grad(inner, theta)
    return objective(
        forward([t - lr * g for t, g in zip(theta, grads, strict=True)], X_meta)[1], meta_y
    )


@pytest.mark.parametrize(
    "kind, meta_loss, accuracy",
    [
        ("gamma_net", "sece", "soft"),
        ("gamma_net", "sece", "hard"),
        ("gamma_net", "dece", "soft"),
        ("l2", "sece", "soft"),
    ],
)
def test_network_hypergradient_matches_finite_differences(kind, meta_loss, accuracy):
    # The virtual step of every weight (batch norm included) against central differences of
    # the bilevel objective written out, float64
    network, regularizer, loss, objective, batch, meta_batch = _network_problem(
        kind, meta_loss, accuracy
    )
    state = {k: v.clone() for k, v in network.state_dict().items()}
    frozen = torch.optim.SGD(regularizer.parameters(), lr=0.0)
    network_meta_step(regularizer, frozen, loss, objective, network, batch, meta_batch, 0.5)
    for key, value in network.state_dict().items():  # weights and running statistics kept
        assert torch.equal(value, state[key]), key
    assert all(p.grad is None for p in network.parameters())
    _assert_gradient_matches_central_differences(
        regularizer,
        lambda phi: _network_bilevel_objective(
            kind, phi, network, batch, meta_batch, 0.5, objective
        ),
    )


def test_network_step_of_a_frozen_backbone_is_the_head_step():
    # with the features' weights frozen only the head takes the virtual step: the same
    # regulariser gradient as meta_step on the detached features
    network, regularizer, loss, objective, batch, meta_batch = _network_problem("gamma_net", "sece")
    network.eval()  # batch norm with running statistics: features independent of the batch
    network.features.requires_grad_(False)
    frozen = torch.optim.SGD(regularizer.parameters(), lr=0.0)
    network_meta_step(regularizer, frozen, loss, objective, network, batch, meta_batch, 0.5)
    whole = [p.grad.clone() for p in regularizer.parameters()]
    with torch.no_grad():
        features = (network.features(batch[0]), batch[1])
        meta_features = (network.features(meta_batch[0]), meta_batch[1])
    meta_step(regularizer, frozen, loss, objective, features, meta_features, network.head, 0.5)
    for grad, param in zip(whole, regularizer.parameters(), strict=True):
        torch.testing.assert_close(param.grad, grad, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("d, k, scale", [(16, 4, 1.0), (64, 10, 10.0)])
def test_lr_scale_makes_the_meta_step_a_step_in_gamma(d, k, scale):
    # One Adam step of learning rate delta * lr_scale() changes every sample's gamma by at
    # most about delta, whatever d and the feature scale (ResNet-20: d = 64, |x| ~ 14).
    # Adam's learning rate used directly moved gamma by ~1 per step at d = 64, which made
    # gamma random-walk to ~34 in 1720 steps.
    (features, y), meta_batch, head = _toy_problem(d=d, k=k)
    features = scale * features
    torch.manual_seed(1)
    net = GammaNet(d, k, tau=0.01)
    delta = 0.01
    optimizer = torch.optim.Adam(net.parameters(), lr=delta * net.lr_scale())
    objective = partial(meta_objective, meta_loss="sece", **META_PARAMS)
    before = net(features).detach()
    meta_step(net, optimizer, FocalLoss(gamma=1.0), objective, (features, y), meta_batch, head, 0.5)
    change = (net(features).detach() - before).abs().max().item()
    assert 0.3 * delta < change <= 1.05 * delta
    l2 = ElementwiseL2((k, d), (k,))
    assert l2.lr_scale() == 1.0


def test_meta_batches_cycle_through_a_permutation():
    X = np.arange(10, dtype=np.float32).reshape(10, 1)
    y = np.arange(10) % 2
    torch.manual_seed(0)
    batches = MetaBatches(X, y, torch.device("cpu"), batch_size=4)
    seen = torch.cat([batches.next_batch()[0].flatten() for _ in range(5)])
    order = X[batches.order.numpy(), 0]
    np.testing.assert_array_equal(seen.numpy(), np.tile(order, 2))
    batches.record(torch.tensor(2.0))
    batches.shuffle()
    assert batches.loss_sum.item() == 0.0
    assert sorted(batches.order.tolist()) == list(range(10))
    small = MetaBatches(X[:3], y[:3], torch.device("cpu"), batch_size=4)
    assert small.next_batch()[0].shape == (3, 1)


# ------------------------------------------------------------------ the lookahead

#: The head step of earlier versions: the net's mean loss at its current learning rate.
FORMER_HEAD_STEP = Lookahead("head", loss="mean", meta_batch_size=None)


class _FirstStep(Callback):
    """The head's displacement by the first real step, and the gradient norm before it."""

    def on_batch_begin(self, net, batch=None, training=False, **kwargs):
        if training and not hasattr(self, "real"):
            self.before = net.module_.head.weight.detach().clone()

    def on_grad_computed(self, net, named_parameters, **kwargs):
        if not hasattr(self, "norm"):
            grads = [p.grad.flatten() for _, p in named_parameters if p.grad is not None]
            self.norm = torch.cat(grads).norm().item()

    def on_batch_end(self, net, batch=None, training=False, **kwargs):
        if training and not hasattr(self, "real"):
            self.real = net.module_.head.weight.detach() - self.before


def _first_displacements(digits, monkeypatch, sample_weight=None, **params):
    """The head's virtual and real displacements in a fit's first step, and the gradient norm.

    Plain SGD (no momentum, no weight decay) at a constant learning rate, and a regulariser
    that cannot move (Adam's learning rate 1e-12), so the real step follows the gradient
    the virtual step took.
    """
    virtual, original = [], meta_step_module.virtual_params

    def recorded(loss, params, lr):
        stepped = original(loss, params, lr)
        name = "weight" if "weight" in params else "network.head.weight"
        virtual.append((stepped[name] - params[name]).detach())
        return stepped

    monkeypatch.setattr(meta_step_module, "virtual_params", recorded)
    first = _FirstStep()
    X, y = digits[0][:640], digits[2][:640]
    small_meta(
        optimizer="sgd",
        lr=0.05,
        max_epochs=1,
        meta_optimizer__lr=1e-12,
        callbacks=[first],
        **params,
    ).fit(X, y, sample_weight=None if sample_weight is None else sample_weight(y))
    return virtual[0], first.real, first.norm


@pytest.mark.parametrize("regularizer", ["gamma_net", "l2"])
@pytest.mark.parametrize("lookahead", ["bohdal2021", "network_tuned"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_virtual_displacement_against_the_real_step(
    digits, monkeypatch, regularizer, lookahead, reduction
):
    # Bohdal et al.'s step moves the head by lr * grad(summed loss), unclipped, in every
    # recipe; the tuned step moves every weight by 20 lr * grad(mean loss). Against the real
    # step: under the mean loss that is B (the batch size) and 20 times lr * grad(mean loss);
    # under the summed loss clipped to norm 2, the real step is lr * grad(summed loss) *
    # min(1, 2 / |grad|). Earlier versions stepped the recipe's loss at 20 lr, B times too
    # far under the summed loss (529 times the real step on a wider MLP).
    recipe = {"loss_reduction": "sum", "grad_clip": 2.0} if reduction == "sum" else {}
    virtual, real, norm = _first_displacements(
        digits, monkeypatch, regularizer=regularizer, lookahead=lookahead, **recipe
    )
    batch_size = 64
    clip = min(1.0, 2.0 / (norm + 1e-6)) if reduction == "sum" else 1.0
    per_unit = batch_size if reduction == "mean" else 1.0 / clip  # virtual / real, Bohdal's
    ratio = per_unit if lookahead == "bohdal2021" else 20.0 * per_unit / batch_size
    if reduction == "sum":
        assert clip < 0.5  # the summed loss's gradient is clipped
    # the real displacement is a difference of float32 weights: compared as a whole
    error = (virtual - ratio * real).norm() / virtual.norm()
    assert error < 1e-4, (error.item(), ratio)


@pytest.mark.parametrize("scale", [1.0, 3.0])
def test_weighted_mean_loss_takes_the_batch_size_times_the_real_step(digits, monkeypatch, scale):
    # the summed loss of a weighted mean is the batch size (not the weights' sum) times
    # it: weights scaled by a constant change neither the real step nor the virtual one
    virtual, real, _ = _first_displacements(
        digits, monkeypatch, sample_weight=lambda y: scale * (1.0 + (y == 3))
    )
    error = (virtual - 64 * real).norm() / virtual.norm()
    assert error < 1e-4, error.item()


def test_lookaheads_name_bohdals_step_and_the_tuned_one():
    assert LOOKAHEADS == {
        "bohdal2021": Lookahead("head", loss="sum", lr_scale=1.0, lr=None, meta_batch_size=None),
        "network_tuned": Lookahead("network", loss="mean", lr_scale=20.0, meta_batch_size=512),
    }
    assert small_meta().get_params()["lookahead"] == "bohdal2021"
    bohdal, tuned = LOOKAHEADS["bohdal2021"], LOOKAHEADS["network_tuned"]
    assert bohdal.step_size(0.1, "sum", 128) == 0.1
    assert bohdal.step_size(0.1, "mean", 128) == pytest.approx(12.8)
    assert tuned.step_size(0.1, "mean", 128) == pytest.approx(2.0)
    assert tuned.step_size(0.1, "sum", 128) == pytest.approx(2.0 / 128)
    assert Lookahead(lr=0.3).step_size(0.1, "sum", 128) == 0.3
    assert (bohdal.meta_batch(128), tuned.meta_batch(128)) == (128, 512)


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"parameters": "backbone"}, "Lookahead.parameters"),
        ({"loss": "median"}, "Lookahead.loss"),
        ({"lr_scale": 0.0}, "Lookahead.lr_scale"),
        ({"lr": float("nan")}, "Lookahead.lr"),
        ({"meta_batch_size": 0}, "Lookahead.meta_batch_size"),
        ({"meta_batch_size": 8.5}, "Lookahead.meta_batch_size"),
        ({"meta_batch_size": True}, "Lookahead.meta_batch_size"),
    ],
)
def test_bad_lookaheads_raise(fields, match):
    with pytest.raises(ValueError, match=match):
        Lookahead(**fields)


def test_deprecated_virtual_step_parameters_warn_and_mean_what_they_meant(digits):
    X, y = digits[0][:400], digits[2][:400]
    former = {"virtual_step": "head", "virtual_lr_scale": 1.0, "meta_batch_size": None}
    with pytest.warns(FutureWarning, match="virtual_step.*lookahead=Lookahead"):
        deprecated = small_meta(max_epochs=2, **former).fit(X, y)
    assert deprecated._resolved_lookahead() == FORMER_HEAD_STEP
    spelled = small_meta(max_epochs=2, lookahead=FORMER_HEAD_STEP).fit(X, y)
    assert deprecated.history[:, "gamma_mean"] == spelled.history[:, "gamma_mean"]
    # the former defaults fill what is not given; the loss is the one the net reduces
    summed = small_meta(virtual_lr=0.1, loss_reduction="sum")._resolved_lookahead()
    assert summed == Lookahead("network", loss="sum", lr_scale=20.0, lr=0.1, meta_batch_size=512)
    with pytest.raises(ValueError, match="either `lookahead` or the deprecated"):
        small_meta(lookahead="network_tuned", virtual_step="head").fit(X, y)


def test_a_pickle_with_the_former_parameters_loads_with_their_lookahead(digits):
    X, y = digits[0][:300], digits[2][:300]
    net = small_meta(max_epochs=1).fit(X, y)
    state = net.__getstate__()
    del state["lookahead"]
    state.update(virtual_step="head", virtual_lr=None, virtual_lr_scale=3.0, meta_batch_size=None)
    loaded = MetaNetClassifier.__new__(MetaNetClassifier)
    loaded.__setstate__(state)
    assert loaded.lookahead == Lookahead("head", loss="mean", lr_scale=3.0)
    assert loaded.get_params()["virtual_step"] == "deprecated"
    np.testing.assert_array_equal(loaded.predict_proba(X), net.predict_proba(X))


# ------------------------------------------------------------------ the split


@pytest.mark.parametrize("n_holdout", [1, 7, 30])
def test_stratified_holdout(n_holdout):
    y = np.repeat([0, 1, 2, 3], [50, 20, 9, 1])
    holdout, rest = _stratified_holdout(y, n_holdout, np.random.default_rng(0))
    assert len(holdout) == n_holdout
    np.testing.assert_array_equal(np.sort(np.concatenate([holdout, rest])), np.arange(80))
    counts = np.bincount(y[holdout], minlength=4)
    assert np.all(np.abs(counts - n_holdout * np.bincount(y) / 80) < 1)
    again, _ = _stratified_holdout(y, n_holdout, np.random.default_rng(0))
    np.testing.assert_array_equal(holdout, again)


def test_fit_splits_8_1_1(digits):
    X_train, _, y_train, _ = digits
    net = small_meta(max_epochs=1).fit(X_train, y_train)
    n = len(X_train)
    n_meta = n_valid = round(0.1 * n)
    epoch = net.history[-1]
    assert sum(b.get("train_batch_size", 0) for b in epoch["batches"]) == n - n_meta - n_valid
    assert sum(b.get("valid_batch_size", 0) for b in epoch["batches"]) == (n_valid)


class _SeenParts(Callback):
    """Records the parts a callback receives."""

    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None, **kwargs):
        self.parts = (dataset_train, dataset_valid, kwargs)


def test_the_meta_batches_belong_to_the_run_not_to_the_datasets(digits):
    # The training part carried the meta-validation batches on the device (a dataset
    # subclass with a cursor and a loss sum), and callbacks received it as dataset_train
    X_train, _, y_train, _ = digits
    seen = _SeenParts()
    net = small_meta(max_epochs=1, callbacks=[seen]).fit(X_train, y_train)
    dataset_train, dataset_valid, kwargs = seen.parts
    assert type(dataset_train) is type(dataset_valid) and kwargs == {}
    assert not hasattr(dataset_train, "meta_batches")
    n, n_meta = len(X_train), round(0.1 * len(X_train))
    train, valid = net.get_split_datasets(X_train, y_train)  # outside a run
    assert (len(train), len(valid)) == (len(dataset_train), len(dataset_valid))
    assert len(train) + len(valid) == n - n_meta


# ------------------------------------------------------------------ the estimator


@pytest.mark.parametrize("regularizer, meta_loss", COMBINATIONS)
@pytest.mark.slow
def test_all_four_methods_fit_digits(digits, regularizer, meta_loss):
    X_train, X_test, y_train, y_test = digits
    net = small_meta(regularizer=regularizer, meta_loss=meta_loss).fit(X_train, y_train)
    proba = net.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-5)
    assert net.score(X_test, y_test) > 0.85
    history = net.history
    assert np.isfinite(history[:, "meta_loss"]).all()
    keys = ("gamma_mean", "gamma_std") if regularizer == "gamma_net" else ("l2_mean", "l2_std")
    for key in keys:
        values = np.asarray(history[:, key])
        assert values.shape == (4,) and np.isfinite(values).all()
    if regularizer == "l2":
        coefs = torch.cat([p.detach().flatten() for p in net.meta_regularizer_.parameters()])
        assert coefs.min() >= 0 and coefs.max() > 0
        assert history[-1, "l2_mean"] == pytest.approx(coefs.mean().item(), rel=1e-5)
        assert type(net.criterion_).__name__ == "CrossEntropy"
    else:
        assert isinstance(net.criterion_, FocalLoss) and net.criterion_.gamma == 1.0


@pytest.mark.slow
def test_gammas_after_training_are_positive_and_varied(fitted, digits):
    _, X_test, _, _ = digits
    gamma = fitted.sample_gamma(X_test)
    assert gamma.shape == (len(X_test),) and gamma.dtype == np.float32
    assert np.all(gamma > 0) and np.all(np.isfinite(gamma))
    assert gamma.std() > 1e-3
    assert np.all(np.asarray(fitted.history[:, "gamma_std"]) > 0)
    assert np.all(np.asarray(fitted.history[:, "gamma_mean"]) > 0)


@pytest.mark.slow
def test_learned_gamma_stays_sensible_and_calibrates_like_focal_loss(digits):
    # Regression test for a meta step that moved gamma by ~1 per Adam step: gamma then
    # random-walked to 5-12 within these 340 steps and the test ECE tripled (0.17 vs 0.05).
    X_train, X_test, y_train, y_test = digits
    params = {
        "module__hidden_units": (32,),
        "optimizer": "sgd",
        "lr": 0.05,
        "optimizer__momentum": 0.9,
        "batch_size": 32,
        "max_epochs": 10,
        "random_state": 0,
    }
    focal = NetClassifier(criterion="focal", criterion__gamma=1.0, train_split=0.2, **params)
    meta = MetaNetClassifier(**params)
    scores = {}
    for name, net in (("focal", focal), ("meta", meta)):
        proba = net.fit(X_train, y_train).predict_proba(X_test)
        accuracy = (proba.argmax(1) == y_test).mean()
        scores[name] = (accuracy, expected_calibration_error(y_test, proba))
    gamma = meta.sample_gamma(X_test)
    assert 0.5 < gamma.min() and gamma.max() < 2.0
    assert np.all(np.abs(np.asarray(meta.history[:, "gamma_mean"]) - 1.0) < 0.5)
    assert scores["meta"][1] < scores["focal"][1] + 0.03, scores
    assert scores["meta"][0] > scores["focal"][0] - 0.03, scores
    assert meta.history[-1, "meta_loss"] < meta.history[0, "meta_loss"]


@pytest.mark.slow
def test_gamma_net_raises_gamma_where_noisy_labels_make_the_network_overconfident():
    # A small positive control (benchmarks/scripts/gamma_control.py, scaled down): memorising 20 %
    # of random labels makes the network overconfident late in training, so focal loss
    # with gamma 3 is far better calibrated than with gamma 1. The tuned whole-network
    # virtual step raises the mean gamma; the head-only step on the mean loss at the
    # network's learning rate kept it near 1 (measured: 1.14; the tuned step: 1.85).
    X, y = make_classification(
        n_samples=2000,
        n_features=20,
        n_informative=10,
        n_redundant=0,
        n_classes=4,
        n_clusters_per_class=2,
        flip_y=0.2,
        random_state=0,
    )
    X = ((X - X.mean(0)) / X.std(0)).astype(np.float32)
    X_val, y_val, X, y = X[1600:], y[1600:], X[:1600], y[:1600]
    common = {
        "module__hidden_units": (64, 64),
        "optimizer": "sgd",
        "optimizer__momentum": 0.9,
        "lr": 0.05,
        "max_epochs": 30,
        "random_state": 0,
    }
    ece = {}
    for gamma in (1.0, 3.0):
        net = NetClassifier(criterion="focal", criterion__gamma=gamma, **common).fit(X, y)
        ece[gamma] = expected_calibration_error(y_val, net.predict_proba(X_val))
    assert ece[3.0] < 0.5 * ece[1.0], ece
    gammas = {}
    for name, lookahead in (("network", "network_tuned"), ("head", FORMER_HEAD_STEP)):
        net = MetaNetClassifier(train_split=None, lookahead=lookahead, **common).fit(X, y)
        gammas[name] = net.history[-1, "gamma_mean"]
    assert gammas["network"] > 1.5 and gammas["network"] > gammas["head"] + 0.5, gammas


@pytest.mark.slow
def test_meta_batch_size_sets_the_meta_batches(digits, monkeypatch):
    sizes = []

    class Recorded(MetaBatches):
        def __init__(self, X, y, device, batch_size):
            super().__init__(X, y, device, batch_size)
            sizes.append(self.size)

    monkeypatch.setattr(meta_module, "MetaBatches", Recorded)
    X, y = digits[0], digits[2]
    for size in (None, 16, 512):
        small_meta(max_epochs=1, lookahead=Lookahead(meta_batch_size=size)).fit(X, y)
    # None: batch_size (64); at most the 135 meta-validation samples (10 % of 1347)
    assert sizes == [64, 16, 135]


@pytest.mark.slow
def test_default_gamma_moves_and_spreads(digits):
    # At the former default (a step of 1e-3 of gamma) gamma stayed within 0.005
    # of 1 with a standard deviation below 0.001; the default meta step must move it
    # (measured with the hard SECE; the soft one's meta-gradient is smaller here)
    X_train, _, y_train, _ = digits
    histories = []
    for _ in range(2):
        net = MetaNetClassifier(max_epochs=10, batch_size=64, random_state=0, sece_accuracy="hard")
        histories.append(net.fit(X_train, y_train).history)
    std, mean = np.asarray(histories[0][:, "gamma_std"]), histories[0][:, "gamma_mean"]
    assert std[-1] > 1e-2 and std[-1] > 5 * std[0], std
    assert np.ptp(mean) > 0.05 and np.all(np.asarray(mean) < 3), mean
    for key in ("gamma_mean", "gamma_std", "meta_loss"):
        assert histories[0][:, key] == histories[1][:, key]


@pytest.mark.slow
def test_meta_regularizer_has_gradients_after_fit(fitted):
    for param in fitted.meta_regularizer_.parameters():
        assert torch.isfinite(param.grad).all() and param.grad.abs().sum() > 0
    for param in fitted.module_.parameters():
        assert param.grad is None


def test_history_gamma_statistics_are_those_of_the_validation_part(digits):
    X_train, _, y_train, _ = digits
    record = {}

    def last_tenth(dataset, y):
        n_train = len(dataset) - len(dataset) // 9
        record["X_valid"] = dataset.X[n_train:]
        return Subset(dataset, range(n_train)), Subset(dataset, range(n_train, len(dataset)))

    net = small_meta(max_epochs=2, train_split=last_tenth).fit(X_train, y_train)
    gamma = net.sample_gamma(record["X_valid"])
    assert net.history[-1, "gamma_mean"] == pytest.approx(gamma.mean(), rel=1e-5)
    assert net.history[-1, "gamma_std"] == pytest.approx(gamma.std(), rel=1e-4)


def test_sece_accuracy_reaches_the_meta_objective(digits):
    # the soft accuracy is below the 0/1 correctness of confident correct samples, so the
    # recorded meta losses differ; DECE has its own soft accuracy and ignores the option
    X, y = digits[0][:300], digits[2][:300]
    losses = {
        (meta_loss, accuracy): small_meta(max_epochs=2, meta_loss=meta_loss, sece_accuracy=accuracy)
        .fit(X, y)
        .history[:, "meta_loss"]
        for meta_loss in ("sece", "dece")
        for accuracy in ("soft", "hard")
    }
    assert small_meta().get_params()["sece_accuracy"] == "soft"
    assert losses["sece", "soft"] != pytest.approx(losses["sece", "hard"], rel=1e-3)
    assert losses["dece", "soft"] == losses["dece", "hard"]


def test_partial_fit_continues_the_regularizer(digits):
    X_train, _, y_train, _ = digits
    net = small_meta(max_epochs=1).fit(X_train, y_train)
    regularizer = net.meta_regularizer_
    before = [p.detach().clone() for p in regularizer.parameters()]
    net.partial_fit(X_train, y_train)
    assert net.meta_regularizer_ is regularizer
    assert len(net.history) == 2
    assert any(not torch.equal(p, b) for p, b in zip(regularizer.parameters(), before, strict=True))
    net.fit(X_train, y_train)
    assert net.meta_regularizer_ is not regularizer
    assert len(net.history) == 1


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.slow
def test_pickle_round_trip(fitted, digits, keep):
    _, X_test, _, _ = digits
    fitted.set_params(keep_regularizer=keep)
    try:
        loaded = pickle.loads(pickle.dumps(fitted))
    finally:
        fitted.set_params(keep_regularizer=True)
    np.testing.assert_array_equal(loaded.predict_proba(X_test), fitted.predict_proba(X_test))
    assert isinstance(fitted.meta_regularizer_, GammaNet)
    if keep:
        assert isinstance(loaded.meta_regularizer_, GammaNet)
        np.testing.assert_array_equal(loaded.sample_gamma(X_test), fitted.sample_gamma(X_test))
    else:
        assert loaded.meta_regularizer_ is None and loaded.meta_optimizer_ is None
        with pytest.raises(ValueError, match="gamma-Net"):
            loaded.sample_gamma(X_test)
        buffer = io.BytesIO()
        pickle.dump(loaded, buffer)
        assert len(buffer.getvalue()) < len(pickle.dumps(fitted))


def test_a_new_regularizer_builds_its_default_loss_at_the_next_fit(digits):
    X_train, _, y_train, _ = digits
    X_train, y_train = X_train[:300], y_train[:300]
    net = MetaNetClassifier(max_epochs=1, random_state=0, module__hidden_units=(16,))
    net.fit(X_train, y_train).set_params(regularizer="l2")
    assert isinstance(net.criterion_, FocalLoss)  # kept until the next fit
    net.partial_fit(X_train, y_train)
    assert isinstance(net.criterion_, CrossEntropy) and len(net.history) == 1
    net.set_params(regularizer="gamma_net").partial_fit(X_train, y_train)
    assert isinstance(net.criterion_, FocalLoss) and net.criterion_.gamma == 1.0


@pytest.mark.slow
def test_unpickled_without_regularizer_can_continue(fitted, digits):
    X_train, X_test, y_train, _ = digits
    loaded = pickle.loads(pickle.dumps(fitted.set_params(keep_regularizer=False)))
    fitted.set_params(keep_regularizer=True)
    loaded.set_params(max_epochs=1, keep_regularizer=True).partial_fit(X_train, y_train)
    assert isinstance(loaded.meta_regularizer_, GammaNet)
    assert len(loaded.history) == len(fitted.history) + 1
    assert np.isfinite(loaded.predict_proba(X_test)).all()


@pytest.mark.parametrize(
    "options",
    [
        {"mixup_alpha": 0.4},
        {"loss_reduction": "sum", "grad_clip": 2.0, "lr": 0.001},
        {"recipe": "onecycle", "lr": 0.05},
        {"train_split": None},
        {"regularizer": "l2", "train_split": None, "meta_loss": "ce_dece"},
        {"criterion": "focal_gra", "lookahead": Lookahead(lr=0.1), "include_self": False},
        {"criterion": "inverse_focal", "criterion__gamma": 0.5},
        {"lookahead": "network_tuned"},
        {"lookahead": "network_tuned", "loss_reduction": "sum", "grad_clip": 2.0},
        {"regularizer": "l2", "lookahead": "network_tuned"},
        {"precision": "bf16"},
    ],
)
@pytest.mark.slow
def test_training_options(digits, options):
    X_train, X_test, y_train, _ = digits
    net = small_meta(max_epochs=2, **options).fit(X_train[:600], y_train[:600])
    assert np.isfinite(net.history[:, "train_loss"]).all()
    assert np.isfinite(net.history[:, "meta_loss"]).all()
    np.testing.assert_allclose(net.predict_proba(X_test).sum(1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_image_network_with_batch_norm(digits):
    X_train, X_test, y_train, y_test = digits
    net = small_meta(
        module="cnn", module__channels=(8,), module__hidden_units=0, max_epochs=3, lr=0.03
    ).fit(X_train.reshape(-1, 1, 8, 8), y_train)
    assert net.score(X_test.reshape(-1, 1, 8, 8), y_test) > 0.5
    assert np.isfinite(net.history[:, "gamma_std"]).all()


@pytest.mark.slow
def test_refit_is_identical(digits):
    X_train, X_test, y_train, _ = digits
    first = small_meta(max_epochs=2).fit(X_train, y_train).predict_proba(X_test)
    second = small_meta(max_epochs=2).fit(X_train, y_train).predict_proba(X_test)
    np.testing.assert_array_equal(first, second)


@pytest.mark.slow
def test_meta_optimizer_parameters_route_to_the_regularizers_adam(digits):
    X_train, _, y_train, _ = digits
    X, y = X_train[:400], y_train[:400]
    # meta_lr=None: 1e-2 of gamma per step for the gamma-Net, Adam's 1e-3 for the L2
    default = small_meta(max_epochs=1).fit(X, y)
    expected = 1e-2 * default.meta_regularizer_.lr_scale()
    assert default.meta_optimizer_.param_groups[0]["lr"] == pytest.approx(expected)
    l2 = small_meta(max_epochs=1, regularizer="l2").fit(X, y)
    assert l2.meta_optimizer_.param_groups[0]["lr"] == 1e-3
    chosen = small_meta(max_epochs=1, meta_lr=0.5).fit(X, y)
    expected = 0.5 * chosen.meta_regularizer_.lr_scale()
    assert chosen.meta_optimizer_.param_groups[0]["lr"] == pytest.approx(expected)
    # the paper's literal setting: Adam's learning rate on the gamma-Net's parameters
    net = small_meta(max_epochs=1, meta_optimizer__lr=1e-3, meta_optimizer__betas=(0.5, 0.99))
    assert clone(net).get_params()["meta_optimizer__lr"] == 1e-3
    net.fit(X, y)
    group = net.meta_optimizer_.param_groups[0]
    assert group["lr"] == 1e-3 and tuple(group["betas"]) == (0.5, 0.99)
    # set on a fitted net: stored now, applied by the next (continued) fit
    net.set_params(meta_optimizer__lr=2e-4)
    assert net.get_params()["meta_optimizer__lr"] == 2e-4 and group["lr"] == 1e-3
    before = net.meta_optimizer_.state[net.meta_regularizer_.weight]["step"].item()
    net.partial_fit(X, y)
    assert net.meta_optimizer_.param_groups[0]["lr"] == 2e-4
    assert net.meta_optimizer_.state[net.meta_regularizer_.weight]["step"].item() > before


# ------------------------------------------------------------------ scikit-learn integration


@pytest.mark.slow
def test_grid_search_and_cross_val_score(digits):
    X_train, _, y_train, _ = digits
    X, y = X_train[:500], y_train[:500]
    search = GridSearchCV(
        small_meta(max_epochs=2),
        {"regularizer": ["gamma_net", "l2"], "meta_loss": ["sece"]},
        scoring="neg_log_loss",
        cv=2,
    ).fit(X, y)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert search.best_estimator_.regularizer in ("gamma_net", "l2")
    scores = cross_val_score(small_meta(max_epochs=3, lr=0.03), X, y, cv=3)
    assert scores.shape == (3,) and np.all(scores > 0.5)


@pytest.mark.slow
def test_calibrated_classifier(digits):
    X_train, X_test, y_train, _ = digits
    calibrated = CalibratedClassifier(small_meta(max_epochs=3), calibrator=TemperatureScaling())
    calibrated.fit(X_train, y_train)
    proba = calibrated.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-5)
    assert proba.shape == (len(X_test), 10)


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "params, match",
    [
        ({"regularizer": "dropout"}, "regularizer"),
        ({"meta_loss": "ece"}, "meta_loss"),
        ({"tau": 0.0}, "tau"),
        ({"bandwidth": -1.0}, "bandwidth"),
        ({"sece_accuracy": "binary"}, "sece_accuracy"),
        ({"lookahead": "bohdal"}, "lookahead"),
        ({"lookahead": {"parameters": "head"}}, "lookahead"),
        ({"virtual_step": "backbone"}, "virtual_step"),
        ({"virtual_lr_scale": 0.0}, "virtual_lr_scale"),
        ({"meta_batch_size": 0}, "meta_batch_size"),
        ({"n_bins": 0}, "n_bins"),
        ({"t_a": 0}, "t_a"),
        ({"meta_lr": 0.0}, "meta_lr"),
        ({"meta_optimizer__lr": -1e-3}, "meta_optimizer__lr"),
        ({"meta_optimizer__lr": "1e-3"}, "meta_optimizer__lr"),
        ({"meta_optimzer__lr": 1e-3}, "meta_optimzer__lr"),
        ({"virtual_lr": -0.1}, "virtual_lr"),
        ({"meta_fraction": 1.0}, "meta_fraction"),
        ({"keep_regularizer": "yes"}, "keep_regularizer"),
        ({"train_split": 0.5, "meta_fraction": 0.5}, "train_split \\+ meta_fraction"),
        ({"criterion": "ce"}, "per-sample gamma"),
        ({"criterion": "brier"}, "per-sample gamma"),
    ],
)
def test_bad_parameters_raise(digits, params, match):
    X_train, _, y_train, _ = digits
    with pytest.raises(ValueError, match=match):
        small_meta(**params).fit(X_train[:100], y_train[:100])


@pytest.mark.parametrize(
    "params",
    [
        {"meta_optimizer__lr": -1.0},
        {"meta_optimizer__lr": float("nan")},
        {"meta_optimizer__betas": (1.5, 0.99)},
        {"meta_lr": -1.0},
        {"optimizer__lr": -1.0},
    ],
    ids=repr,
)
@pytest.mark.parametrize("path", ["partial_fit", "fit_loop"])
def test_bad_optimizer_values_never_reach_a_fitted_meta_net(digits, params, path):
    """The values of both optimisers are checked when a fitted net continues."""
    X, y = digits[0][:200], digits[2][:200]
    net = small_meta(max_epochs=1).fit(X, y)
    groups = [
        {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
        for optimizer in (net.optimizer_, net.meta_optimizer_)
    ]
    net.set_params(**params)
    with pytest.raises(ValueError, match=next(iter(params)).split("__")[-1]):
        net.partial_fit(X, y) if path == "partial_fit" else net.fit_loop(X, y, epochs=1)
    after = [
        {k: v for k, v in optimizer.param_groups[0].items() if k != "params"}
        for optimizer in (net.optimizer_, net.meta_optimizer_)
    ]
    assert len(net.history) == 1
    for before, now in zip(groups, after, strict=True):
        assert before.keys() == now.keys()
        for key in before:
            if isinstance(before[key], torch.Tensor):
                assert torch.equal(before[key], now[key]), key
            else:
                assert before[key] == now[key], key


class _NoHead(nn.Module):
    def __init__(self, input_shape, n_classes):
        super().__init__()
        self.layer = nn.Linear(input_shape[0], n_classes)

    def forward(self, x):
        return self.layer(x)


def test_network_without_features_and_head_raises(digits):
    X_train, _, y_train, _ = digits
    with pytest.raises(ValueError, match="`features` module"):
        MetaNetClassifier(_NoHead, max_epochs=1).fit(X_train[:100], y_train[:100])


def test_too_few_samples_raise():
    with pytest.raises(ValueError, match="at least one training sample"):
        MetaNetClassifier(max_epochs=1).fit(np.eye(2, dtype=np.float32), [0, 1])


def test_sample_gamma_needs_the_gamma_net(digits):
    X_train, X_test, y_train, _ = digits
    net = small_meta(regularizer="l2", max_epochs=1).fit(X_train, y_train)
    with pytest.raises(ValueError, match="gamma-Net"):
        net.sample_gamma(X_test)


# ------------------------------------------------------------------ CUDA

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
@pytest.mark.parametrize(
    "regularizer, module, lookahead",
    [
        ("gamma_net", "mlp", "bohdal2021"),
        ("l2", "mlp", "bohdal2021"),
        ("gamma_net", "cnn", "bohdal2021"),
        ("l2", "cnn", "bohdal2021"),
        ("gamma_net", "mlp", "network_tuned"),
    ],
)
def test_cuda_graph_matches_eager(digits, regularizer, module, lookahead):
    X_train, X_test, y_train, y_test = digits
    if module == "cnn":
        X_train, X_test = X_train.reshape(-1, 1, 8, 8), X_test.reshape(-1, 1, 8, 8)
    params = {
        "regularizer": regularizer,
        "module": module,
        "lookahead": lookahead,
        "max_epochs": 8,
        "lr": 0.01,
        "device": "cuda",
    }
    if module == "cnn":
        params["module__hidden_units"] = 32
    graph = small_meta(cuda_graphs=True, **params).fit(X_train, y_train)
    eager = small_meta(cuda_graphs=False, **params).fit(X_train, y_train)
    assert graph.history[:, "cuda_graph"] == [True] * 8
    assert eager.history[:, "cuda_graph"] == [False] * 8
    graph_acc, eager_acc = graph.score(X_test, y_test), eager.score(X_test, y_test)
    assert eager_acc > 0.8, (graph_acc, eager_acc)
    assert abs(graph_acc - eager_acc) <= 0.03, (graph_acc, eager_acc)
    np.testing.assert_allclose(
        graph.history[:, "meta_loss"], eager.history[:, "meta_loss"], rtol=0.2, atol=0.01
    )
    key = "gamma_std" if regularizer == "gamma_net" else "l2_std"
    assert np.isfinite(graph.history[:, key]).all() and graph.history[-1, key] > 0


@cuda
def test_cuda_host_resident_meta_data_runs_eagerly(digits, monkeypatch):
    from sklearn_calib.estimators import _training

    X_train, X_test, y_train, _ = digits
    monkeypatch.setattr(_training, "fits_on_device", lambda nbytes, device: False)
    net = small_meta(max_epochs=2, device="cuda", cuda_graphs="auto").fit(X_train, y_train)
    assert net.history[:, "cuda_graph"] == [False, False]
    assert np.isfinite(net.history[:, "meta_loss"]).all()
    np.testing.assert_allclose(net.predict_proba(X_test).sum(1), 1.0, atol=1e-5)


@cuda
def test_cuda_model_unpickles_and_continues_on_cpu(digits, monkeypatch):
    X_train, X_test, y_train, _ = digits
    net = small_meta(max_epochs=2, device="cuda").fit(X_train, y_train)
    payload = pickle.dumps(net)
    loaded = pickle.loads(payload)
    np.testing.assert_allclose(
        loaded.predict_proba(X_test), net.predict_proba(X_test), rtol=1e-5, atol=1e-6
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cpu = pickle.loads(payload)
    assert cpu.device_.type == "cpu"
    cpu.set_params(max_epochs=1).partial_fit(X_train, y_train)
    assert np.isfinite(cpu.history[-1, "meta_loss"])
