"""Training-time overhead of meta-regularisation (FLgamma-SECE) over plain focal loss.

The same network, data, batch size, optimiser and seed for both trainers:

- ``focal``: :class:`~sklearn_calib.estimators.NetClassifier` with focal loss (gamma 1,
  the gamma-Net's starting value) and ``train_split=0.2``;
- ``FLgamma-SECE``: :class:`~sklearn_calib.estimators.MetaNetClassifier` with the gamma-Net
  and the SECE meta loss, split 8:1:1 into train / validation / meta-validation.

Both train on 80 % of the ``--n-train`` samples, so an epoch has the same number of steps;
each step of FLgamma-SECE adds a no-grad forward pass of the backbone on a meta batch of
the batch size and a virtual step of the head (``--lookahead bohdal2021``, the estimator's
default), or a virtual SGD step of the whole network with second-order gradients and the
forward pass of a meta batch of 512 through the virtually updated network (``--lookahead
network_tuned``), then SECE and two Adam steps of the gamma-Net. SGD (momentum 0.9, weight decay
5e-4), the "onecycle" learning rate schedule (peak ``--lr``), bf16 autocast and CUDA graphs
on CUDA (NetClassifier's defaults). The script prints each trainer's per-epoch times (the
history's ``dur``, which includes the validation pass and, for FLgamma-SECE, the gamma
statistics), the mean over the epochs after the first (which holds the CUDA-graph capture),
their ratio, and the test accuracy and ECE (15 bins) of both, and FLgamma-SECE's per-epoch
gamma mean and standard deviation (validation part) and mean meta loss (SECE on the meta
batches).

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/speed/bench_meta.py [--device auto] [--module resnet20] \\
        [--dataset fashion_mnist] [--epochs 5] [--n-train 55000] [--meta-lr 1e-2] \\
        [--lookahead bohdal2021]

Small on a CPU: ``--dataset digits --module mlp --epochs 3`` or ``--n-train 1000 --n-test
500 --epochs 2``.
"""

import argparse
import platform

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from sklearn_calib.datasets import load_fashion_mnist
from sklearn_calib.estimators import (
    LOOKAHEADS,
    MetaNetClassifier,
    NetClassifier,
    resolve_device,
)
from sklearn_calib.scoring import expected_calibration_error


def load_data(args):
    """Return standardised ``X_train, y_train, X_test, y_test`` as images or flat rows."""
    if args.dataset == "digits":
        X, y = load_digits(return_X_y=True)
        X = (X / 16.0).reshape(-1, 1, 8, 8)
        X_train, X_test, y_train, y_test = train_test_split(
            X, y, test_size=0.25, random_state=args.seed, stratify=y
        )
    else:
        X_train, y_train, X_test, y_test = load_fashion_mnist(
            data_home=args.data_home, return_X_y=True
        )
    X_train, y_train = X_train[: args.n_train], y_train[: args.n_train]
    X_test, y_test = X_test[: args.n_test], y_test[: args.n_test]
    mean, std = X_train.mean(), X_train.std()
    X_train = ((X_train - mean) / std).astype(np.float32)
    X_test = ((X_test - mean) / std).astype(np.float32)
    if args.module == "mlp":
        X_train, X_test = X_train.reshape(len(X_train), -1), X_test.reshape(len(X_test), -1)
    return X_train, y_train, X_test, y_test


def common_params(args, device):
    return {
        "module": args.module,
        "optimizer": "sgd",
        "lr": args.lr,
        "optimizer__momentum": 0.9,
        "optimizer__weight_decay": 5e-4,
        "recipe": "onecycle",
        "batch_size": args.batch_size,
        "max_epochs": args.epochs,
        "cuda_graphs": {"auto": "auto", "on": True, "off": False}[args.cuda_graphs],
        "device": device,
        "random_state": args.seed,
    }


def build(kind, args, device):
    params = common_params(args, device)
    if kind == "focal":
        return NetClassifier(criterion="focal", criterion__gamma=1.0, train_split=0.2, **params)
    return MetaNetClassifier(
        regularizer="gamma_net",
        meta_loss="sece",
        meta_lr=args.meta_lr,
        lookahead=args.lookahead,
        **params,
    )


def later_mean(durations):
    return durations[1:].mean() if len(durations) > 1 else durations[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="auto", help="'auto', 'cuda' or 'cpu'")
    parser.add_argument("--module", default="resnet20", help="a network of the zoo")
    parser.add_argument("--dataset", choices=["fashion_mnist", "digits"], default="fashion_mnist")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--n-train", type=int, default=55000)
    parser.add_argument("--n-test", type=int, default=10000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--cuda-graphs", choices=["auto", "on", "off"], default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--meta-lr", type=float, default=None, help="gamma-Net step in units of gamma (1e-2)"
    )
    parser.add_argument(
        "--lookahead",
        choices=sorted(LOOKAHEADS),
        default="bohdal2021",
        help="the virtual step (MetaNetClassifier's lookahead)",
    )
    parser.add_argument("--data-home", default=None, help="folder of the Fashion-MNIST files")
    args = parser.parse_args()
    device = resolve_device(args.device)
    X_train, y_train, X_test, y_test = load_data(args)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.machine()
    print(
        f"{args.module} on {args.dataset}: {len(X_train)} samples (80 % trained on per epoch), "
        f"{len(X_test)} test, batch {args.batch_size}, {args.epochs} epochs, seed {args.seed}, "
        f"lookahead {args.lookahead}, device {device} ({name}), torch {torch.__version__}"
    )
    results = {}
    for kind in ("focal", "FLgamma-SECE"):
        net = build(kind, args, device).fit(X_train, y_train)
        durations = np.asarray(net.history[:, "dur"], dtype=float)
        steps = net.history[-1, "train_batch_count"]
        proba = net.predict_proba(X_test)
        accuracy = float((net.classes_[proba.argmax(1)] == y_test).mean())
        ece = expected_calibration_error(y_test, proba, labels=net.classes_)
        mode = "CUDA graph" if all(net.history[:, "cuda_graph"]) else "eager"
        results[kind] = (durations, steps, accuracy, ece)
        epochs = " ".join(f"{d:.2f}" for d in durations)
        extra = ""
        if kind != "focal":
            extra = (
                f", gamma mean {net.history[-1, 'gamma_mean']:.3f} "
                f"std {net.history[-1, 'gamma_std']:.4f}"
            )
        print(f"{kind:>13} ({mode}, {steps} steps/epoch): epochs [s] {epochs}{extra}", flush=True)
        if kind != "focal":
            for key in ("gamma_mean", "gamma_std", "meta_loss"):
                values = " ".join(f"{v:.4f}" for v in net.history[:, key])
                print(f"{'':>13} per epoch {key}: {values}")
    print()
    print(
        f"{'trainer':>13} {'first epoch':>12} {'mean later':>11} {'ms/step':>8} {'ratio':>7} "
        f"{'test acc':>9} {'ECE':>7}"
    )
    base = later_mean(results["focal"][0])
    for kind, (durations, steps, accuracy, ece) in results.items():
        later = later_mean(durations)
        print(
            f"{kind:>13} {durations[0]:>11.2f}s {later:>10.2f}s {1000 * later / steps:>8.2f} "
            f"{later / base:>6.2f}x {100 * accuracy:>8.2f}% {100 * ece:>6.2f}%"
        )
    print("ratio: mean later-epoch time / focal's (per epoch, same steps per epoch)")


if __name__ == "__main__":
    main()
