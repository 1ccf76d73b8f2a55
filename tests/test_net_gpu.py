"""NetClassifier on CUDA: graph capture, bf16, on-device data, CPU loading. Skipped without CUDA."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from skorch.callbacks import EarlyStopping

from sklearn_calib.estimators import NetClassifier, _training
from sklearn_calib.estimators.networks import NETWORKS
from sklearn_calib.losses import LOSSES

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

IMAGE_NET = next(name for name in ("resnet20", "cnn", "mlp") if name in NETWORKS)


def synthetic_images(n, seed=0, noise=3.0):
    """Ten classes of smooth 1x16x16 templates plus Gaussian noise (nearest-template accuracy
    about 0.95, so graph and eager runs are compared below the ceiling)."""
    templates = torch.randn(10, 1, 4, 4, generator=torch.Generator().manual_seed(123))
    templates = torch.nn.functional.interpolate(templates, size=16, mode="bilinear")
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n)
    X = templates.numpy()[y] + noise * rng.standard_normal((n, 1, 16, 16))
    return X.astype(np.float32), y


@pytest.fixture(scope="module")
def images():
    X, y = synthetic_images(20000, seed=0)
    X_test, y_test = synthetic_images(10000, seed=1)
    return X, y, X_test, y_test


def _weights(net):
    return torch.cat([p.detach().float().cpu().flatten() for p in net.module_.parameters()])


def test_graph_reaches_eager_accuracy(images):
    X, y, X_test, y_test = images
    params = {"module": IMAGE_NET, "max_epochs": 4, "random_state": 0, "recipe": "onecycle"}
    graph = NetClassifier(cuda_graphs=True, **params).fit(X, y)
    eager = NetClassifier(cuda_graphs=False, **params).fit(X, y)
    assert graph.history[:, "cuda_graph"] == [True] * 4
    assert eager.history[:, "cuda_graph"] == [False] * 4
    graph_acc, eager_acc = graph.score(X_test, y_test), eager.score(X_test, y_test)
    assert eager_acc > 0.7
    assert abs(graph_acc - eager_acc) <= 0.005, (graph_acc, eager_acc)


@pytest.mark.parametrize(
    "options",
    [
        {"recipe": "wang2021"},
        {"recipe": "onecycle", "grad_clip": 2.0, "loss_reduction": "sum"},
        {"optimizer": "adamw", "mixup_alpha": 0.4},
        {"optimizer": "adam", "train_split": 0.2},
    ],
)
def test_graph_step_equals_eager_step_in_fp32(images, options):
    """Same kernels, same batches: the replayed graph must follow the eager trajectory."""
    X, y, X_test, _ = images
    X, X_test = X[:5000].reshape(5000, -1), X_test[:1000].reshape(1000, -1)
    params = {"module__hidden_units": (64,), "max_epochs": 3, "precision": "fp32"}
    params.update(random_state=0, lr=None if "recipe" in options else 1e-3, **options)
    graph = NetClassifier(cuda_graphs=True, **params).fit(X, y[:5000])
    eager = NetClassifier(cuda_graphs=False, **params).fit(X, y[:5000])
    assert graph.history[-1, "cuda_graph"] and not eager.history[-1, "cuda_graph"]
    np.testing.assert_allclose(graph.history[:, "lr"], eager.history[:, "lr"])
    torch.testing.assert_close(_weights(graph), _weights(eager), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        graph.history[:, "train_loss"], eager.history[:, "train_loss"], rtol=1e-4
    )
    # per batch too: a replayed graph reuses its output tensor, so each loss must be a copy
    for epoch in range(3):
        np.testing.assert_allclose(
            graph.history[epoch, "batches", :, "train_loss"],
            eager.history[epoch, "batches", :, "train_loss"],
            rtol=1e-4,
        )
    np.testing.assert_allclose(
        graph.predict_proba(X_test), eager.predict_proba(X_test), rtol=1e-3, atol=1e-5
    )


def test_bf16_autocast_trains_and_returns_float32(images):
    X, y, X_test, y_test = images
    net = NetClassifier(module=IMAGE_NET, max_epochs=2, random_state=0)
    dtypes = []
    net.fit(X[:4000], y[:4000])
    handle = net.module_.head.register_forward_hook(lambda m, i, out: dtypes.append(out.dtype))
    logits = net.decision_function(X_test[:500])
    handle.remove()
    assert dtypes and dtypes[0] == torch.bfloat16
    assert logits.dtype == np.float32
    proba = net.predict_proba(X_test)
    assert proba.dtype == np.float32
    np.testing.assert_allclose(proba.sum(1), 1, atol=1e-5)
    assert net.score(X_test, y_test) > 0.3


def test_cuda_model_predicts_on_cpu_after_unpickling(images, monkeypatch):
    X, y, X_test, _ = images
    net = NetClassifier(module=IMAGE_NET, max_epochs=2, random_state=0).fit(X[:4000], y[:4000])
    assert net.device_.type == "cuda"
    gpu_proba = net.predict_proba(X_test[:2000])
    data = pickle.dumps(net)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loaded = pickle.loads(data)
    assert loaded.device == "auto" and loaded.device_ == torch.device("cpu")
    assert all(p.device.type == "cpu" for p in loaded.module_.parameters())
    cpu_proba = loaded.predict_proba(X_test[:2000])
    np.testing.assert_allclose(cpu_proba, gpu_proba, atol=5e-2)
    assert (cpu_proba.argmax(1) == gpu_proba.argmax(1)).mean() > 0.98


def test_host_resident_data_matches_device_resident(images, monkeypatch):
    X, y, X_test, _ = images
    X, X_test = X[:4000].reshape(4000, -1), X_test[:500].reshape(500, -1)
    params = {"module__hidden_units": (64,), "max_epochs": 2, "precision": "fp32"}
    resident = NetClassifier(random_state=0, train_split=0.2, **params).fit(X, y[:4000])
    monkeypatch.setattr(_training, "fits_on_device", lambda nbytes, device: False)
    host = NetClassifier(random_state=0, train_split=0.2, **params).fit(X, y[:4000])
    assert host.history[-1, "cuda_graph"]
    torch.testing.assert_close(_weights(host), _weights(resident), rtol=1e-4, atol=1e-5)


def test_augment_mixup_and_early_stopping_with_graphs(images):
    X, y, X_test, y_test = images
    stop = EarlyStopping(patience=1, threshold=10.0, threshold_mode="abs")
    net = NetClassifier(
        module=IMAGE_NET,
        max_epochs=10,
        augment="crop_flip",
        mixup_alpha=0.2,
        train_split=0.1,
        callbacks=[stop],
        random_state=0,
    ).fit(X[:8000], y[:8000])
    assert len(net.history) == 2
    assert net.history[:, "cuda_graph"] == [True, True]
    assert 0 <= net.history[-1, "valid_acc"] <= 1
    assert net.score(X_test, y_test) > 0.2


def test_refits_leave_cuda_rng_untouched_and_partial_fit_resumes(images):
    X, y, _, _ = images
    X = X[:3000].reshape(3000, -1)
    cuda_state = torch.cuda.get_rng_state()
    cpu_state = torch.get_rng_state()
    net = NetClassifier(max_epochs=2, random_state=0, module__dropout=0.2).fit(X, y[:3000])
    assert torch.equal(torch.cuda.get_rng_state(), cuda_state)
    assert torch.equal(torch.get_rng_state(), cpu_state)
    net.partial_fit(X, y[:3000])
    assert len(net.history) == 4 and net.history[-1, "cuda_graph"]
    assert net.rng_state_["device_type"] == "cuda"


@pytest.mark.parametrize("criterion", sorted(LOSSES))
def test_every_loss_is_captured_in_a_cuda_graph(images, criterion):
    """A loss that synchronises with the host would make the capture fail (and warn)."""
    X, y, _, _ = images
    X = X[:2000].reshape(2000, -1)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*CUDA graph capture")
        net = NetClassifier(criterion=criterion, max_epochs=2, random_state=0, cuda_graphs=True)
        net.fit(X, y[:2000])
    assert net.history[:, "cuda_graph"] == [True, True]
    assert np.isfinite(net.history[-1, "train_loss"])
