"""Test accuracy after each epoch at each learning rate: how NetClassifier's defaults are chosen.

For each data set (scikit-learn's digits, 1,347 training / 450 test images of 8x8 pixels;
Fashion-MNIST, the first ``--n-train`` training and ``--n-test`` test images of 28x28),
network (``"mlp"`` and ``"cnn"`` of the zoo, with their default sizes) and optimiser
(AdamW, Adam and SGD, without a recipe), ``NetClassifier`` trains with each learning rate
of a grid for ``--epochs`` epochs (batch 128, cross-entropy) and records the test
accuracy after every epoch. The script prints the accuracy after epochs 1, 3, 5, 10 and
the last (mean over ``--seeds`` seeds) and, per optimiser, the learning rate with the best
mean accuracy over the data sets and networks after 3 epochs and after the last.

Usage (from the repository root; ``PYTHONPATH=.`` is not needed when installed)::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/scripts/sweep_defaults.py \\
        [--epochs 20] [--seeds 0 1]
"""

import argparse
import itertools
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from skorch.callbacks import Callback

from sklearn_calib.datasets import load_fashion_mnist
from sklearn_calib.estimators import NetClassifier

GRIDS = {
    "adamw": (3e-4, 1e-3, 3e-3, 1e-2, 3e-2),
    "adam": (3e-4, 1e-3, 3e-3, 1e-2, 3e-2),
    "sgd": (0.01, 0.03, 0.1, 0.3, 1.0),
}
REPORTED_EPOCHS = (1, 3, 5, 10, 20, 30)


class TestAccuracy(Callback):
    """Records the accuracy on a test set after every epoch as ``test_acc``."""

    def __init__(self, X, y):
        self.X = X
        self.y = y

    def on_epoch_end(self, net, **kwargs):
        net.history.record("test_acc", float((net.predict(self.X) == self.y).mean()))


def datasets(n_train, n_test, data_home):
    """Return ``{name: (X_train, X_test, y_train, y_test)}`` as images (n, 1, H, W)."""
    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype(np.float32).reshape(-1, 1, 8, 8)
    digits = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    X_train, y_train, X_test, y_test = load_fashion_mnist(data_home=data_home, return_X_y=True)
    fashion = (X_train[:n_train], X_test[:n_test], y_train[:n_train], y_test[:n_test])
    return {"digits": digits, "fashion-mnist": fashion}


def run(data, network, optimizer, lr, epochs, seed):
    """Return the test accuracy after each epoch and the CPU seconds of the fit."""
    X_train, X_test, y_train, y_test = data
    start = time.process_time()
    net = NetClassifier(
        network,
        optimizer=optimizer,
        lr=lr,
        max_epochs=epochs,
        random_state=seed,
        callbacks=[TestAccuracy(X_test, y_test)],
    ).fit(X_train, y_train)
    return np.asarray(net.history[:, "test_acc"]), time.process_time() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--n-train", type=int, default=3000)
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--datasets", nargs="+", default=["digits", "fashion-mnist"])
    parser.add_argument("--networks", nargs="+", default=["mlp", "cnn"])
    parser.add_argument("--optimizers", nargs="+", default=list(GRIDS))
    parser.add_argument("--lrs", type=float, nargs="+", help="learning rates (default: a grid)")
    parser.add_argument("--data-home", default=None, help="folder of the Fashion-MNIST files")
    args = parser.parse_args()
    reported = [e for e in REPORTED_EPOCHS if e < args.epochs] + [args.epochs]
    header = " ".join(f"{'ep ' + str(e):>6}" for e in reported)
    print(f"{'data':>20} {'net':>4} {'optim':>6} {'lr':>7} {header} {'cpu s':>7}", flush=True)
    results = {}
    data_sets = datasets(args.n_train, args.n_test, args.data_home)
    for (name, data), network, optimizer in itertools.product(
        [(name, data_sets[name]) for name in args.datasets],
        args.networks,
        args.optimizers,
    ):
        for lr in args.lrs or GRIDS[optimizer]:
            runs = [run(data, network, optimizer, lr, args.epochs, s) for s in args.seeds]
            accuracy = np.mean([acc for acc, _ in runs], axis=0)
            cpu = np.mean([seconds for _, seconds in runs])
            results[name, network, optimizer, lr] = accuracy
            cells = " ".join(f"{100 * accuracy[e - 1]:>6.1f}" for e in reported)
            print(
                f"{name:>20} {network:>4} {optimizer:>6} {lr:>7g} {cells} {cpu:>7.1f}", flush=True
            )
    print()
    for optimizer in args.optimizers:
        for epoch in sorted({min(3, args.epochs), args.epochs}):
            means = {
                lr: np.mean(
                    [acc[epoch - 1] for key, acc in results.items() if key[2:] == (optimizer, lr)]
                )
                for lr in args.lrs or GRIDS[optimizer]
            }
            best = max(means, key=means.get)
            table = ", ".join(f"{lr:g}: {100 * m:.1f}" for lr, m in means.items())
            print(f"{optimizer}, mean accuracy after epoch {epoch}: {table}; best lr {best:g}")


if __name__ == "__main__":
    main()
