"""End-to-end tests of NetClassifier on the CPU (small networks, few epochs)."""

import io
import pickle
import re
import warnings

import joblib
import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import (
    GridSearchCV,
    StratifiedKFold,
    cross_val_score,
)
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from skorch.callbacks import Callback, EarlyStopping, EpochScoring, LRScheduler, ProgressBar
from skorch.dataset import Dataset
from skorch.exceptions import DeviceWarning
from skorch.helper import predefined_split
from skorch.utils import data_from_dataset
from torch import nn
from torch.utils.data import Subset

from sklearn_calib import MetaNetClassifier
from sklearn_calib.estimators import (
    RECIPES,
    NetClassifier,
    _cuda_graph,
    _training,
)
from sklearn_calib.estimators._augment import mixup, random_crop, random_flip
from sklearn_calib.estimators._recipes import DEFAULT_LRS, REFERENCE_PAIRING
from sklearn_calib.estimators._run import needs_live_batches
from sklearn_calib.estimators._targets import MixedTarget
from sklearn_calib.estimators.networks import MLP, NETWORKS
from sklearn_calib.scoring import expected_calibration_error, get_scorer, smooth_calibration_error


def small_net(**params):
    defaults = {
        "module__hidden_units": (32,),
        "lr": 0.01,
        "max_epochs": 8,
        "batch_size": 64,
        "random_state": 0,
    }
    return NetClassifier(**{**defaults, **params})


# ----------------------------------------------------------------- scikit-learn API


def test_pipeline_on_digits_reaches_sensible_accuracy(digits):
    X_train, X_test, y_train, y_test = digits
    pipe = Pipeline([("scale", StandardScaler()), ("net", small_net(max_epochs=10))])
    pipe.fit(X_train, y_train)
    assert pipe.score(X_test, y_test) > 0.93
    assert pipe[-1].n_features_in_ == 64
    assert pipe[-1].history[:, "cuda_graph"] == [False] * 10


def test_grid_search_tunes_focal_gamma_by_ece(digits):
    X_train, _, y_train, _ = digits
    X, y = X_train[:600], y_train[:600]
    net = small_net(criterion="focal", max_epochs=3)
    grid = {"criterion__gamma": [1, 3, 5]}
    search = GridSearchCV(net, grid, scoring=get_scorer("neg_ece"), cv=2).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.isfinite(scores).all() and (scores <= 0).all()
    assert len(set(scores)) == 3  # gamma changes the fitted networks and their ECE
    assert search.best_score_ == scores.max()
    gamma = search.best_params_["criterion__gamma"]
    assert search.best_estimator_.criterion_.gamma == gamma
    # the first fold's score of gamma = 5, recomputed: minus the ECE on the held-out fold
    train, test = next(StratifiedKFold(2).split(X, y))
    fold = small_net(criterion="focal", criterion__gamma=5, max_epochs=3).fit(X[train], y[train])
    ece = expected_calibration_error(y[test], fold.predict_proba(X[test]))
    assert search.cv_results_["split0_test_score"][2] == pytest.approx(-ece, abs=1e-6)


def test_cross_val_score_by_smooth_ece(digits):
    X_train, _, y_train, _ = digits
    X, y = X_train[:600], y_train[:600]
    scores = cross_val_score(small_net(max_epochs=4), X, y, cv=3, scoring=get_scorer("neg_sece"))
    assert scores.shape == (3,) and (scores < 0).all()
    train, test = next(StratifiedKFold(3).split(X, y))
    fold = small_net(max_epochs=4).fit(X[train], y[train])
    sece = smooth_calibration_error(y[test], fold.predict_proba(X[test]))
    assert scores[0] == pytest.approx(-sece, abs=1e-6)
    assert fold.score(X[test], y[test]) > 0.8


def test_string_labels(digits):
    X_train, X_test, y_train, y_test = digits
    names = np.array(["zero", "one", "two", "three", "four", "5", "6", "7", "8", "9"])
    net = small_net().fit(X_train, names[y_train])
    assert net.classes_.tolist() == sorted(names.tolist())
    pred = net.predict(X_test)
    assert pred.dtype.kind == "U"
    assert accuracy_score(names[y_test], pred) > 0.9
    np.testing.assert_array_equal(net.classes_[net.predict_proba(X_test).argmax(1)], pred)


def test_unsorted_classes_argument_gives_sorted_classes_and_right_predictions(digits):
    X_train, X_test, y_train, y_test = digits
    names = np.array(list("jihgfedcba"))
    inferred = small_net(max_epochs=3).fit(X_train, names[y_train])
    given = small_net(max_epochs=3, classes=list(names)).fit(X_train, names[y_train])
    assert given.classes_.tolist() == sorted(names.tolist())
    np.testing.assert_array_equal(given.predict_proba(X_test), inferred.predict_proba(X_test))
    np.testing.assert_array_equal(given.predict(X_test), inferred.predict(X_test))
    assert accuracy_score(names[y_test], given.predict(X_test)) > 0.8
    before = [p.detach().clone() for p in given.module_.parameters()]
    inferred.partial_fit(X_train, names[y_train])
    given.partial_fit(X_train, names[y_train])
    np.testing.assert_array_equal(given.predict_proba(X_test), inferred.predict_proba(X_test))
    after = given.module_.parameters()
    assert not all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


@pytest.mark.slow
def test_image_input(digits):
    X_train, X_test, y_train, y_test = digits
    images = X_train.reshape(-1, 1, 8, 8)
    module = "cnn" if "cnn" in NETWORKS else "mlp"
    params = {} if module == "cnn" else {"module__hidden_units": (32,)}
    net = NetClassifier(module=module, lr=0.01, max_epochs=6, batch_size=64, random_state=0)
    net.set_params(**params).fit(images, y_train)
    assert net.input_shape_ == (1, 8, 8)
    assert net.n_features_in_ == 1
    assert net.score(X_test.reshape(-1, 1, 8, 8), y_test) > 0.85
    with pytest.raises(ValueError, match="shape"):
        net.predict(X_test.reshape(-1, 1, 4, 16))


def test_flat_input_to_an_image_net_names_the_shapes(digits):
    X_train, X_test, y_train, _ = digits
    net = small_net(max_epochs=1).fit(X_train.reshape(-1, 1, 8, 8), y_train)
    message = r"Expected samples of shape \(1, 8, 8\) \(as at fit\), got \(64,\)"
    with pytest.raises(ValueError, match=message):
        net.predict(X_test)
    with pytest.raises(ValueError, match=message):
        net.partial_fit(X_train, y_train)
    with pytest.raises(ValueError, match=r"shape \(1, 8, 8\) \(as at fit\), got \(1, 4, 16\)"):
        net.predict(torch.from_numpy(X_test.reshape(-1, 1, 4, 16)))


def test_random_state_refits_identical_and_global_rng_untouched(digits):
    X_train, X_test, y_train, _ = digits
    torch_state = torch.get_rng_state()
    numpy_state = np.random.get_state()
    net = small_net(max_epochs=3, module__dropout=0.2)
    first = net.fit(X_train, y_train).predict_proba(X_test)
    second = net.fit(X_train, y_train).predict_proba(X_test)
    np.testing.assert_array_equal(first, second)
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.array_equal(np.random.get_state()[1], numpy_state[1])
    other = small_net(max_epochs=3, module__dropout=0.2, random_state=1).fit(X_train, y_train)
    assert not np.array_equal(other.predict_proba(X_test), first)


def test_fit_does_not_change_params(digits):
    X_train, _, y_train, _ = digits
    net = small_net(max_epochs=1)
    before = net.get_params(deep=False)
    net.fit(X_train, y_train)
    after = net.get_params(deep=False)
    assert after["device"] == "auto" and net.device_ == torch.device("cpu")
    assert after["lr"] == before["lr"] and after["optimizer"] is None


def test_repr_shows_only_the_parameters_set_as_scikit_learn_prints_estimators(digits):
    # skorch printed "<class '...NetClassifier'>[uninitialized](module=mlp,)", and inside a
    # Pipeline scikit-learn printed skorch's own defaults (iterator_train, dataset, ...)
    assert repr(NetClassifier()) == "NetClassifier()"
    net = NetClassifier(max_epochs=1, module__hidden_units=(8,))
    expected = "NetClassifier(max_epochs=1, module__hidden_units=(8,))"
    assert repr(net) == expected
    assert repr(NetClassifier(dataset=Dataset)) == "NetClassifier()"  # skorch's default
    assert repr(NetClassifier(predict_nonlinearity=None)) == (
        "NetClassifier(predict_nonlinearity=None)"
    )
    X_train, _, y_train, _ = digits
    assert repr(net.fit(X_train[:100], y_train[:100])) == expected
    assert repr(MetaNetClassifier()) == "MetaNetClassifier()"
    assert repr(MetaNetClassifier(lr=0.01, tau=0.1)) == "MetaNetClassifier(lr=0.01, tau=0.1)"
    pipeline = Pipeline([("scale", StandardScaler()), ("net", NetClassifier(max_epochs=5))])
    assert " ".join(repr(pipeline).split()) == (
        "Pipeline(steps=[('scale', StandardScaler()), ('net', NetClassifier(max_epochs=5))])"
    )


@pytest.mark.slow
def test_set_params_then_fit_on_a_fitted_net(digits):
    X_train, X_test, y_train, _ = digits
    images, test_images = X_train.reshape(-1, 1, 8, 8), X_test.reshape(-1, 1, 8, 8)
    params = {"lr": 0.01, "max_epochs": 2, "batch_size": 64, "random_state": 0}
    cnn = {"module": "cnn", "module__channels": (8,), "module__hidden_units": 16}
    net, other = (NetClassifier(**params).fit(X_train, y_train) for _ in range(2))
    proba = net.predict_proba(X_test)
    net.set_params(**cnn)
    other.set_params(**cnn)
    np.testing.assert_array_equal(net.predict_proba(X_test), proba)  # kept until fit
    fresh = NetClassifier(**cnn, **params).fit(images, y_train)
    for refit in (net.fit(images, y_train), other.partial_fit(images, y_train)):
        expected = fresh.predict_proba(test_images)
        np.testing.assert_array_equal(refit.predict_proba(test_images), expected)
    net.set_params(optimizer="sgd", criterion="focal").fit(images, y_train)
    assert isinstance(net.optimizer_, torch.optim.SGD)
    fresh.set_params(optimizer="sgd", criterion="focal")
    fresh = clone(fresh).fit(images, y_train)
    np.testing.assert_array_equal(net.predict_proba(test_images), fresh.predict_proba(test_images))


def test_a_failed_set_params_changes_nothing(digits):
    X_train, X_test, y_train, _ = digits
    X, y = X_train[:300], y_train[:300]
    net = small_net(max_epochs=1).fit(X, y)
    params = net.get_params(deep=False)
    with pytest.raises(ValueError, match="bogus"):
        net.set_params(module="cnn", module__channels=(8,), bogus=1)
    assert net.get_params(deep=False) == params
    with pytest.raises(ValueError, match="bogus"):
        net.set_params(lr=0.5, bogus=1)
    assert net.get_params(deep=False) == params
    expected = clone(net).fit(X, y).partial_fit(X, y).predict_proba(X_test)
    net.partial_fit(X, y)  # continues: no rebuild was flagged
    assert len(net.history) == 2
    np.testing.assert_array_equal(net.predict_proba(X_test), expected)


# ----------------------------------------------------------------- validation split


def test_predefined_split_records_exact_valid_loss_and_accuracy(digits):
    X_train, X_test, y_train, y_test = digits
    net = small_net(max_epochs=3, train_split=predefined_split(Dataset(X_test, y_test)))
    net.fit(X_train, y_train)
    proba = net.predict_proba(X_test)
    assert net.history[-1, "valid_acc"] == pytest.approx(
        accuracy_score(y_test, net.predict(X_test))
    )
    assert net.history[-1, "valid_loss"] == pytest.approx(
        log_loss(y_test, proba, labels=net.classes_), rel=1e-4
    )
    assert len(net.history[-1, "batches"]) == 22 + 8  # ceil(1347 / 64) + ceil(450 / 64)


def test_float_split_with_early_stopping(digits):
    X_train, _, y_train, _ = digits
    stop = EarlyStopping(monitor="valid_loss", patience=2, threshold=0.5, threshold_mode="abs")
    net = small_net(max_epochs=30, train_split=0.2, callbacks=[stop]).fit(X_train, y_train)
    assert 3 <= len(net.history) < 30
    assert all(0 <= acc <= 1 for acc in net.history[:, "valid_acc"])
    assert sum(len(b) for b in net.history[0, "batches"]) > 0
    batches = net.history[0, "batches"]
    n_train = sum(b["train_batch_size"] for b in batches if "train_loss" in b)
    n_valid = sum(b["valid_batch_size"] for b in batches if "valid_loss" in b)
    assert n_train + n_valid == len(X_train)
    assert n_valid == pytest.approx(0.2 * len(X_train), abs=1)


def test_predict_takes_torch_datasets_and_epoch_scoring_works(digits):
    X_train, X_test, y_train, y_test = digits
    callbacks = [
        EpochScoring("accuracy", lower_is_better=False, name="cached_acc"),
        EpochScoring("accuracy", lower_is_better=False, name="acc", use_caching=False),
    ]
    net = small_net(max_epochs=2, train_split=0.2, callbacks=callbacks).fit(X_train, y_train)
    assert net.history[:, "cached_acc"] == pytest.approx(net.history[:, "valid_acc"])
    assert net.history[:, "acc"] == pytest.approx(net.history[:, "valid_acc"])
    proba = net.predict_proba(X_test)
    np.testing.assert_array_equal(net.predict_proba(Dataset(X_test, y_test)), proba)
    subset = Subset(Dataset(X_test.astype(np.float64), None), range(10, 50))
    np.testing.assert_array_equal(net.predict(subset), net.predict(X_test[10:50]))
    with pytest.raises(ValueError, match="shape"):
        net.predict(Dataset(X_test[:, :32], None))


class HandScoredAccuracy(Callback):
    """Records, at each epoch's end, the accuracy of ``predict`` on both splits, by hand."""

    def on_epoch_end(self, net, dataset_train=None, dataset_valid=None, **kwargs):
        for name, part in (("hand_tracc", dataset_train), ("hand_acc", dataset_valid)):
            X, y = data_from_dataset(part)
            net.history.record(name, accuracy_score(y, net.predict(X)))


def epoch_scorings(**params):
    return [
        EpochScoring("accuracy", lower_is_better=False, name="acc", **params),
        EpochScoring("accuracy", lower_is_better=False, name="tracc", on_train=True, **params),
        HandScoredAccuracy(),
    ]


@pytest.mark.parametrize("labels", ["strings", "one_to_ten"])
@pytest.mark.parametrize("estimator", ["net", "meta"])
def test_epoch_scoring_scores_the_labels_of_each_split(digits, labels, estimator):
    X_train, _, y_train, _ = digits
    X, y = X_train[:400], y_train[:400]
    y = np.array(list("abcdefghij"))[y] if labels == "strings" else y + 1
    if estimator == "net":
        net = small_net(max_epochs=2, lr=0.05, train_split=0.25, callbacks=epoch_scorings())
    else:
        net = MetaNetClassifier(
            module__hidden_units=(16,),
            max_epochs=2,
            batch_size=64,
            lr=0.05,
            train_split=0.25,
            random_state=0,
            callbacks=epoch_scorings(use_caching=True),
        )
    net.fit(X, y)
    history = net.history
    assert history[:, "acc"] == pytest.approx(history[:, "hand_acc"], abs=1e-12)
    assert history[:, "acc"] == pytest.approx(history[:, "valid_acc"], abs=1e-6)
    assert history[:, "tracc"] == pytest.approx(history[:, "hand_tracc"], abs=1e-12)
    assert min(history[:, "tracc"]) > 0.3  # the cache scored indices against labels: ~0.1
    assert not needs_live_batches(net.callbacks_)
    with pytest.raises(ValueError, match="use_caching"):
        small_net(max_epochs=1, use_caching="auto").fit(X, y)


def test_callbacks_monitoring_validation_scores_need_a_split(digits):
    X_train, _, y_train, _ = digits
    net = small_net(max_epochs=2, callbacks=[EarlyStopping()])
    message = r"'EarlyStopping' monitors 'valid_loss'.*train_split=None.*set train_split"
    with pytest.raises(ValueError, match=message):
        net.fit(X_train, y_train)
    assert not hasattr(net, "module_")
    scheduler = LRScheduler(policy="ReduceLROnPlateau", monitor="valid_loss")
    with pytest.raises(ValueError, match="'LRScheduler' monitors 'valid_loss'"):
        small_net(max_epochs=1, callbacks=[scheduler]).fit(X_train, y_train)
    net.set_params(train_split=0.2).fit(X_train, y_train)
    assert len(net.history) == 2


# ----------------------------------------------------------------- training options


def test_recipes_give_documented_learning_rates(digits):
    X_train, _, y_train, _ = digits
    net = small_net(recipe="wang2021", max_epochs=8, lr=None).fit(X_train[:300], y_train[:300])
    np.testing.assert_allclose(net.history[:, "lr"], [0.1] * 4 + [0.01] * 2 + [0.001] * 2)
    assert isinstance(net.optimizer_, torch.optim.SGD)
    group = net.optimizer_.param_groups[0]
    assert (group["momentum"], group["weight_decay"]) == (0.9, 1e-4)
    net = small_net(recipe="mukhoti2020", max_epochs=7, lr=None).fit(X_train[:300], y_train[:300])
    np.testing.assert_allclose(net.history[:, "lr"], [0.1] * 3 + [0.01] * 2 + [0.001] * 2)
    assert net.optimizer_.param_groups[0]["weight_decay"] == 5e-4
    # 350 epochs: x0.1 at epochs 150 and 250, as in Mukhoti et al.'s (2020) reference code.
    factors = [RECIPES["mukhoti2020"].factor(e, 0, 350, 1) for e in (149, 150, 249, 250)]
    np.testing.assert_allclose(factors, [1, 0.1, 0.1, 0.01])


@pytest.mark.parametrize("recipe", ["wang2021", "mukhoti2020"])
def test_recipe_milestones_never_fall_on_the_first_epoch(digits, recipe):
    X, y = digits[0][:300], digits[2][:300]
    net = small_net(recipe=recipe, lr=None, max_epochs=1).fit(X, y)
    assert net.history[:, "lr"] == [pytest.approx(0.1)]
    factors = [RECIPES[recipe].factor(e, 0, 2, 1) for e in (0, 1)]
    expected = [1, 0.1] if recipe == "wang2021" else [1, 0.01]  # round(150/350 * 2) == 1
    np.testing.assert_allclose(factors, expected)


def test_onecycle_learning_rate_per_step(digits):
    X_train, _, y_train, _ = digits
    net = small_net(recipe="onecycle", lr=None, max_epochs=4, batch_size=100)
    net.fit(X_train[:400], y_train[:400])
    # 4 steps per epoch, 16 steps: factor interpolates (0, 0.1), (0.25, 1), (1, 0).
    np.testing.assert_allclose(net.history[:, "lr"], [0.01, 0.1, 0.1 * 2 / 3, 0.1 / 3])
    recipe = RECIPES["onecycle"]
    assert recipe.factor(0, 2, 4, 4) == pytest.approx(0.1 + 0.9 * (2 / 16) / 0.25)
    assert net.optimizer_.param_groups[0]["lr"] == pytest.approx(0.1 * (1 - 15 / 16) / 0.75)


def test_continued_fits_restart_the_recipe_schedule(digits):
    X, y = digits[0][:400], digits[2][:400]
    net = small_net(recipe="onecycle", lr=None, max_epochs=2, batch_size=100).fit(X, y)
    weights = [p.detach().clone() for p in net.module_.parameters()]
    net.partial_fit(X, y)
    # 4 steps per epoch, 8 per call: epoch starts at progress 0 and 0.5 of each call.
    np.testing.assert_allclose(net.history[:, "lr"], [0.01, 0.1 * 2 / 3] * 2)
    assert not any(
        torch.equal(a, b) for a, b in zip(weights, net.module_.parameters(), strict=True)
    )
    net = small_net(recipe="wang2021", lr=None, max_epochs=4).fit(X, y)
    net.set_params(warm_start=True).fit(X, y)
    np.testing.assert_allclose(net.history[:, "lr"], [0.1, 0.1, 0.01, 0.001] * 2)
    # A learning rate set in between is the continued schedule's base, as without a recipe.
    net.set_params(lr=0.001).partial_fit(X, y)
    np.testing.assert_allclose(net.history[8:, "lr"], [0.001, 0.001, 0.0001, 0.00001])
    net.set_params(max_epochs=2, optimizer__param_groups__0__lr=0.02).partial_fit(X, y)
    np.testing.assert_allclose(net.history[12:, "lr"], [0.02, 0.002])
    net.partial_fit(X, y)  # the base stays until changed again
    np.testing.assert_allclose(net.history[14:, "lr"], [0.02, 0.002])


def test_lr_scheduler_callback_works_at_epoch_level(digits):
    X_train, _, y_train, _ = digits
    scheduler = LRScheduler(policy=torch.optim.lr_scheduler.StepLR, step_size=1, gamma=0.5)
    net = small_net(max_epochs=3, optimizer="sgd", lr=0.1, callbacks=[scheduler])
    net.fit(X_train[:300], y_train[:300])
    np.testing.assert_allclose(net.history[:, "lr"], [0.1, 0.05, 0.025])


@pytest.mark.slow
def test_mixup_and_augment_train(digits):
    X_train, X_test, y_train, y_test = digits
    images, test_images = X_train.reshape(-1, 1, 8, 8), X_test.reshape(-1, 1, 8, 8)
    net = NetClassifier(
        module__hidden_units=(64,),
        lr=0.01,
        max_epochs=10,
        batch_size=64,
        augment="crop_flip",
        mixup_alpha=0.2,
        random_state=0,
    ).fit(images, y_train)
    assert net.score(test_images, y_test) > 0.7
    plain = small_net(module__hidden_units=(64,), max_epochs=10).fit(images, y_train)
    assert net.history[-1, "train_loss"] != pytest.approx(plain.history[-1, "train_loss"])


def test_augment_needs_images_and_mixup_needs_floats(digits):
    X_train, _, y_train, _ = digits
    with pytest.raises(ValueError, match="images"):
        small_net(augment="flip").fit(X_train, y_train)
    with pytest.raises(ValueError, match="mixup"):
        NetClassifier(module=TokenNet, mixup_alpha=0.2).fit(
            np.zeros((20, 5), dtype=np.int64), np.arange(20) % 2
        )


def test_random_crop_and_flip_values():
    generator = torch.Generator().manual_seed(0)
    x = torch.arange(2 * 3 * 5 * 5, dtype=torch.float32).reshape(2, 3, 5, 5) + 1
    cropped = random_crop(x, 1, generator)
    for image, source in zip(cropped, x, strict=True):
        matches = []
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                shifted = torch.zeros_like(source)
                ys, xs = slice(max(dy, 0), 5 + min(dy, 0)), slice(max(dx, 0), 5 + min(dx, 0))
                yd, xd = slice(max(-dy, 0), 5 + min(-dy, 0)), slice(max(-dx, 0), 5 + min(-dx, 0))
                shifted[:, yd, xd] = source[:, ys, xs]
                matches.append(torch.equal(image, shifted))
        assert sum(matches) == 1
    flipped = random_flip(x, generator)
    for image, source in zip(flipped, x, strict=True):
        assert torch.equal(image, source) or torch.equal(image, source.flip(2))


def test_mixup_batch_and_loss():
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    y = torch.arange(6) % 3
    mixed, target = mixup(x, y, 0.7, torch.Generator().manual_seed(1))
    perm = torch.randperm(6, generator=torch.Generator().manual_seed(1))
    assert isinstance(target, MixedTarget)
    torch.testing.assert_close(mixed, 0.7 * x + 0.3 * x[perm])
    assert torch.equal(target.y_a, y) and torch.equal(target.y_b, y[perm])
    assert target.lam.item() == pytest.approx(0.7)
    net = small_net(max_epochs=1).fit(np.random.default_rng(0).random((30, 4)), np.arange(30) % 3)
    logits = torch.randn(6, 3, generator=torch.Generator().manual_seed(2))
    ce = nn.functional.cross_entropy
    expected = 0.7 * ce(logits, y) + 0.3 * ce(logits, y[perm])
    assert net.get_loss(logits, target).item() == pytest.approx(expected.item(), rel=1e-6)


def test_reference_pairing_sum_and_gradient_clipping(digits):
    X_train, _, y_train, _ = digits
    net = small_net(max_epochs=1, **REFERENCE_PAIRING).fit(X_train[:200], y_train[:200])
    logits, y = torch.randn(5, 10), torch.arange(5)
    mean = nn.functional.cross_entropy(logits, y).item()
    assert net.get_loss(logits, y, training=True).item() == pytest.approx(5 * mean, rel=1e-6)
    assert net.get_loss(logits, y, training=False).item() == pytest.approx(mean, rel=1e-6)
    clipped = small_net(max_epochs=1, optimizer="sgd", lr=1.0, grad_clip=1e-3)
    clipped.fit(X_train[:200], y_train[:200])
    before = [p.detach().clone() for p in clipped.module_.parameters()]
    batch = (torch.from_numpy(X_train[:64]), torch.from_numpy(y_train[:64]))
    step = clipped.train_step(batch)
    change = torch.sqrt(
        sum(((p - b) ** 2).sum() for p, b in zip(clipped.module_.parameters(), before, strict=True))
    )
    assert 0 < change.item() <= 1e-3 * (1 + 1e-4)
    assert step["loss"].ndim == 0


class AmplifyGradients(Callback):
    """Multiply the gradients by 1e22: their squares overflow float32, they do not."""

    def on_grad_computed(self, net, named_parameters, **kwargs):
        for _, parameter in named_parameters:
            parameter.grad.mul_(1e22)


def test_gradient_clipping_clips_gradients_whose_squares_overflow(digits):
    # In float32 the total norm of such gradients is inf, and a clip coefficient of
    # max_norm / inf = 0 zeroed the step instead of clipping it.
    X_train, _, y_train, _ = digits
    net = small_net(
        max_epochs=1, optimizer="sgd", lr=1.0, grad_clip=1e-3, callbacks=[AmplifyGradients()]
    ).fit(X_train[:200], y_train[:200])
    before = [p.detach().clone() for p in net.module_.parameters()]
    net.train_step((torch.from_numpy(X_train[:64]), torch.from_numpy(y_train[:64])))
    change = torch.sqrt(
        sum(((p - b) ** 2).sum() for p, b in zip(net.module_.parameters(), before, strict=True))
    )
    assert change.item() == pytest.approx(1e-3, rel=1e-4)


def test_gradient_clipping_matches_torch_on_ordinary_gradients():
    gen = torch.Generator().manual_seed(0)
    ours = [nn.Parameter(torch.zeros(shape)) for shape in [(3, 4), (4,), (2,)]]
    theirs = [nn.Parameter(torch.zeros(shape)) for shape in [(3, 4), (4,), (2,)]]
    for mine, other in zip(ours[:2], theirs[:2], strict=True):  # the last has no gradient
        mine.grad = torch.randn(mine.shape, generator=gen)
        other.grad = mine.grad.clone()
    for max_norm in (0.5, 1e3):
        _training.clip_gradient_norm(ours, max_norm)
        torch.nn.utils.clip_grad_norm_(theirs, max_norm)
        for mine, other in zip(ours[:2], theirs[:2], strict=True):
            torch.testing.assert_close(mine.grad, other.grad)
    assert ours[2].grad is None


def test_static_batch_copies_keep_structure_and_layout():
    X = torch.randn(4, 3, 5, 5).contiguous(memory_format=torch.channels_last)
    target = MixedTarget(torch.arange(4), torch.arange(4).flip(0), torch.tensor(0.3))
    static = _cuda_graph._static_copy((X, target))
    assert type(static) is tuple and isinstance(static[1], MixedTarget)
    assert static[0].is_contiguous(memory_format=torch.channels_last)
    assert static[0].data_ptr() != X.data_ptr()
    new = (
        torch.randn(4, 3, 5, 5),
        MixedTarget(torch.ones(4, dtype=torch.long), target.y_a, torch.tensor(0.9)),
    )
    _cuda_graph._copy_into(static, new)
    assert torch.equal(static[0], new[0]) and torch.equal(static[1].y_a, new[1].y_a)
    assert static[1].lam.item() == pytest.approx(0.9)


def test_live_batch_callbacks_match_deferred_history(digits):
    X_train, _, y_train, _ = digits

    class Recorder(Callback):
        def initialize(self):
            self.sizes = []
            return self

        def on_batch_end(self, net, batch=None, training=False, **kwargs):
            if training:
                assert net.history[-1, "batches", -1, "train_loss"] == kwargs["loss"].item()
                self.sizes.append(len(batch[0]))

    recorder = Recorder()
    live = small_net(max_epochs=2, callbacks=[recorder]).fit(X_train, y_train)
    deferred = small_net(max_epochs=2).fit(X_train, y_train)
    assert recorder.sizes == ([64] * 21 + [3]) * 2  # 1347 = 21 * 64 + 3
    np.testing.assert_allclose(
        live.history[:, "batches", :, "train_loss"],
        deferred.history[:, "batches", :, "train_loss"],
        rtol=1e-6,
    )
    np.testing.assert_allclose(live.history[:, "train_loss"], deferred.history[:, "train_loss"])


def test_host_resident_data_trains_identically(digits, monkeypatch):
    X_train, X_test, y_train, _ = digits
    resident = small_net(max_epochs=2, train_split=0.2).fit(X_train, y_train)
    monkeypatch.setattr(_training, "fits_on_device", lambda nbytes, device: False)
    host = small_net(max_epochs=2, train_split=0.2).fit(X_train, y_train)
    np.testing.assert_allclose(host.predict_proba(X_test), resident.predict_proba(X_test))


def test_partial_fit_continues_and_warm_start(digits):
    X_train, _, y_train, _ = digits
    net = small_net(max_epochs=2).fit(X_train, y_train)
    weights = [p.detach().clone() for p in net.module_.parameters()]
    net.partial_fit(X_train, y_train)
    assert len(net.history) == 4
    assert not all(
        torch.equal(a, b) for a, b in zip(weights, net.module_.parameters(), strict=True)
    )
    net.set_params(warm_start=True).fit(X_train, y_train)
    assert len(net.history) == 6
    with pytest.raises(ValueError, match="labels not seen"):
        net.partial_fit(X_train[:10], np.full(10, 11))


def test_cuda_graphs_true_warns_on_cpu(digits):
    X_train, _, y_train, _ = digits
    with pytest.warns(UserWarning, match="not CUDA"):
        small_net(max_epochs=1, cuda_graphs=True).fit(X_train[:100], y_train[:100])


def test_verbose_prints_a_table(digits, capsys):
    X_train, _, y_train, _ = digits
    small_net(max_epochs=2, verbose=1).fit(X_train[:200], y_train[:200])
    out = capsys.readouterr().out
    assert "train_loss" in out and "dur" in out


# ----------------------------------------------------------------- outputs


def test_proba_is_softmax_of_logits_for_non_ce_loss(digits):
    X_train, X_test, y_train, _ = digits
    net = small_net(criterion="focal", criterion__gamma=3, max_epochs=3).fit(X_train, y_train)
    proba = net.predict_proba(X_test)
    assert proba.dtype == np.float32
    np.testing.assert_allclose(proba.sum(1), 1, atol=1e-6)
    logits = net.decision_function(X_test)
    assert logits.shape == (len(X_test), 10) and logits.dtype == np.float32
    np.testing.assert_allclose(proba, torch.softmax(torch.from_numpy(logits), 1), atol=1e-6)


def test_skorch_forward_and_infer_take_float64(digits):
    X_train, X_test, y_train, _ = digits
    net = small_net(max_epochs=1).fit(X_train, y_train)
    logits = net.decision_function(X_test)
    np.testing.assert_allclose(net.forward(X_test.astype(np.float64)).numpy(), logits, rtol=1e-6)
    with torch.inference_mode():
        inferred = net.infer(torch.from_numpy(X_test[:5].astype(np.float64)))
    assert inferred.dtype == torch.float32
    np.testing.assert_allclose(inferred.numpy(), logits[:5], rtol=1e-6)


def test_binary_decision_function_is_logit_difference(digits):
    X_train, X_test, y_train, _ = digits
    keep = y_train < 2
    net = small_net(max_epochs=3).fit(X_train[keep], y_train[keep])
    scores = net.decision_function(X_test)
    assert scores.shape == (len(X_test),)
    np.testing.assert_allclose(
        net.predict_proba(X_test)[:, 1], 1 / (1 + np.exp(-scores)), atol=1e-6
    )


@pytest.mark.parametrize("dumps", ["pickle", "joblib"])
def test_pickle_round_trip_gives_identical_probabilities(digits, dumps):
    X_train, X_test, y_train, _ = digits
    net = small_net(max_epochs=2).fit(X_train, y_train)
    if dumps == "pickle":
        loaded = pickle.loads(pickle.dumps(net))
    else:
        buffer = io.BytesIO()
        joblib.dump(net, buffer)
        buffer.seek(0)
        loaded = joblib.load(buffer)
    np.testing.assert_array_equal(loaded.predict_proba(X_test), net.predict_proba(X_test))
    assert loaded.device == "auto" and loaded.device_ == torch.device("cpu")


@pytest.mark.parametrize("device", ["auto", "cuda"])
def test_cuda_fitted_model_unpickles_on_cpu_only_machine(digits, device, monkeypatch):
    """Simulate a model fitted on CUDA: its state names CUDA and its optimiser is graph-ready."""
    X_train, X_test, y_train, _ = digits
    net = small_net(max_epochs=1, optimizer="adamw").fit(X_train, y_train)
    expected = net.predict_proba(X_test)
    for group in net.optimizer_.param_groups:
        group["lr"] = torch.tensor(group["lr"])
        group["capturable"] = True
    state = net.__getstate__()
    state["device"], state["device_"] = device, torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loaded = NetClassifier.__new__(NetClassifier)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded.__setstate__(state)
    device_warnings = [w for w in caught if issubclass(w.category, DeviceWarning)]
    assert bool(device_warnings) == (device == "cuda")
    assert loaded.device_ == torch.device("cpu")
    assert str(loaded.device) == ("auto" if device == "auto" else "cpu")
    np.testing.assert_array_equal(loaded.predict_proba(X_test), expected)
    group = loaded.optimizer_.param_groups[0]
    assert not group["capturable"] and isinstance(group["lr"], float)
    loaded.partial_fit(X_train, y_train)
    assert len(loaded.history) == 2


# ----------------------------------------------------------------- user modules and bad input


class TokenNet(nn.Module):
    """Bag of embeddings over token ids."""

    input_dtype = torch.long

    def __init__(self, input_shape, n_classes, vocab=50):
        super().__init__()
        self.features = nn.EmbeddingBag(vocab, 8)
        self.head = nn.Linear(8, n_classes)

    def forward(self, x):
        return self.head(self.features(x))


class ClassesOnly(nn.Module):
    def __init__(self, n_classes=2):
        super().__init__()
        self.head = nn.LazyLinear(n_classes)

    def forward(self, x):
        return self.head(x)


def test_user_modules():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 50, size=(200, 6))
    y = ((tokens < 25).sum(1) > 3).astype(int)
    net = NetClassifier(module=TokenNet, lr=0.05, max_epochs=15, random_state=0).fit(tokens, y)
    assert net.module_.features.weight.shape == (50, 8)
    assert net.score(tokens, y) > 0.8
    X = rng.normal(size=(60, 3)).astype(np.float32)
    net = NetClassifier(module=ClassesOnly, max_epochs=1, random_state=0).fit(X, np.arange(60) % 3)
    assert net.predict_proba(X).shape == (60, 3)


def test_token_ids_are_checked():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 30, size=(80, 7))
    y = X[:, 0] % 2
    small = {"vocab_size": 30, "embedding_dim": 8, "n_filters": 8, "hidden_units": 8}
    params = {f"module__{k}": v for k, v in small.items()}
    net = NetClassifier("textcnn", max_epochs=1, random_state=0, **params).fit(X, y)
    message = r"Expected token ids in \[0, 30\) \(the network's vocabulary\), got ids from"
    for bad in (np.where(X == 5, 30, X), np.where(X == 5, -1, X)):
        with pytest.raises(ValueError, match=message):
            net.predict(bad)
        with pytest.raises(ValueError, match=message):
            NetClassifier("textcnn", max_epochs=1, **params).fit(bad, y)
        with pytest.raises(ValueError, match=message):
            net.predict(Dataset(bad, None))
    np.testing.assert_array_equal(net.predict_proba(X.astype(np.float64)), net.predict_proba(X))
    with pytest.raises(ValueError, match="token ids: expected integer values, got 0.5"):
        net.predict(np.where(X == 5, 0.5, X))
    with pytest.raises(ValueError, match="token ids: expected integer values, got 2.5"):
        NetClassifier("textcnn", max_epochs=1, **params).fit(np.where(X == 2, 2.5, X), y)
    too_large = r"token ids: expected integer values within int64, got 1(\.0*2004\d*)?e\+20"
    huge = np.where(X == 5, 1e20, X)
    with pytest.raises(ValueError, match=too_large):
        net.predict(huge)
    with pytest.raises(ValueError, match=too_large):
        net.predict(Dataset(huge.astype(np.float32), None))
    with pytest.raises(ValueError, match=too_large):
        NetClassifier("textcnn", max_epochs=1, **params).fit(huge, y)
    with pytest.raises(ValueError, match="Expected at least 1 sample, got an empty Dataset"):
        net.predict(Dataset(X[:0], None))


def test_bad_input_raises(digits):
    X_train, X_test, y_train, _ = digits
    net = small_net(max_epochs=1)
    bad = X_train.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        net.fit(bad, y_train)
    with pytest.raises(ValueError, match="2 classes"):
        net.fit(X_train, np.zeros(len(X_train)))
    with pytest.raises(ValueError):
        net.fit(X_train.astype(str).astype(object) + "x", y_train)
    with pytest.raises(ValueError, match="Unknown network"):
        NetClassifier(module="nope").fit(X_train, y_train)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            NetClassifier(device="cuda").fit(X_train, y_train)
    with pytest.raises(ValueError, match="device"):
        NetClassifier(device="gpu0").fit(X_train, y_train)
    with pytest.raises(ValueError, match="recipe"):
        NetClassifier(recipe="seed999").fit(X_train, y_train)
    net.fit(X_train, y_train)
    with pytest.raises(ValueError, match="features"):
        net.predict(X_test[:, :10])
    with pytest.raises(ValueError, match="NaN"):
        net.predict_proba(np.full_like(X_test, np.nan))


def test_epoch_callbacks_keep_the_fast_path():
    epoch_scheduler = LRScheduler(policy="MultiStepLR", milestones=[2], gamma=0.1)
    batch_scheduler = LRScheduler(policy="CyclicLR", base_lr=0.01, max_lr=0.1, step_every="batch")
    assert not needs_live_batches([("lr", epoch_scheduler), ("bar", ProgressBar())])
    assert needs_live_batches([("lr", batch_scheduler)])


# ----------------------------------------------------------------- routed optimiser values


@pytest.mark.parametrize(
    "params",
    [
        {"lr": -1.0},
        {"optimizer__lr": -1.0},
        {"optimizer__lr": float("nan")},
        {"optimizer__lr": float("inf")},
        {"optimizer__param_groups__0__lr": -1.0},
        {"optimizer__momentum": -1.0},
    ],
    ids=repr,
)
@pytest.mark.parametrize("path", ["fit", "partial_fit", "warm_start", "fit_loop"])
def test_routed_optimizer_values_are_checked_on_every_path(digits, params, path):
    """A bad value set on a fitted net never reaches its optimiser."""
    X, y = digits[0][:200], digits[2][:200]
    net = small_net(max_epochs=1, optimizer="sgd", lr=0.05)
    if path != "fit":
        net.fit(X, y)
    before = (
        {k: v for k, v in net.optimizer_.param_groups[0].items() if k != "params"}
        if (path != "fit")
        else None
    )
    name = next(iter(params))
    net.set_params(**params)
    with pytest.raises(ValueError, match=name.split("__")[-1]):
        if path == "fit":
            net.fit(X, y)
        elif path == "partial_fit":
            net.partial_fit(X, y)
        elif path == "warm_start":
            net.set_params(warm_start=True).fit(X, y)
        else:
            net.fit_loop(X, y, epochs=1)
    if before is not None:
        group = {k: v for k, v in net.optimizer_.param_groups[0].items() if k != "params"}
        assert group == before
        assert len(net.history) == 1


def test_a_negative_learning_rate_in_a_param_group_is_rejected_at_fit(digits):
    X, y = digits[0][:200], digits[2][:200]
    net = small_net(max_epochs=1, optimizer__param_groups=[("*", {"lr": -1.0})])
    with pytest.raises(ValueError, match=r"lr.*-1\.0"):
        net.fit(X, y)
    assert not net.__sklearn_is_fitted__()


# ----------------------------------------------------------------- one training loop


@pytest.mark.parametrize("cls", [NetClassifier, MetaNetClassifier])
def test_skorch_hooks_work_on_a_fitted_net_outside_fit(digits, cls):
    """get_iterator, train_step, validation_step, infer and run_single_epoch without a run."""
    X_train, X_test, y_train, _ = digits
    X, y = X_train[:200], y_train[:200]
    net = cls(module__hidden_units=(16,), lr=0.05, max_epochs=1, batch_size=64, random_state=0)
    net.fit(X, y)
    epochs = len(net.history)
    batches = list(net.get_iterator(Dataset(X, y), training=True))
    assert [len(b[0]) for b in batches] == [64, 64, 64, 8]
    X_seen = torch.cat([b[0] for b in batches]).numpy()
    order = np.lexsort(X_seen.T[::-1])
    np.testing.assert_array_equal(X_seen[order], X[np.lexsort(X.T[::-1])])  # a permutation
    assert not np.array_equal(X_seen, X)
    for b_X, b_y in batches:  # the targets are each row's class index
        rows = [np.flatnonzero((X == row).all(1))[0] for row in b_X.numpy()]
        np.testing.assert_array_equal(b_y.numpy(), y[rows])

    # infer is the network's forward pass on the device; validation_step its loss
    logits = net.infer(X_test[:5].astype(np.float64))
    np.testing.assert_allclose(
        logits.detach().numpy(), net.decision_function(X_test[:5]), atol=1e-6
    )
    batch = (torch.from_numpy(X[:64]), torch.from_numpy(y[:64]))
    step = net.validation_step(batch)
    expected = torch.nn.functional.cross_entropy(net.infer(X[:64]), batch[1])
    if cls is NetClassifier:  # the criterion is cross-entropy
        torch.testing.assert_close(step["loss"], expected)
    assert not net.module_.training and not step["loss"].requires_grad

    # train_step makes one optimiser step from the current weights, in training mode
    before = [p.detach().clone() for p in net.module_.parameters()]
    if cls is NetClassifier:
        loss = net.get_loss(net.infer(X[:64]), batch[1], training=True).detach()
    else:  # the loss with the learned per-sample gamma; no meta step without a run
        regularizer = net.meta_regularizer_
        gamma_net = [p.detach().clone() for p in regularizer.parameters()]
        features, head = net.module_.features(batch[0]), net.module_.head
        loss = regularizer.regularized_loss(
            net._training_loss,
            head(features),
            batch[1],
            features.detach(),
            head.weight,
            head.bias,
            learn=False,
        ).detach()
    step = net.train_step(batch)
    assert net.module_.training
    torch.testing.assert_close(step["loss"], loss)
    after = list(net.module_.parameters())
    assert not all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    if cls is MetaNetClassifier:
        for a, b in zip(gamma_net, regularizer.parameters(), strict=True):
            assert torch.equal(a, b)

    # run_single_epoch runs skorch's per-batch protocol
    net.history.new_epoch()
    net.run_single_epoch(batches, training=True, prefix="train", step_fn=net.train_step)
    assert net.history[-1, "train_batch_count"] == 4
    assert net.history[-1, "batches", :, "train_batch_size"] == [64, 64, 64, 8]
    assert np.isfinite(net.history[-1, "batches", :, "train_loss"]).all()
    assert len(net.history) == epochs + 1


def test_a_train_step_single_written_for_skorch_trains(digits):
    """A subclass step as skorch's documentation writes it passes its ``fit_params`` (the
    run among them) to ``infer``; it trains as NetClassifier's own step does."""
    X, y = digits[0][:300], digits[2][:300]

    class SkorchStyle(NetClassifier):
        def train_step_single(self, batch, **fit_params):
            Xi, yi = batch
            y_pred = self.infer(Xi, **fit_params)
            loss = self.get_loss(y_pred, yi, X=Xi, training=True)
            loss.backward()
            return {"loss": loss.detach(), "y_pred": y_pred}

    params = {"module__hidden_units": (16,), "lr": 0.05, "max_epochs": 2, "random_state": 0}
    custom = SkorchStyle(**params).fit(X, y)
    own = NetClassifier(**params).fit(X, y)
    assert custom.history[:, "train_loss"] == pytest.approx(own.history[:, "train_loss"])
    np.testing.assert_allclose(custom.predict_proba(X), own.predict_proba(X), atol=1e-6)


def test_a_finished_training_run_is_freed_at_once(digits, monkeypatch):
    """Nothing keeps a run (its device data, its CUDA graph) alive after the training call,
    not even a reference cycle waiting for the garbage collector."""
    import gc
    import weakref

    from sklearn_calib.estimators._run import TrainingRun

    runs, original = [], TrainingRun.__init__

    def recording(self, *args, **kwargs):
        original(self, *args, **kwargs)
        runs.append(weakref.ref(self))

    monkeypatch.setattr(TrainingRun, "__init__", recording)
    X, y = digits[0][:200], digits[2][:200]
    gc.disable()
    try:
        small_net(max_epochs=1, train_split=0.2).fit(X, y).partial_fit(X, y)
        MetaNetClassifier(module__hidden_units=(16,), max_epochs=1).fit(X, y)
        alive = [ref() is not None for ref in runs]
    finally:
        gc.enable()
    assert alive == [False, False, False]


def test_no_attribute_exists_only_during_a_training_run(digits):
    X, y = digits[0][:200], digits[2][:200]

    class Attributes(Callback):
        def on_epoch_end(self, net, **kwargs):
            self.names = set(vars(net))

    attributes = Attributes()
    net = small_net(max_epochs=1, callbacks=[attributes]).fit(X, y)
    assert attributes.names == set(vars(net))
    meta = MetaNetClassifier(module__hidden_units=(16,), max_epochs=1, callbacks=[attributes])
    meta.fit(X, y)
    assert attributes.names == set(vars(meta))


def test_fit_loop_trains_as_partial_fit_does(digits):
    """skorch's fit_loop runs the one loop: schedule, mixup, seeded generators."""
    X, y = digits[0][:300].reshape(-1, 1, 8, 8), digits[2][:300]
    params = {"recipe": "wang2021", "lr": None, "mixup_alpha": 0.2, "augment": "flip"}
    looped = small_net(max_epochs=4, **params).fit(X, y)
    partial = small_net(max_epochs=4, **params).fit(X, y)
    looped.fit_loop(X, y, epochs=2)
    partial.set_params(max_epochs=2).partial_fit(X, y)
    np.testing.assert_allclose(looped.history[:, "lr"], [0.1, 0.1, 0.01, 0.001, 0.1, 0.01])
    assert looped.history[:, "train_loss"] == partial.history[:, "train_loss"]
    for a, b in zip(looped.module_.parameters(), partial.module_.parameters(), strict=True):
        assert torch.equal(a, b)


def test_no_public_method_trains_outside_the_one_loop(digits, monkeypatch):
    from skorch import NeuralNet

    for name in (
        "fit",
        "partial_fit",
        "fit_loop",
        "run_single_epoch",
        "train_step",
        "train_step_single",
        "validation_step",
        "get_iterator",
        "get_loss",
    ):
        assert getattr(NetClassifier, name) is not getattr(NeuralNet, name), name

    def refuse(*args, **kwargs):
        raise AssertionError("skorch's own loop was used")

    for name in ("fit_loop", "run_single_epoch", "partial_fit", "train_step", "train_step_single"):
        monkeypatch.setattr(NeuralNet, name, refuse)
    epochs = []
    original = NetClassifier.run_single_epoch

    def counting(self, iterator, training, *args, **kwargs):
        epochs.append(training)
        return original(self, iterator, training, *args, **kwargs)

    monkeypatch.setattr(NetClassifier, "run_single_epoch", counting)
    X, y = digits[0][:200], digits[2][:200]
    net = small_net(max_epochs=2)
    net.fit(X, y)
    net.partial_fit(X, y)
    net.fit_loop(X, y, epochs=3)
    net.set_params(warm_start=True).fit(X, y)
    assert epochs.count(True) == 2 + 2 + 3 + 2 == len(net.history)


@pytest.mark.parametrize("cls", [NetClassifier, MetaNetClassifier])
def test_no_public_method_still_inherited_from_skorch_trains(cls):
    """A public skorch method the class does not override holds no training code of its own:
    it calls no training method, runs no backward pass and steps no optimiser."""
    import ast
    import inspect
    import textwrap

    from skorch import NeuralNet

    training = {"fit", "partial_fit", "fit_loop", "run_single_epoch", "train_step"}
    training |= {"train_step_single", "backward", "step"}

    def calls(function):
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        return {
            node.func.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        }

    assert calls(NeuralNet.fit_loop) & training  # the scan finds skorch's own loop
    inherited = {}
    for name in dir(cls):
        owner = next((k for k in cls.__mro__ if name in vars(k)), None)
        function = vars(owner).get(name) if owner is not None else None
        if not name.startswith("_") and owner.__module__.startswith("skorch."):
            if inspect.isfunction(function):
                inherited[name] = calls(function)
    assert {"evaluation_step", "save_params"} <= set(inherited)
    assert not {"fit", "partial_fit", "fit_loop", "run_single_epoch"} & set(inherited)
    assert {name: sorted(c & training) for name, c in inherited.items() if c & training} == {}


def test_nonfinite_guard_and_transaction_cover_fit_loop(digits):
    from sklearn_calib.estimators import NonFiniteLossError

    X, y = digits[0][:300], digits[2][:300]
    net = small_net(max_epochs=1).fit(X, y)
    before = [p.detach().clone() for p in net.module_.parameters()]
    net.optimizer_.param_groups[0]["lr"] = 1e30
    with pytest.raises(NonFiniteLossError, match="epoch 2"):
        net.fit_loop(X, y, epochs=2)
    assert len(net.history) == 1
    assert all(torch.equal(a, b) for a, b in zip(before, net.module_.parameters(), strict=True))


# ----------------------------------------------------------------- set_params only stores


def test_set_params_only_stores_until_the_next_training_call(digits):
    X, X_test, y = digits[0][:300], digits[1], digits[2][:300]
    net = small_net(max_epochs=2, optimizer="sgd", optimizer__momentum=0.9, criterion="focal")
    net.fit(X, y)
    module, criterion, optimizer = net.module_, net.criterion_, net.optimizer_
    callbacks, proba = net.callbacks_, net.predict_proba(X_test)
    scoring = EpochScoring("accuracy", on_train=True, name="train_acc")
    net.set_params(
        criterion__gamma=1.0,
        lr=0.05,
        optimizer__momentum=0.5,
        callbacks=[scoring],
        module__hidden_units=(32,),  # the value it has: nothing to rebuild
    )
    assert net.criterion_ is criterion and criterion.gamma == 3.0
    assert optimizer.param_groups[0]["lr"] == 0.01 and optimizer.param_groups[0]["momentum"] == 0.9
    assert net.callbacks_ is callbacks
    np.testing.assert_array_equal(net.predict_proba(X_test), proba)
    loaded = pickle.loads(pickle.dumps(net))  # built from what the parts were built from
    assert loaded.criterion_.gamma == 3.0 and loaded.optimizer_.param_groups[0]["lr"] == 0.01
    assert loaded.lr == 0.05 and loaded.criterion__gamma == 1.0
    net.partial_fit(X, y)
    assert len(net.history) == 4 and net.module_ is module and net.optimizer_ is optimizer
    assert net.criterion_ is not criterion and net.criterion_.gamma == 1.0
    assert optimizer.param_groups[0]["momentum"] == 0.5
    assert net.history[-2:, "lr"] == [0.05, 0.05]
    assert "train_acc" in net.history[-1] and net.built_params_["lr"] == 0.05
    loaded.partial_fit(X, y)
    for a, b in zip(loaded.module_.parameters(), net.module_.parameters(), strict=True):
        assert torch.equal(a, b)


def test_progress_bar_counts_the_training_batches(digits, capsys):
    X, y = digits[0][:300], digits[2][:300]
    net = small_net(max_epochs=1, verbose=1, train_split=0.2, batch_size=32).fit(X, y)
    bar = dict(net.callbacks_)["progress_bar"]
    assert bar.pbar_.total == 8 == bar.pbar_.n  # ceil(240 / 32) training batches
    assert net.history[-1, "valid_batch_count"] == 2


# ----------------------------------------------------------------- custom modules


class WideInput(nn.Module):
    def __init__(self, n_classes=3):
        super().__init__()
        self.hidden = nn.Linear(32, 16)
        self.out = nn.Linear(16, n_classes)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


class RGBNet(nn.Module):
    def __init__(self, n_classes):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.head = nn.Linear(4, n_classes)

    def forward(self, x):
        return self.head(self.conv(x).mean((2, 3)))


def test_custom_module_width_mismatches_name_both_numbers(digits):
    X, y = digits[0][:200], digits[2][:200]
    with pytest.raises(
        ValueError, match=r"layer 'hidden' \(Linear\) takes 32 input features but gets 64"
    ):
        NetClassifier(WideInput, max_epochs=1).fit(X, y)
    with pytest.raises(ValueError, match=r"returns 3 scores per sample, but y has 10 classes"):
        NetClassifier(WideInput(3), max_epochs=1).fit(X[:, :32], y)
    with pytest.raises(ValueError, match=r"layer 'conv' \(Conv2d\) takes 3 channels but gets 1"):
        NetClassifier(RGBNet, max_epochs=1).fit(X.reshape(-1, 1, 8, 8), y)
    net = NetClassifier(WideInput(10), max_epochs=1, random_state=0)
    assert net.fit(X[:, :32], y).predict_proba(X[:5, :32]).shape == (5, 10)


class SqueezedScores(nn.Module):
    """Squeezes its scores: a batch of one sample loses its batch dimension."""

    def __init__(self, n_outputs):
        super().__init__()
        self.linear = nn.Linear(64, n_outputs)

    def forward(self, x):
        return self.linear(x).squeeze()


@pytest.mark.parametrize("n_outputs, classes", [(10, 10), (1, 2)])
def test_a_network_that_squeezes_the_batch_dimension_is_named(digits, n_outputs, classes):
    X, y = digits[0][:200], digits[2][:200] % classes
    shape = "(10,)" if n_outputs == 10 else "()"
    with pytest.raises(ValueError, match=rf"shape {re.escape(shape)} for a batch of one sample"):
        NetClassifier(SqueezedScores(n_outputs), max_epochs=1).fit(X, y)
    with pytest.raises(ValueError, match=r"a `\.squeeze\(\)` without a dimension drops it"):
        NetClassifier(SqueezedScores, module__n_outputs=n_outputs, max_epochs=1).fit(X, y)


def test_a_network_instance_is_copied_refits_alike_and_stays_unchanged(digits):
    X_train, X_test, y_train, _ = digits
    module = MLP(input_shape=(64,), n_classes=10, hidden_units=(16,), dropout=0.2)
    initial = {name: value.clone() for name, value in module.state_dict().items()}
    net = NetClassifier(module=module, lr=0.01, max_epochs=2, random_state=0)
    first = net.fit(X_train, y_train).predict_proba(X_test)
    fitted = net.module_
    second = net.fit(X_train, y_train).predict_proba(X_test)
    cloned = clone(net).fit(X_train, y_train).predict_proba(X_test)
    np.testing.assert_array_equal(second, first)
    np.testing.assert_array_equal(cloned, first)
    assert net.module_ is not module and net.module_ is not fitted
    for name, value in module.state_dict().items():
        assert torch.equal(value, initial[name]), name
    # training starts from the instance's weights (as for a pretrained network)
    barely = NetClassifier(module=module, optimizer="sgd", lr=1e-9, max_epochs=1).fit(
        X_train, y_train
    )
    for name, value in barely.module_.state_dict().items():
        torch.testing.assert_close(value, initial[name], rtol=0, atol=1e-6)
    trained = fitted.state_dict()
    assert not all(torch.equal(trained[name], initial[name]) for name in initial)


# ----------------------------------------------------------------- defaults


def test_defaults_train_well_and_each_optimizer_has_its_learning_rate(digits):
    X_train, X_test, y_train, y_test = digits
    net = NetClassifier(random_state=0).fit(X_train, y_train)  # every parameter its default
    assert isinstance(net.optimizer_, torch.optim.AdamW) and len(net.history) == 20
    assert net.optimizer_.param_groups[0]["lr"] == DEFAULT_LRS[torch.optim.AdamW] == 3e-3
    assert net.score(X_test, y_test) > 0.95
    for name, cls in (("sgd", torch.optim.SGD), ("adam", torch.optim.Adam)):
        fitted = small_net(optimizer=name, lr=None, max_epochs=1).fit(X_train[:100], y_train[:100])
        assert fitted.optimizer_.param_groups[0]["lr"] == DEFAULT_LRS[cls]
    recipe = small_net(optimizer="sgd", recipe="wang2021", lr=None, max_epochs=1)
    assert recipe.fit(X_train[:100], y_train[:100]).history[0, "lr"] == 0.1  # the recipe's
