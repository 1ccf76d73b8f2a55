"""Sample and class weights of NetClassifier and MetaNetClassifier: weights equal repetition."""

import numpy as np
import pytest
import sklearn
import torch
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.class_weight import compute_sample_weight
from skorch.callbacks import Callback

from sklearn_calib.estimators import MetaNetClassifier, NetClassifier, WeightedTarget
from sklearn_calib.estimators._gamma_net import ElementwiseL2, GammaNet
from sklearn_calib.estimators._meta_step import meta_objective, meta_step
from sklearn_calib.losses import LOSSES, get_loss

#: Hyperparameters that make each loss differ from cross-entropy on the small problem.
LOSS_PARAMS = {"mmce": {"lam": 1.0}, "lp_norm": {"alpha": 0.05}}


def small_problem(n=30, seed=0):
    """Inputs, labels of 3 classes and integer weights 0-3 (every class keeps weight)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    y = np.arange(n) % 3
    weight = rng.integers(0, 4, size=n)
    weight[:3] = 1
    return X, y, weight


def full_batch_net(**params):
    """Full-batch gradient descent: the batches are the whole data, only their order varies."""
    defaults = {
        "module__hidden_units": (8,),
        "optimizer": "sgd",
        "optimizer__momentum": 0.9,
        "lr": 0.2,
        "max_epochs": 6,
        "batch_size": 1000,
        "random_state": 0,
    }
    return NetClassifier(**{**defaults, **params})


def assert_same_fit(left, right, rtol=1e-4):
    for (name, a), b in zip(
        left.module_.state_dict().items(), right.module_.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=rtol, atol=1e-6, msg=name)
    np.testing.assert_allclose(
        left.history[:, "train_loss"], right.history[:, "train_loss"], rtol=rtol
    )


@pytest.mark.parametrize("loss_reduction", ["mean", "sum"])
@pytest.mark.parametrize("criterion", sorted(LOSSES))
@pytest.mark.slow
def test_integer_weights_equal_repeated_rows(criterion, loss_reduction):
    X, y, weight = small_problem()
    params = {
        "criterion": criterion,
        "loss_reduction": loss_reduction,
        **{f"criterion__{k}": v for k, v in LOSS_PARAMS.get(criterion, {}).items()},
    }
    if loss_reduction == "sum":
        params["lr"] = 0.005
    weighted = full_batch_net(**params).fit(X, y, sample_weight=weight)
    repeated = full_batch_net(**params).fit(np.repeat(X, weight, 0), np.repeat(y, weight))
    assert_same_fit(weighted, repeated)
    unweighted = full_batch_net(**params).fit(X, y)
    assert not np.allclose(unweighted.predict_proba(X), weighted.predict_proba(X), atol=1e-4)


def test_weights_and_mixup_augment_and_validation(digits):
    X_train, _, y_train, _ = digits
    X, y = X_train[:400].reshape(-1, 1, 8, 8), y_train[:400]
    weight = np.random.default_rng(1).integers(1, 4, size=len(y)).astype(float)

    class ValidPart(Callback):
        def on_epoch_end(self, net, dataset_valid=None, **kwargs):
            self.part = dataset_valid

    part = ValidPart()
    net = NetClassifier(
        module__hidden_units=(16,),
        max_epochs=2,
        random_state=0,
        mixup_alpha=0.3,
        augment="flip",
        train_split=0.25,
        iterator_valid__batch_size=1000,
        callbacks=[part],
    ).fit(X, y, sample_weight=weight)
    valid = part.part
    assert valid.weight is not None and len(valid.weight) == 100
    proba = net.predict_proba(valid.X)
    expected = sklearn.metrics.log_loss(
        valid.y, proba, sample_weight=valid.weight, labels=net.classes_
    )
    assert net.history[-1, "valid_loss"] == pytest.approx(expected, rel=1e-5)
    accuracy = sklearn.metrics.accuracy_score(
        valid.y, net.predict(valid.X), sample_weight=valid.weight
    )
    assert net.history[-1, "valid_acc"] == pytest.approx(accuracy, rel=1e-6)


def test_all_weights_one_is_no_weights_and_uniform_weights_change_nothing():
    X, y, _ = small_problem()
    plain = full_batch_net(batch_size=8).fit(X, y)
    ones = full_batch_net(batch_size=8).fit(X, y, sample_weight=np.ones(len(y)))
    twos = full_batch_net(batch_size=8).fit(X, y, sample_weight=np.full(len(y), 2.0))
    np.testing.assert_array_equal(ones.predict_proba(X), plain.predict_proba(X))
    np.testing.assert_array_equal(twos.predict_proba(X), plain.predict_proba(X))


def test_class_weight_balanced_and_dict_are_sample_weights_by_class():
    X, y, weight = small_problem(n=45)
    y = np.where(np.arange(45) < 33, 0, np.where(np.arange(45) < 41, 1, 2))
    labels = np.array(["ham", "spam", "unsure"])[y]
    balanced = full_batch_net(class_weight="balanced").fit(X, labels)
    expected = full_batch_net().fit(X, labels, sample_weight=compute_sample_weight("balanced", y))
    np.testing.assert_array_equal(balanced.predict_proba(X), expected.predict_proba(X))
    mapping = {"spam": 4.0, "unsure": 0.5}
    by_dict = full_batch_net(class_weight=mapping).fit(X, labels, sample_weight=weight)
    scaled = weight * np.array([1.0, 4.0, 0.5])[y]
    expected = full_batch_net().fit(X, labels, sample_weight=scaled)
    np.testing.assert_array_equal(by_dict.predict_proba(X), expected.predict_proba(X))
    with pytest.raises(
        ValueError, match=r"`class_weight` names labels that are not classes: \['eggs'\]"
    ):
        full_batch_net(class_weight={"eggs": 2.0}).fit(X, labels)
    with pytest.raises(ValueError, match="class_weight"):
        full_batch_net(class_weight="balancd").fit(X, labels)


def test_balanced_class_weight_raises_minority_recall_on_imbalanced_data():
    X, y = sklearn.datasets.make_classification(
        n_samples=2100, n_features=10, weights=[20 / 21], class_sep=0.5, random_state=0
    )
    X = X.astype(np.float32)
    params = {"module__hidden_units": (16,), "max_epochs": 10, "random_state": 0}
    recall = {}
    for class_weight in (None, "balanced"):
        net = NetClassifier(class_weight=class_weight, **params).fit(X[:1400], y[:1400])
        recall[class_weight] = sklearn.metrics.recall_score(y[1400:], net.predict(X[1400:]))
    assert recall["balanced"] > recall[None] + 0.2, recall


def test_partial_fit_balances_each_call_by_its_own_labels():
    X, y, _ = small_problem(n=60)
    y = (np.arange(60) < 50).astype(int)
    net = full_batch_net(class_weight="balanced", max_epochs=2).fit(X, y)
    other = full_batch_net(max_epochs=2).fit(
        X, y, sample_weight=compute_sample_weight("balanced", y)
    )
    keep = np.r_[0:20, 50:60]
    net.partial_fit(X[keep], y[keep])
    other.partial_fit(X[keep], y[keep], sample_weight=compute_sample_weight("balanced", y[keep]))
    np.testing.assert_array_equal(net.predict_proba(X), other.predict_proba(X))


def test_bad_weights_raise():
    X, y, weight = small_problem()
    net = full_batch_net(max_epochs=1)
    with pytest.raises(ValueError, match="Negative values in data passed to `sample_weight`"):
        net.fit(X, y, sample_weight=np.where(weight > 0, weight, -1))
    with pytest.raises(ValueError, match="weight.*zero|zero.*weight"):
        net.fit(X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match=r"sample_weight.shape == \(29,\)"):
        net.fit(X, y, sample_weight=weight[:-1])
    with pytest.raises(ValueError, match="NaN"):
        net.fit(X, y, sample_weight=np.where(weight > 0, weight, np.nan))
    with pytest.raises(ValueError, match=r"at least 2 classes with a positive weight, got 1 class"):
        net.fit(X, y, sample_weight=(y == 1).astype(float))
    torch_ce = full_batch_net(criterion=torch.nn.CrossEntropyLoss, max_epochs=1)
    with pytest.raises(ValueError, match="CrossEntropyLoss.*sample_weight"):
        torch_ce.fit(X, y, sample_weight=weight)
    torch_ce.fit(X, y)  # without weights it trains


# ----------------------------------------------------------------- metadata routing


def test_weights_through_a_pipeline_and_cross_val_score():
    X, y, weight = small_problem(n=60)
    X = X * 10 + 3
    scaled = StandardScaler().fit_transform(X)
    expected = full_batch_net().fit(scaled, y, sample_weight=weight).predict_proba(scaled)
    pipe = Pipeline([("scale", StandardScaler()), ("net", full_batch_net())])
    pipe.fit(X, y, net__sample_weight=weight)
    np.testing.assert_allclose(pipe.predict_proba(X), expected, rtol=1e-6)
    with sklearn.config_context(enable_metadata_routing=True):
        routed = Pipeline(
            [
                ("scale", StandardScaler().set_fit_request(sample_weight=False)),
                ("net", full_batch_net().set_fit_request(sample_weight=True)),
            ]
        ).fit(X, y, sample_weight=weight)
        np.testing.assert_allclose(routed.predict_proba(X), expected, rtol=1e-6)
        scores = cross_val_score(
            full_batch_net()
            .set_fit_request(sample_weight=True)
            .set_score_request(sample_weight=False),
            scaled,
            y,
            cv=StratifiedKFold(3),
            params={"sample_weight": weight},
        )
    plain = cross_val_score(
        full_batch_net(), scaled, y, cv=StratifiedKFold(3), params={"sample_weight": weight}
    )
    np.testing.assert_array_equal(scores, plain)
    train, test = next(StratifiedKFold(3).split(scaled, y))
    fold = full_batch_net().fit(scaled[train], y[train], sample_weight=weight[train])
    assert scores[0] == pytest.approx(fold.score(scaled[test], y[test]))
    unweighted = cross_val_score(full_batch_net(), scaled, y, cv=StratifiedKFold(3))
    assert not np.array_equal(unweighted, scores)


# ----------------------------------------------------------------- meta-learned losses


@pytest.mark.parametrize("regularizer_kind", ["gamma_net", "l2"])
@pytest.mark.parametrize("loss_reduction", ["mean", "sum"])
def test_meta_step_with_weights_equals_repeated_rows(regularizer_kind, loss_reduction):
    """The meta-learned losses (focal with learned gamma, CE with learned L2) weigh samples."""
    # the regulariser's and the head's initial weights from a seeded generator, not from
    # whatever state the tests before left torch's global one in
    with torch.random.fork_rng():
        torch.manual_seed(0)
        regularizer = (
            GammaNet(6, 3) if regularizer_kind == "gamma_net" else ElementwiseL2((3, 6), (3,))
        )
        head = torch.nn.Linear(6, 3)
    gen = torch.Generator().manual_seed(0)
    features = torch.randn(10, 6, generator=gen)
    y = torch.arange(10) % 3
    weight = torch.tensor([0, 1, 2, 3, 1, 1, 0, 2, 1, 3], dtype=torch.float32)
    meta = (torch.randn(8, 6, generator=gen), torch.arange(8) % 3)
    net = MetaNetClassifier(
        criterion="focal" if isinstance(regularizer, GammaNet) else "ce",
        loss_reduction=loss_reduction,
    )
    with net._current_init_context("criterion"):
        net.criterion_ = get_loss(net.criterion)
    objective = lambda logits, target: meta_objective(  # noqa: E731
        logits,
        target,
        "sece",
        bandwidth=0.1,
        include_self=True,
        accuracy="soft",
        n_bins=15,
        t_a=100.0,
        t_b=0.01,
    )
    results = []
    for batch in (
        (features, WeightedTarget(y, weight)),
        (features.repeat_interleave(weight.long(), 0), y.repeat_interleave(weight.long())),
    ):
        copy = (
            type(regularizer)(6, 3)
            if isinstance(regularizer, GammaNet)
            else ElementwiseL2((3, 6), (3,))
        )
        copy.load_state_dict(regularizer.state_dict())
        optimizer = torch.optim.SGD(copy.parameters(), lr=0.1)
        loss = meta_step(copy, optimizer, net._training_loss, objective, batch, meta, head, 0.5)
        results.append((loss, [p.detach().clone() for p in copy.parameters()]))
    (loss_w, params_w), (loss_r, params_r) = results
    torch.testing.assert_close(loss_w, loss_r)
    for a, b in zip(params_w, params_r, strict=True):
        torch.testing.assert_close(a, b)


def test_meta_net_takes_sample_and_class_weights(digits):
    X_train, X_test, y_train, _ = digits
    X, y = X_train[:500], y_train[:500]
    params = {"module__hidden_units": (16,), "max_epochs": 2, "random_state": 0}
    plain = MetaNetClassifier(**params).fit(X, y)
    twos = MetaNetClassifier(**params).fit(X, y, sample_weight=np.full(len(y), 2.0))
    np.testing.assert_array_equal(twos.predict_proba(X_test), plain.predict_proba(X_test))
    balanced = MetaNetClassifier(class_weight="balanced", **params).fit(X, y)
    assert not np.array_equal(balanced.predict_proba(X_test), plain.predict_proba(X_test))
    weighted = MetaNetClassifier(**params).fit(X, y, sample_weight=1.0 + (y == 3))
    assert not np.array_equal(weighted.predict_proba(X_test), plain.predict_proba(X_test))
