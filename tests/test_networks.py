import numpy as np
import pytest
import torch
from torch import nn

from sklearn_calib.estimators.networks import (
    NETWORKS,
    CifarResNet,
    ResNet20,
    TextCNN,
    WideResNet,
    resolve_network,
)

IMAGE_NETWORKS = [name for name in NETWORKS if name not in ("mlp", "textcnn")]
# The big networks are slow on a CPU: standard 32x32 images only for the small ones.
FAST_NETWORKS = ["cnn", "resnet20", "resnet18"]


def _build(name, input_shape, n_classes=3, seed=0, **params):
    torch.manual_seed(seed)
    return NETWORKS[name](input_shape, n_classes, **params)


def _images(shape, n=2, seed=1):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand((n, *shape), generator=generator)


def _assert_relatively_close(actual, expected, rtol):
    scale = expected.abs().max().item()
    assert (actual.float() - expected).abs().max().item() <= rtol * scale + 1e-6


@pytest.mark.parametrize("name", IMAGE_NETWORKS)
@pytest.mark.parametrize("shape", [(1, 8, 8), (3, 5, 7), (2, 1, 1)])
@pytest.mark.slow
def test_image_network_output_and_features(name, shape):
    net = _build(name, shape, n_classes=4)
    x = _images(shape)
    features = net.features(x)
    assert features.shape == (2, net.head.in_features)
    assert isinstance(net.head, nn.Linear) and net.head.out_features == 4
    logits = net(x)
    assert logits.shape == (2, 4)
    assert torch.isfinite(logits).all()
    torch.testing.assert_close(logits, net.head(net.features(x)))


@pytest.mark.parametrize("name", FAST_NETWORKS)
def test_standard_image_size(name):
    net = _build(name, (3, 32, 32), n_classes=10)
    assert net(_images((3, 32, 32))).shape == (2, 10)


def test_fashion_mnist_shape_cnn():
    net = _build("cnn", (1, 28, 28), n_classes=10)
    assert net(_images((1, 28, 28))).shape == (2, 10)


def _n_parameters(name, input_shape=(3, 32, 32), n_classes=10, **params):
    with torch.device("meta"):
        net = NETWORKS[name](input_shape, n_classes, **params)
    return sum(p.numel() for p in net.parameters())


def _cifar_resnet_count(n, in_channels=3, n_classes=10):
    """Option-A CIFAR ResNet with n blocks per stage, counted by hand from the layers."""
    stem = in_channels * 16 * 9 + 2 * 16

    def block(c_in, c_out):
        return c_in * c_out * 9 + c_out * c_out * 9 + 4 * c_out

    stages = sum(
        block(c_in, c) + (n - 1) * block(c, c) for c_in, c in [(16, 16), (16, 32), (32, 64)]
    )
    return stem + stages + 64 * n_classes + n_classes


@pytest.mark.parametrize(
    "name, n, published_millions",
    [("resnet20", 3, 0.27), ("resnet32", 5, 0.46), ("resnet56", 9, 0.85), ("resnet110", 18, 1.7)],
)
def test_cifar_resnet_parameter_counts(name, n, published_millions):
    count = _n_parameters(name)
    assert count == _cifar_resnet_count(n)
    digits = 1 if published_millions >= 1 else 2
    assert round(count / 1e6, digits) == published_millions


@pytest.mark.parametrize(
    "name, published_millions",
    # CIFAR-10 figures of the implementations the calibration papers use (WRN-26-10 has
    # the layout Zagoruyko & Komodakis publish as WRN-28-10, 36.5M).
    [
        ("resnet18", 11.2),
        ("resnet50", 23.5),
        ("vgg16", 14.7),
        ("wrn26_10", 36.5),
        ("densenet121", 7.0),
    ],
)
def test_imagenet_style_parameter_counts(name, published_millions):
    assert round(_n_parameters(name) / 1e6, 1) == published_millions


def test_shortcut_b_adds_two_projections():
    a = _n_parameters("resnet20")
    b = _n_parameters("resnet20", shortcut="B")
    assert b - a == (16 * 32 + 2 * 32) + (32 * 64 + 2 * 64)


@pytest.mark.parametrize("name", IMAGE_NETWORKS)
@pytest.mark.slow
def test_parameters_follow_channels_and_classes(name):
    one = _n_parameters(name, (1, 8, 8), n_classes=10)
    three = _n_parameters(name, (3, 8, 8), n_classes=12)
    with torch.device("meta"):
        net = NETWORKS[name]((1, 8, 8), 10)
    first_conv = next(m for m in net.modules() if isinstance(m, nn.Conv2d))
    head_in = net.head.in_features
    per_channel = first_conv.out_channels * first_conv.kernel_size[0] * first_conv.kernel_size[1]
    assert three - one == 2 * per_channel + 2 * (head_in + 1)


@pytest.mark.parametrize("name", list(NETWORKS))
@pytest.mark.slow
def test_deterministic_init(name):
    shape = (7,) if name == "textcnn" else (64,) if name == "mlp" else (1, 8, 8)
    first = _build(name, shape, seed=3).state_dict()
    second = _build(name, shape, seed=3).state_dict()
    other = _build(name, shape, seed=4).state_dict()
    assert first.keys() == second.keys()
    for key in first:
        torch.testing.assert_close(first[key], second[key], rtol=0, atol=0)
    assert not torch.equal(first["head.weight"], other["head.weight"])


@pytest.mark.parametrize("name", IMAGE_NETWORKS)
@pytest.mark.slow
def test_backward_reaches_every_parameter(name):
    net = _build(name, (1, 8, 8))
    loss = nn.functional.cross_entropy(net(_images((1, 8, 8))), torch.tensor([0, 2]))
    loss.backward()
    for param_name, param in net.named_parameters():
        assert param.grad is not None, param_name
        assert torch.isfinite(param.grad).all(), param_name


@pytest.mark.parametrize("name", IMAGE_NETWORKS)
@pytest.mark.slow
def test_channels_last_and_bf16_autocast(name):
    # Untrained deep nets have large logits in eval mode, hence tolerances relative to them.
    # 16x16 images: on CPUs with AMX (Sapphire Rapids and later), oneDNN's bf16 kernels
    # are 13-19 % off for ResNet-18/50 on 9x6 images, whose last stages run at 1x1, and
    # return NaN about once in four runs (torch 2.13); at 16x16 they are within 2 %.
    net = _build(name, (3, 16, 16)).eval()
    x = _images((3, 16, 16))
    # bf16 runs in the contiguous layout, as the training engine does on a CPU (it uses
    # channels_last on CUDA only): oneDNN's bf16 kernels on AVX-512 CPUs return NaN for
    # ResNet-18/50 in channels_last (seen with torch 2.11 on the H100 host's CPU).
    with torch.no_grad():
        expected = net(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low_precision = net(x)
        net = net.to(memory_format=torch.channels_last)
        x_last = x.contiguous(memory_format=torch.channels_last)
        _assert_relatively_close(net(x_last), expected, rtol=1e-4)
    assert low_precision.dtype == torch.bfloat16
    _assert_relatively_close(low_precision, expected, rtol=0.1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", IMAGE_NETWORKS)
def test_cuda_channels_last_bf16_training_step(name):
    net = _build(name, (3, 32, 32), n_classes=10).cuda().to(memory_format=torch.channels_last)
    x = _images((3, 32, 32), n=8).cuda().contiguous(memory_format=torch.channels_last)
    y = torch.arange(8, device="cuda") % 10
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = net(x)
        loss = nn.functional.cross_entropy(logits, y)
    loss.backward()
    assert logits.shape == (8, 10) and logits.dtype == torch.bfloat16
    assert all(torch.isfinite(p.grad).all() for p in net.parameters())


def test_input_dtype_declared():
    for name, cls in NETWORKS.items():
        expected = torch.long if name == "textcnn" else torch.float32
        assert cls.input_dtype == expected, name


@pytest.mark.parametrize("seq_len", [1, 7, 60])
def test_textcnn_on_token_ids(seq_len):
    torch.manual_seed(0)
    net = TextCNN((seq_len,), 5, vocab_size=50, embedding_dim=8, n_filters=6, hidden_units=4)
    ids = torch.randint(0, 50, (2, seq_len), dtype=torch.int64)
    features = net.features(ids)
    assert features.shape == (2, net.head.in_features) == (2, 4)
    logits = net(ids)
    assert logits.shape == (2, 5)
    torch.testing.assert_close(logits, net.head(features))
    logits.sum().backward()
    assert all(p.grad is not None for p in net.parameters())


def test_textcnn_padding_embedding_is_zero_and_default_layers():
    net = _build("textcnn", (20,), vocab_size=30)
    embedding = net.features[0]
    assert isinstance(embedding, nn.Embedding) and embedding.num_embeddings == 30
    assert torch.equal(embedding.weight[0], torch.zeros(100))
    convolutions = [m for m in net.features if isinstance(m, nn.Conv1d)]
    assert len(convolutions) == 3 and all(c.out_channels == 128 for c in convolutions)
    # embedding, 3 conv blocks, 2 pools, global pool, dense layer, head: 8 layers after
    # the embedding
    pools = [m for m in net.features if isinstance(m, (nn.MaxPool1d, nn.AdaptiveMaxPool1d))]
    dense = [m for m in net.modules() if isinstance(m, nn.Linear)]
    assert len(convolutions) + len(pools) + len(dense) == 8


def test_textcnn_bf16_autocast():
    net = _build("textcnn", (12,), vocab_size=40)
    ids = torch.randint(0, 40, (2, 12))
    expected = net(ids)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low_precision = net(ids)
    _assert_relatively_close(low_precision, expected, rtol=0.1)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: TextCNN((4, 5), 2), r"\(seq_len,\)"),
        (lambda: TextCNN((9,), 2, kernel_size=4), "odd integer"),
        (lambda: ResNet20((64,), 2), r"\(channels, height, width\)"),
        (lambda: NETWORKS["vgg16"]((0, 8, 8), 2), r"\(channels, height, width\)"),
        (lambda: CifarResNet((1, 8, 8), 2, depth=21), "6n \\+ 2"),
        (lambda: CifarResNet((1, 8, 8), 2, shortcut="C"), "shortcut"),
        (lambda: WideResNet((1, 8, 8), 2, depth=28), "6n \\+ 2"),
    ],
)
def test_constructor_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_resolve_network():
    for name, cls in NETWORKS.items():
        assert resolve_network(name) is cls
    assert resolve_network(WideResNet) is WideResNet
    with pytest.raises(ValueError, match="Unknown network 'resnet19'.*resnet20"):
        resolve_network("resnet19")
    with pytest.raises(ValueError, match="network name or a torch.nn.Module subclass"):
        resolve_network(np.zeros(3))
    with pytest.raises(ValueError, match="network name or a torch.nn.Module subclass"):
        resolve_network(nn.Linear(2, 2))
