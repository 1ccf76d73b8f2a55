"""Round trips through pickle, joblib and skops; loading on a machine without CUDA."""

import copy
import importlib
import inspect
import io
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import joblib
import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.linear_model import LogisticRegression
from skorch.callbacks import Callback, EarlyStopping, EpochScoring, ProgressBar
from skorch.dataset import ValidSplit
from skorch.exceptions import DeviceWarning

from sklearn_calib import calibrators, persistence
from sklearn_calib.calibrators import (
    CalibratedClassifier,
    HistogramBinning,
    TemperatureScaling,
    VennAbersCalibrator,
)
from sklearn_calib.estimators import Lookahead, MetaNetClassifier, NetClassifier
from sklearn_calib.label_shift import LabelShiftAdapter

from estimator_registry import CALIBRATORS as CALIBRATOR_NAMES
from estimator_registry import LABEL_SHIFT, tiny

skops_io = pytest.importorskip("skops.io")
from skops.io.exceptions import UntrustedTypesFoundException  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GPU_FIXTURES = REPO / "tests" / "data"
_spec = importlib.util.spec_from_file_location(
    "make_gpu_fixtures", GPU_FIXTURES / "make_gpu_fixtures.py"
)
make_gpu_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_gpu_fixtures)
_spec = importlib.util.spec_from_file_location(
    "make_calibrator_fixtures", GPU_FIXTURES / "make_calibrator_fixtures.py"
)
make_calibrator_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_calibrator_fixtures)


def small_net(cls=NetClassifier, **params):
    defaults = {
        "module__hidden_units": (32,),
        "lr": 0.05,
        "max_epochs": 3,
        "batch_size": 64,
        "random_state": 0,
        "recipe": "wang2021",
        "mixup_alpha": 0.2,
    }
    return cls(**{**defaults, **params})


def round_trip(estimator, how, tmp_path):
    if how == "pickle":
        return pickle.loads(pickle.dumps(estimator))
    if how == "joblib":
        buffer = io.BytesIO()
        joblib.dump(estimator, buffer)
        buffer.seek(0)
        return joblib.load(buffer)
    path = tmp_path / "model.skops"
    persistence.dump(estimator, path)
    return persistence.load(path)


#: Every calibrator of the registry, and temperature scaling by the ECE.
CALIBRATORS = [tiny(name) for name in CALIBRATOR_NAMES] + [
    TemperatureScaling(objective="ece"),
    VennAbersCalibrator(multi_class="one_vs_one"),
]

HOW = ["pickle", "joblib", "skops"]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("calibrator", CALIBRATORS, ids=lambda c: repr(c))
def test_calibrators_round_trip(calibrator, how, tmp_path):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(300, 4)) * 3
    y = rng.integers(0, 4, size=300)
    fitted = calibrator.fit(logits, y)
    loaded = round_trip(fitted, how, tmp_path)
    assert type(loaded) is type(fitted)
    assert loaded.get_params() == fitted.get_params() or how != "skops"
    np.testing.assert_array_equal(loaded.predict_proba(logits), fitted.predict_proba(logits))


#: The label-shift estimators of the registry with bootstrap intervals, so that an adapted
#: one holds every kind of attribute adapt sets; the adapter also keeps its source rows.
ADAPTED = {
    "LabelShiftAdapter": {"n_resamples": 20, "resample_source": True, "random_state": 0},
    "LabelShiftClassifier": {"adapter": LabelShiftAdapter(n_resamples=20, random_state=0)},
}


def shifted_scores():
    """Labelled source scores (even classes) and target scores of shifted priors."""
    rng = np.random.default_rng(0)
    y = np.arange(300) % 3
    target_y = rng.choice(3, size=300, p=[0.6, 0.3, 0.1])
    source, target = (2 * np.eye(3)[labels] + rng.normal(size=(300, 3)) for labels in (y, target_y))
    return source, y, target


def adapted(name):
    """The label-shift estimator ``name`` fitted on the source and adapted to the target."""
    source, y, target = shifted_scores()
    return tiny(name, **ADAPTED[name]).fit(source, y).adapt(target)


def adapters(model):
    """The adapters of a label-shift estimator: its own, or itself."""
    return getattr(model, "adapters_", [model])


def assert_same_intervals(ours, theirs):
    """Bootstrap intervals (dicts holding their replicates) equal entry by entry."""
    assert len(ours) == len(theirs)
    for one, other in zip(ours, theirs, strict=True):
        assert one.keys() == other.keys()
        for key in one:
            np.testing.assert_array_equal(one[key], other[key], err_msg=key)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("name", LABEL_SHIFT)
@pytest.mark.slow
def test_adapted_label_shift_estimators_round_trip(name, how, tmp_path):
    _, _, target = shifted_scores()
    fitted = adapted(name)
    loaded = round_trip(fitted, how, tmp_path)
    assert type(loaded) is type(fitted)
    np.testing.assert_array_equal(loaded.target_prior_, fitted.target_prior_)
    np.testing.assert_array_equal(loaded.predict_proba(target), fitted.predict_proba(target))
    np.testing.assert_array_equal(loaded.predict(target), fitted.predict(target))
    for ours, theirs in zip(adapters(loaded), adapters(fitted), strict=True):
        assert_same_intervals(ours.target_prior_intervals_, theirs.target_prior_intervals_)
        assert ours.shift_test_ == theirs.shift_test_
        np.testing.assert_array_equal(ours.weights_, theirs.weights_)
    # what the adapters keep of the source came along: adapting again gives the same
    loaded.adapt(target)
    np.testing.assert_array_equal(loaded.target_prior_, fitted.target_prior_)
    for ours, theirs in zip(adapters(loaded), adapters(fitted), strict=True):
        assert_same_intervals(ours.target_prior_intervals_, theirs.target_prior_intervals_)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("cls", [NetClassifier, MetaNetClassifier], ids=lambda c: c.__name__)
@pytest.mark.slow
def test_net_round_trip_predicts_and_continues_training_identically(digits, cls, how, tmp_path):
    X_train, X_test, y_train, _ = digits
    net = small_net(cls=cls, train_split=0.2, max_epochs=2).fit(X_train, y_train)
    loaded = round_trip(net, how, tmp_path)
    np.testing.assert_array_equal(loaded.predict_proba(X_test), net.predict_proba(X_test))
    assert loaded.get_params(deep=False).keys() == net.get_params(deep=False).keys()
    assert loaded.history[:, "valid_loss"] == net.history[:, "valid_loss"]
    assert loaded.device == "auto" and loaded.device_ == torch.device("cpu")
    # The optimiser state and the random-generator states came along: one more epoch of
    # each gives the same weights (and meta-regulariser).
    net.partial_fit(X_train, y_train)
    loaded.partial_fit(X_train, y_train)
    for name in ("module_", "meta_regularizer_"):
        if name not in net.__dict__:
            continue
        ours, theirs = getattr(net, name).state_dict(), getattr(loaded, name).state_dict()
        assert ours.keys() == theirs.keys()
        for key in ours:
            assert torch.equal(ours[key], theirs[key]), f"{name}{key}"


@pytest.mark.parametrize("how", ["pickle", "skops", "deepcopy"])
@pytest.mark.parametrize("cls", [NetClassifier, MetaNetClassifier], ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "new",
    [
        {"module": "mlp", "module__hidden_units": (8,)},
        {"module": "cnn", "module__channels": (8,), "module__hidden_units": 16},
        {"module__hidden_units": (8,)},
    ],
    ids=["narrower", "cnn", "module-parameter-only"],
)
@pytest.mark.slow
def test_net_awaiting_a_rebuild_round_trips_its_fitted_model(digits, cls, new, how, tmp_path):
    X_train, X_test, y_train, _ = digits
    X_train, y_train = X_train[:400], y_train[:400]
    net = small_net(cls=cls, max_epochs=1).fit(X_train, y_train)
    proba = net.predict_proba(X_test)
    net.set_params(**new)  # deferred: the fitted model stays until the next fit
    net.set_params(lr=0.2)
    params = net.get_params(deep=False)
    loaded = copy.deepcopy(net) if how == "deepcopy" else round_trip(net, how, tmp_path)
    np.testing.assert_array_equal(loaded.predict_proba(X_test), proba)
    assert loaded.get_params(deep=False) == params or how == "skops"
    assert loaded.module == params["module"] and loaded.lr == 0.2
    images = X_train.reshape(-1, 1, 8, 8) if params["module"] == "cnn" else X_train
    loaded.partial_fit(images, y_train)  # builds the new net and starts anew
    net.partial_fit(images, y_train)
    assert len(loaded.history) == len(net.history) == 1
    np.testing.assert_array_equal(loaded.predict_proba(images[:50]), net.predict_proba(images[:50]))


@pytest.mark.parametrize("how", ["pickle", "skops", "deepcopy"])
@pytest.mark.parametrize("new", [{"regularizer": "l2"}, {"tau": 0.02}], ids=repr)
@pytest.mark.slow
def test_meta_net_awaiting_a_new_regularizer_round_trips(digits, new, how, tmp_path):
    X_train, X_test, y_train, _ = digits
    X_train, y_train = X_train[:400], y_train[:400]
    net = small_net(cls=MetaNetClassifier, max_epochs=1).fit(X_train, y_train)
    proba, gamma = net.predict_proba(X_test), net.sample_gamma(X_test[:5])
    net.set_params(**new)  # deferred: the fitted gamma-Net stays until the next fit
    loaded = copy.deepcopy(net) if how == "deepcopy" else round_trip(net, how, tmp_path)
    np.testing.assert_array_equal(loaded.predict_proba(X_test), proba)
    np.testing.assert_array_equal(loaded.sample_gamma(X_test[:5]), gamma)
    assert all(getattr(loaded, key) == value for key, value in new.items())


@pytest.mark.parametrize("how", HOW)
def test_meta_optimizer_parameters_round_trip(digits, how, tmp_path):
    X_train, _, y_train, _ = digits
    X_train, y_train = X_train[:400], y_train[:400]
    net = small_net(cls=MetaNetClassifier, max_epochs=1, meta_optimizer__lr=1e-4)
    net.fit(X_train, y_train).set_params(meta_optimizer__lr=2e-4)  # for the next fit
    loaded = round_trip(net, how, tmp_path)
    assert loaded.get_params()["meta_optimizer__lr"] == 2e-4
    assert loaded.meta_optimizer_.param_groups[0]["lr"] == 1e-4
    net.partial_fit(X_train, y_train)
    loaded.partial_fit(X_train, y_train)
    assert loaded.meta_optimizer_.param_groups[0]["lr"] == 2e-4
    ours, theirs = net.meta_regularizer_.state_dict(), loaded.meta_regularizer_.state_dict()
    for key in ours:
        assert torch.equal(ours[key], theirs[key]), key


@pytest.mark.parametrize("how", HOW)
def test_net_with_a_torch_device_parameter_round_trips(digits, how, tmp_path):
    X_train, X_test, y_train, _ = digits
    net = small_net(max_epochs=1, device=torch.device("cpu")).fit(X_train, y_train)
    loaded = round_trip(net, how, tmp_path)
    assert loaded.device == torch.device("cpu") and loaded.device_ == torch.device("cpu")
    np.testing.assert_array_equal(loaded.predict_proba(X_test), net.predict_proba(X_test))
    unfitted = round_trip(small_net(device=torch.device("cpu")), how, tmp_path)
    assert unfitted.device == torch.device("cpu")


@pytest.mark.parametrize("how", HOW)
def test_unfitted_net_round_trips(how, tmp_path):
    net = small_net(criterion="focal", criterion__gamma=3.0, optimizer="sgd")
    loaded = round_trip(net, how, tmp_path)
    assert loaded.get_params(deep=False) == net.get_params(deep=False)
    assert not loaded.__sklearn_is_fitted__()
    loaded.set_params(lr=0.2, criterion__gamma=2.0)  # skorch's routing state came along
    assert loaded.lr == 0.2


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("inner", ["net", "logistic"])
@pytest.mark.slow
def test_calibrated_classifier_round_trips(digits, how, inner, tmp_path):
    X_train, X_test, y_train, _ = digits
    estimator = small_net(max_epochs=2) if inner == "net" else LogisticRegression(max_iter=300)
    model = CalibratedClassifier(
        estimator, calibrator=HistogramBinning(), cv=0.3, random_state=0
    ).fit(X_train, y_train)
    loaded = round_trip(model, how, tmp_path)
    np.testing.assert_array_equal(loaded.predict_proba(X_test), model.predict_proba(X_test))


def test_trusted_types_are_importable_and_cover_the_public_estimators():
    names = persistence.trusted_types()
    assert names == sorted(set(names))
    for name in names:
        module, _, attribute = name.rpartition(".")
        value = getattr(importlib.import_module(module), attribute)
        # classes, and the few functions skorch's callbacks hold by default
        assert isinstance(value, type) or inspect.isroutine(value), name
    for cls in (NetClassifier, MetaNetClassifier, CalibratedClassifier, TemperatureScaling):
        assert f"{cls.__module__}.{cls.__qualname__}" in names


@pytest.mark.slow
def test_every_model_of_the_library_loads_without_trusting_more(digits, tmp_path):
    X_train, _, y_train, _ = digits
    rng = np.random.default_rng(0)
    logits, y = rng.normal(size=(200, 4)), rng.integers(0, 4, 200)
    models = {type(c).__name__: clone(c).fit(logits, y) for c in CALIBRATORS}
    models.update({name: adapted(name) for name in LABEL_SHIFT})
    models["NetClassifier"] = small_net(max_epochs=1).fit(X_train, y_train)
    models["MetaNetClassifier"] = small_net(
        cls=MetaNetClassifier, max_epochs=1, lookahead=Lookahead("network", meta_batch_size=32)
    ).fit(X_train, y_train)
    models["CalibratedClassifier"] = CalibratedClassifier(
        small_net(max_epochs=1), calibrator=HistogramBinning(), random_state=0
    ).fit(X_train, y_train)
    for name, model in models.items():
        path = tmp_path / f"{name}.skops"
        persistence.dump(model, path)
        assert persistence.untrusted_types(path) == [], name
    loaded = persistence.load(tmp_path / "MetaNetClassifier.skops")
    assert loaded.lookahead == Lookahead("network", meta_batch_size=32)
    for name in ("net", "meta"):
        assert persistence.untrusted_types(GPU_FIXTURES / f"gpu_{name}.skops") == []


def test_skorch_splits_and_callbacks_load_without_trusting_more(digits, tmp_path):
    # skorch's own validation split and the callbacks the library documents hold only
    # configuration (and skorch's default functions: print as EarlyStopping's sink,
    # to_numpy as the scorers' target extractor, the indexing skorch picks for y).
    X_train, X_test, y_train, _ = digits
    net = small_net(
        max_epochs=3,
        train_split=ValidSplit(5, stratified=True),
        callbacks=[
            EarlyStopping(patience=1),
            EpochScoring("accuracy", lower_is_better=False),
            ProgressBar(),
        ],
    ).fit(X_train, y_train)
    path = tmp_path / "net.skops"
    persistence.dump(net, path)
    assert persistence.untrusted_types(path) == []
    loaded = persistence.load(path)
    np.testing.assert_array_equal(loaded.predict_proba(X_test), net.predict_proba(X_test))
    assert [type(callback) for callback in loaded.callbacks] == [
        EarlyStopping,
        EpochScoring,
        ProgressBar,
    ]


class CustomModule(torch.nn.Module):
    """A network of the user's own: the one kind of type a user must trust."""

    def __init__(self, n_features=64, n_classes=10):
        super().__init__()
        self.linear = torch.nn.Linear(n_features, n_classes)

    def forward(self, X):
        return self.linear(X)


def test_a_custom_module_is_the_only_type_to_trust(digits, tmp_path):
    X_train, X_test, y_train, _ = digits
    net = NetClassifier(module=CustomModule, max_epochs=1, batch_size=64, random_state=0).fit(
        X_train, y_train
    )
    path = tmp_path / "net.skops"
    persistence.dump(net, path)
    custom = f"{__name__}.CustomModule"
    assert persistence.untrusted_types(path) == [custom]
    with pytest.raises(UntrustedTypesFoundException, match="CustomModule"):
        persistence.load(path)
    loaded = persistence.load(path, trusted=[custom])
    np.testing.assert_array_equal(loaded.predict_proba(X_test), net.predict_proba(X_test))


def test_the_trusted_types_are_the_librarys_and_named_dependency_types():
    own = [name for name in persistence.trusted_types() if name.startswith("sklearn_calib.")]
    others = sorted(set(persistence.trusted_types()) - set(own))
    assert others == sorted(
        [
            "builtins.print",
            "skorch.callbacks.logging.EpochTimer",
            "skorch.callbacks.logging.PrintLog",
            "skorch.callbacks.logging.ProgressBar",
            "skorch.callbacks.regularization.GradientNormClipping",
            "skorch.callbacks.scoring.BatchScoring",
            "skorch.callbacks.scoring.EpochScoring",
            "skorch.callbacks.scoring.PassthroughScoring",
            "skorch.callbacks.training.EarlyStopping",
            "skorch.dataset.Dataset",
            "skorch.dataset.ValidSplit",
            "skorch.utils._indexing_none",
            "skorch.utils._indexing_other",
            "skorch.utils.to_numpy",
            "torch.device",
            "torch.optim.adam.Adam",
            "torch.optim.adamw.AdamW",
            "torch.optim.sgd.SGD",
            "torch.utils.data.dataloader.DataLoader",
        ]
    )


class NoisyCallback(Callback):
    pass


class ForeignClassifier(ClassifierMixin, BaseEstimator):
    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, X):
        scores = np.exp(np.asarray(X)[:, : len(self.classes_)])
        return scores / scores.sum(axis=1, keepdims=True)


def test_unknown_types_are_refused(digits, tmp_path):
    X_train, X_test, y_train, _ = digits
    net = small_net(max_epochs=1, callbacks=[NoisyCallback()]).fit(X_train, y_train)
    path = tmp_path / "net.skops"
    persistence.dump(net, path)
    untrusted = f"{__name__}.NoisyCallback"
    found = skops_io.get_untrusted_types(file=path)
    assert [name for name in found if name not in persistence.trusted_types()] == [untrusted]
    with pytest.raises(UntrustedTypesFoundException, match="NoisyCallback"):
        persistence.load(path)
    with pytest.raises(UntrustedTypesFoundException):
        skops_io.load(path)
    loaded = persistence.load(path, trusted=[untrusted])
    np.testing.assert_array_equal(loaded.predict_proba(X_test), net.predict_proba(X_test))

    model = CalibratedClassifier(ForeignClassifier(), random_state=0).fit(X_train, y_train)
    persistence.dump(model, tmp_path / "foreign.skops")
    with pytest.raises(UntrustedTypesFoundException, match="ForeignClassifier"):
        persistence.load(tmp_path / "foreign.skops")


def pretend_fitted_on_cuda(net):
    """Make a CPU-fitted net's state look like a CUDA fit with a graph-ready optimiser."""
    for group in net.optimizer_.param_groups:
        group["lr"] = torch.tensor(group["lr"])
        group["fused"] = True
    net.device_ = torch.device("cuda")
    return net


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("device", ["auto", "cuda"])
@pytest.mark.slow
def test_cuda_fitted_net_loads_on_a_cpu_only_machine(digits, how, device, tmp_path, monkeypatch):
    X_train, X_test, y_train, _ = digits
    net = small_net(max_epochs=1, device="cpu").fit(X_train, y_train)
    expected = net.predict_proba(X_test)
    net = pretend_fitted_on_cuda(net)
    net.__dict__["device"] = device
    if how == "skops":
        persistence.dump(net, tmp_path / "net.skops")
    else:
        data = pickle.dumps(net)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = persistence.load(tmp_path / "net.skops") if how == "skops" else pickle.loads(data)
    assert any(issubclass(w.category, DeviceWarning) for w in caught) == (device == "cuda")
    assert loaded.device_ == torch.device("cpu")
    assert loaded.device == ("auto" if device == "auto" else "cpu")
    np.testing.assert_array_equal(loaded.predict_proba(X_test), expected)
    group = loaded.optimizer_.param_groups[0]
    assert isinstance(group["lr"], float) and not group.get("fused")
    loaded.partial_fit(X_train, y_train)
    assert len(loaded.history) == 2


LOAD_ON_CPU = """
import sys
import numpy as np
import torch
from sklearn_calib import persistence
import pickle
assert not torch.cuda.is_available()
path, how, data, out = sys.argv[1:]
if how == "skops":
    net = persistence.load(path)
else:
    with open(path, "rb") as file:
        net = pickle.load(file)
assert net.device_ == torch.device("cpu")
np.save(out, net.predict_proba(np.load(data)))
"""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("how", ["pickle", "skops"])
def test_gpu_fitted_net_predicts_in_a_process_without_cuda(digits, how, tmp_path):
    X_train, X_test, y_train, _ = digits
    net = small_net(device="cuda", precision="fp32").fit(X_train, y_train)
    assert net.device_.type == "cuda"
    expected = net.predict_proba(X_test)
    path = tmp_path / "net.bin"
    if how == "skops":
        persistence.dump(net, path)
    else:
        path.write_bytes(pickle.dumps(net))
    np.save(tmp_path / "X.npy", X_test)
    script = tmp_path / "load.py"
    script.write_text(LOAD_ON_CPU)
    path_entries = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": os.pathsep.join(path_entries)}
    args = [str(path), how, str(tmp_path / "X.npy"), str(tmp_path / "out.npy")]
    result = subprocess.run(
        [sys.executable, str(script), *args], env=env, capture_output=True, timeout=300
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_net_fitted_on_a_gpu_this_machine_lacks_loads_on_the_current_one(digits):
    X_train, X_test, y_train, _ = digits
    net = small_net(max_epochs=1, device="cuda").fit(X_train, y_train)
    state = net.__getstate__()
    state["device_"] = f"cuda:{torch.cuda.device_count()}"
    loaded = NetClassifier.__new__(NetClassifier)
    loaded.__setstate__(state)
    assert loaded.device_ == torch.device("cuda")
    np.testing.assert_allclose(loaded.predict_proba(X_test), net.predict_proba(X_test), atol=1e-6)


@pytest.mark.parametrize("name", ["net", "meta"])
@pytest.mark.parametrize("how", ["pickle", "skops"])
def test_models_fitted_on_a_gpu_predict_on_this_machine(name, how):
    """Files written on an H100 by ``tests/data/make_gpu_fixtures.py`` load and predict here."""
    path = GPU_FIXTURES / f"gpu_{name}.{'pkl' if how == 'pickle' else 'skops'}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeviceWarning)
        net = pickle.loads(path.read_bytes()) if how == "pickle" else persistence.load(path)
    X, y = make_gpu_fixtures.digits()
    expected = np.load(GPU_FIXTURES / f"gpu_{name}_proba.npy")
    proba = net.predict_proba(X[make_gpu_fixtures.N_TRAIN :])
    assert net.device_.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert list(net.classes_) == sorted(make_gpu_fixtures.NAMES)
    # The GPU predicted under bf16 autocast; here the network runs in float32.
    np.testing.assert_allclose(proba, expected, atol=2e-3)
    assert (proba.argmax(1) == expected.argmax(1)).mean() > 0.99
    assert (net.predict(X) == y).mean() > 0.5  # a few epochs; chance is 0.1


#: The meta step of the version that wrote the files: a virtual step of the head on the
#: mean loss at the network's learning rate, meta batches of the training batch's size.
EARLIER_META_STEP = {
    "sece_accuracy": "hard",
    "lookahead": Lookahead("head", loss="mean", meta_batch_size=None),
}


@pytest.mark.parametrize("name", ["net", "meta"])
@pytest.mark.parametrize("how", ["pickle", "skops"])
@pytest.mark.slow
def test_models_saved_by_an_earlier_version_load_and_predict_alike(name, how):
    """Files written on the CPU by an earlier version (``tests/data/make_cpu_fixtures.py``).

    They load with the current code and predict the stored probabilities to float32's
    precision (another processor takes other vector paths through torch and BLAS: 1.8e-7
    was seen), and the same fit run again trains to the same probabilities.
    """
    path = GPU_FIXTURES / f"cpu_{name}.{'pkl' if how == 'pickle' else 'skops'}"
    assert how == "pickle" or persistence.untrusted_types(path) == []
    net = pickle.loads(path.read_bytes()) if how == "pickle" else persistence.load(path)
    X, y = make_gpu_fixtures.digits()
    n_train = make_gpu_fixtures.N_TRAIN
    expected = np.load(GPU_FIXTURES / f"cpu_{name}_proba.npy")
    assert net.device_ == torch.device("cpu")
    assert list(net.classes_) == sorted(make_gpu_fixtures.NAMES)
    np.testing.assert_allclose(net.predict_proba(X[n_train:]), expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(net.predict(X[n_train:]), net.classes_[expected.argmax(1)])
    refit = clone(net)
    if name == "meta":  # the meta step the earlier version made (its defaults changed since)
        refit.set_params(**EARLIER_META_STEP)
    refit.fit(X[:n_train], y[:n_train])
    np.testing.assert_allclose(refit.predict_proba(X[n_train:]), expected, rtol=0, atol=1e-6)


#: Calibrators added after the files of version 0.1.0 were written.
CALIBRATORS_AFTER_0_1_0 = {
    "BiasCorrectedTemperatureScaling",
    "MulticalibrationBoosting",
    "VennAbersCalibrator",
}


@pytest.mark.parametrize("how", ["pickle", "skops"])
@pytest.mark.slow
def test_calibrators_of_version_0_1_0_load_and_predict_alike(how):
    """Files written by version 0.1.0 (``tests/data/make_calibrator_fixtures.py``) load.

    They predict the stored probabilities to float64's precision (another processor's
    vector paths differ in the last bits), hold their parameters under the names of the
    current version (every deprecated spelling unset) and refit without a FutureWarning.
    """
    stem = GPU_FIXTURES / make_calibrator_fixtures.STEM
    if how == "pickle":
        models = pickle.loads(stem.with_suffix(".pkl").read_bytes())
    else:
        assert persistence.untrusted_types(stem.with_suffix(".skops")) == []
        models = persistence.load(stem.with_suffix(".skops"))
    expected = np.load(stem.with_name(f"{stem.name}_proba.npz"))
    logits, _ = make_calibrator_fixtures.scores()
    classes = [name for name in calibrators.__all__ if isinstance(getattr(calibrators, name), type)]
    assert sorted(models) == sorted(expected.files)
    assert sorted(models) == sorted(set(classes) - CALIBRATORS_AFTER_0_1_0)
    for name, model in models.items():
        assert type(model) is getattr(calibrators, name)
        np.testing.assert_allclose(
            model.predict_proba(logits), expected[name], rtol=1e-12, atol=1e-15, err_msg=name
        )
        deprecated = {
            parameter
            for parameter, value in inspect.signature(type(model)).parameters.items()
            if value.default == "deprecated"
        }
        params = model.get_params(deep=False)
        assert {parameter: params[parameter] for parameter in deprecated} == dict.fromkeys(
            deprecated, "deprecated"
        ), name
    logits, y = make_calibrator_fixtures.scores()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        for name in ("CalibratedClassifier", "DirichletCalibration", "HistogramBinning"):
            clone(models[name]).fit(logits, y)


def test_state_trees_round_trip_bfloat16_and_rebuild_containers():
    from collections import OrderedDict

    from sklearn_calib.estimators._state import to_cpu_tree, to_numpy_tree, to_torch_tree

    tree = OrderedDict(
        half=torch.randn(3).bfloat16(),
        items=[torch.arange(3), (1, "x")],
        inner={"w": torch.ones(2)},
    )
    encoded = to_numpy_tree(tree)
    assert type(encoded) is dict and set(encoded["half"]) == {"__torch_bits__", "bits"}
    assert isinstance(encoded["inner"]["w"], np.ndarray)
    decoded = to_torch_tree(encoded)
    assert decoded["half"].dtype == torch.bfloat16 and torch.equal(decoded["half"], tree["half"])
    assert torch.equal(decoded["items"][0], tree["items"][0]) and decoded["items"][1] == (1, "x")
    copied = to_cpu_tree(tree)
    assert torch.equal(copied["inner"]["w"], tree["inner"]["w"])
    assert copied["inner"]["w"] is not tree["inner"]["w"]
