import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import multivariate_normal
from sklearn.datasets import load_digits

from sklearn_calib.datasets import (
    FASHION_MNIST_HOME,
    load_digits_images,
    load_fashion_mnist,
    make_gaussian_blobs,
)
from sklearn_calib.datasets._idx import read_idx

FILES = [
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
]


def _idx_bytes(array, type_code=0x08):
    header = bytes([0, 0, type_code, array.ndim])
    header += np.asarray(array.shape, dtype=">u4").tobytes()
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


@pytest.mark.slow
def test_fashion_mnist_shapes_and_values(fashion_mnist):
    assert fashion_mnist.X_train.shape == (60000, 1, 28, 28)
    assert fashion_mnist.X_test.shape == (10000, 1, 28, 28)
    assert fashion_mnist.X_train.dtype == fashion_mnist.X_test.dtype == np.float32
    assert fashion_mnist.y_train.dtype == fashion_mnist.y_test.dtype == np.int64
    assert fashion_mnist.X_train.min() == 0.0 and fashion_mnist.X_train.max() == 1.0
    assert fashion_mnist.X_test.min() == 0.0 and fashion_mnist.X_test.max() == 1.0
    # Fashion-MNIST is balanced: 6000 training and 1000 test images per class
    np.testing.assert_array_equal(np.bincount(fashion_mnist.y_train), np.full(10, 6000))
    np.testing.assert_array_equal(np.bincount(fashion_mnist.y_test), np.full(10, 1000))
    assert list(fashion_mnist.target_names[[0, 9]]) == ["T-shirt/top", "Ankle boot"]
    # the published training-set pixel mean, 0.2860
    assert abs(fashion_mnist.X_train.mean() - 0.2860) < 5e-4


@pytest.mark.slow
def test_fashion_mnist_raw_flat_and_tuple(fashion_mnist):
    X_train, y_train, X_test, y_test = load_fashion_mnist(
        return_X_y=True, as_image=False, normalize=False
    )
    assert X_train.shape == (60000, 784) and X_test.shape == (10000, 784)
    assert X_train.dtype == np.uint8 and X_train.max() == 255
    np.testing.assert_array_equal(
        X_train / np.float32(255), fashion_mnist.X_train.reshape(60000, -1)
    )
    np.testing.assert_array_equal(y_test, fashion_mnist.y_test)


@pytest.mark.slow
def test_fashion_mnist_uncompressed_files(tmp_path, fashion_mnist):
    for name in FILES:
        source = Path(FASHION_MNIST_HOME) / name
        if source.is_file():
            shutil.copy(source, tmp_path / name)
        else:
            with gzip.open(f"{source}.gz", "rb") as src, open(tmp_path / name, "wb") as dst:
                shutil.copyfileobj(src, dst)
    X_train, y_train, X_test, y_test = load_fashion_mnist(data_home=tmp_path, return_X_y=True)
    np.testing.assert_array_equal(X_test, fashion_mnist.X_test)
    np.testing.assert_array_equal(y_train, fashion_mnist.y_train)


def test_fashion_mnist_missing_files_say_how_to_install(tmp_path):
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(b"")
    with pytest.raises(FileNotFoundError) as error:
        load_fashion_mnist(data_home=tmp_path)
    message = str(error.value)
    assert "apt-get install dataset-fashion-mnist" in message
    assert "data_home" in message
    assert str(tmp_path) in message
    assert "t10k-labels-idx1-ubyte" in message
    assert "train-images-idx3-ubyte[" not in message


def test_fashion_mnist_wrong_shape(tmp_path):
    for name in FILES:
        shape = (3, 28, 28) if "images" in name else (3,)
        (tmp_path / name).write_bytes(_idx_bytes(np.zeros(shape, dtype=np.uint8)))
    with pytest.raises(ValueError, match=r"shape \(60000, 28, 28\).*got uint8 of shape \(3, 28"):
        load_fashion_mnist(data_home=tmp_path)


@pytest.mark.parametrize("compressed", [False, True])
def test_read_idx_round_trip(tmp_path, compressed):
    array = np.arange(24, dtype=np.int32).reshape(2, 3, 4) - 5
    content = _idx_bytes(array, type_code=0x0C)
    path = tmp_path / ("a.idx.gz" if compressed else "a.idx")
    path.write_bytes(gzip.compress(content) if compressed else content)
    result = read_idx(path)
    np.testing.assert_array_equal(result, array)
    assert result.dtype == np.int32 and result.flags.writeable


def test_read_idx_rejects_bad_magic_and_truncation(tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x01\x00\x08\x01\x00\x00\x00\x02ab")
    with pytest.raises(ValueError, match="Expected an IDX file.*01 00 08 01"):
        read_idx(bad)
    truncated = tmp_path / "truncated"
    truncated.write_bytes(_idx_bytes(np.zeros((4, 5), dtype=np.uint8))[:-1])
    with pytest.raises(ValueError, match="Expected 32 bytes.*got 31"):
        read_idx(truncated)


def test_read_idx_rejects_a_truncated_or_foreign_gzip_file(tmp_path):
    compressed = gzip.compress(_idx_bytes(np.zeros((4, 5), dtype=np.uint8)))
    cut = tmp_path / "cut.idx.gz"
    cut.write_bytes(compressed[:-10])
    with pytest.raises(ValueError, match="readable gzip-compressed IDX file at .*cut.idx.gz"):
        read_idx(cut)
    text = tmp_path / "text.idx.gz"
    text.write_text("garbage")
    with pytest.raises(ValueError, match="readable gzip-compressed IDX file at .*text.idx.gz"):
        read_idx(text)


def test_load_digits_images():
    data = load_digits_images()
    digits = load_digits()
    assert data.data.shape == (1797, 1, 8, 8) and data.data.dtype == np.float32
    assert data.data.min() == 0.0 and data.data.max() == 1.0
    np.testing.assert_array_equal(data.data.reshape(1797, 64), digits.data / 16)
    np.testing.assert_array_equal(data.target, digits.target)
    assert data.target.dtype == np.int64
    X, y = load_digits_images(return_X_y=True)
    np.testing.assert_array_equal(X, data.data)


def test_gaussian_blobs_posterior_matches_densities():
    X, y, eta, centers = make_gaussian_blobs(200, random_state=0, return_centers=True)
    assert X.shape == (1000, 2) and eta.shape == (1000, 5) and centers.shape == (5, 2)
    np.testing.assert_array_equal(np.bincount(y), np.full(5, 200))
    assert y.dtype == np.int64
    assert ((centers >= -10) & (centers <= 10)).all()
    np.testing.assert_allclose(eta.sum(axis=1), 1.0, atol=1e-12)
    densities = np.column_stack([multivariate_normal(mu, np.eye(2)).pdf(X) for mu in centers])
    np.testing.assert_allclose(eta, densities / densities.sum(axis=1, keepdims=True), atol=1e-10)
    # each point lies near its class mean: N(mu, I) draws are within 5 of it
    assert (np.linalg.norm(X - centers[y], axis=1) < 5).all()
    # the Bayes classifier on well-separated means is right most of the time
    assert (eta.argmax(axis=1) == y).mean() > 0.8


def test_gaussian_blobs_seeding_and_test_split():
    first = make_gaussian_blobs(50, random_state=7, return_centers=True)
    second = make_gaussian_blobs(50, random_state=7, return_centers=True)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    X_test, y_test, eta_test = make_gaussian_blobs(20, centers=first[3], random_state=8)
    assert X_test.shape == (100, 2)
    assert not np.array_equal(X_test, first[0][:100])
    means = np.array([X_test[y_test == k].mean(axis=0) for k in range(5)])
    np.testing.assert_allclose(means, first[3], atol=1.0)
    X, y, _ = make_gaussian_blobs(3, n_classes=4, n_features=3, shuffle=False, random_state=0)
    assert X.shape == (12, 3)
    np.testing.assert_array_equal(y, np.repeat(np.arange(4), 3))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_samples_per_class": 0}, "n_samples_per_class"),
        ({"n_classes": 1}, "n_classes"),
        ({"center_box": (1.0, -1.0)}, "center_box"),
        ({"centers": np.zeros((1, 2))}, "centers"),
        ({"centers": [[0.0, np.nan], [1.0, 1.0]]}, "centers"),
    ],
)
def test_gaussian_blobs_errors(params, match):
    params = {"n_samples_per_class": 5, **params}
    with pytest.raises(ValueError, match=match):
        make_gaussian_blobs(**params)
