"""Per-epoch training time of NetClassifier against plain skorch and a hand-written loop.

ResNet-20 on Fashion-MNIST (the first ``--n-train`` of the 60,000 training images, 55,000
by default as in the papers' 55k/5k split), batch 128, cross-entropy, SGD (momentum 0.9,
weight decay 5e-4, lr 0.05 divided by 10 at 50 % and 75 % of the epochs, so that the final
accuracies are comparable), the same epochs and seed for the three trainers:

- ``NetClassifier``: data on the device, bf16 autocast, the whole step as a CUDA graph;
- ``skorch``: a plain ``skorch.NeuralNetClassifier`` with the same module and batch size
  (float32, torch DataLoader over host arrays);
- ``hand loop``: a minimal PyTorch loop with the data on the device, bf16 autocast and a
  foreach SGD step (no per-step host synchronisation).

It prints each trainer's per-epoch times, the mean without the first (warm-up) epoch,
the ratios to NetClassifier and the test accuracy of each. On a machine without CUDA it
runs on the CPU; keep it small there, e.g. ``--n-train 512 --n-test 500 --epochs 2``.
``--network mlp --hidden-units 512 512`` trains the zoo's MLP instead (flattened images),
the CPU comparison of NetClassifier's loop with the hand-written one.

Usage::

    PYTHONPATH=. python benchmarks/speed/bench_training.py [--epochs 5] [--device auto] \\
        [--n-train 55000]
    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/speed/bench_training.py --device cpu \\
        --clock cpu --network mlp --hidden-units 512 512 --only net loop --epochs 4

(from the repository root; ``PYTHONPATH=.`` is not needed when the package is installed).
"""

import argparse
import platform
import time

import numpy as np
import torch
from skorch import NeuralNetClassifier
from skorch.callbacks import Callback, LRScheduler
from torch import nn

from sklearn_calib.datasets import load_fashion_mnist
from sklearn_calib.estimators import NetClassifier, resolve_device
from sklearn_calib.estimators.networks import NETWORKS

LR, MOMENTUM, WEIGHT_DECAY = 0.05, 0.9, 5e-4


def milestones(epochs):
    """Epochs after which the learning rate is divided by 10."""
    return [max(1, epochs // 2), max(1, (3 * epochs) // 4)]


def step_decay(epochs):
    """The same step decay for skorch-based trainers, as a callback."""
    return LRScheduler(policy="MultiStepLR", milestones=milestones(epochs), gamma=0.1)


class CPUTimer(Callback):
    """Records the CPU seconds of each epoch of a skorch net as ``cpu_dur``."""

    def on_epoch_begin(self, net, **kwargs):
        self.start = time.process_time()

    def on_epoch_end(self, net, **kwargs):
        net.history.record("cpu_dur", time.process_time() - self.start)


def clock(args):
    """The clock of the epoch times: wall (``perf_counter``) or this process's CPU time."""
    return time.process_time if args.clock == "cpu" else time.perf_counter


def durations_of(net, args):
    """The epoch times of a skorch net on the chosen clock."""
    return net.history[:, "cpu_dur" if args.clock == "cpu" else "dur"]


def network_params(args):
    """Keyword arguments of the benchmarked network (besides its input shape and classes)."""
    return {"hidden_units": tuple(args.hidden_units)} if args.network == "mlp" else {}


def later_epochs(durations):
    """Mean epoch time without the first (warm-up) epoch, or the only epoch's."""
    return durations[1:].mean() if len(durations) > 1 else durations[0]


def load_data(n_train, n_test, data_home):
    X_train, y_train, X_test, y_test = load_fashion_mnist(data_home=data_home, return_X_y=True)
    mean, std = X_train.mean(), X_train.std()
    X_train = ((X_train[:n_train] - mean) / std).astype(np.float32)
    X_test = ((X_test[:n_test] - mean) / std).astype(np.float32)
    return X_train, y_train[:n_train], X_test, y_test[:n_test]


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_net_classifier(data, args, device):
    X_train, y_train, X_test, y_test = data
    net = NetClassifier(
        module=args.network,
        **{f"module__{k}": v for k, v in network_params(args).items()},
        criterion="ce",
        optimizer="sgd",
        lr=LR,
        optimizer__momentum=MOMENTUM,
        optimizer__weight_decay=WEIGHT_DECAY,
        batch_size=args.batch_size,
        max_epochs=args.epochs,
        callbacks=[step_decay(args.epochs), CPUTimer()],
        device=device,
        random_state=args.seed,
    ).fit(X_train, y_train)
    graphs = all(net.history[:, "cuda_graph"])
    mode = "CUDA graph" if graphs else "eager"
    return durations_of(net, args), net.score(X_test, y_test), mode


def run_skorch(data, args, device):
    X_train, y_train, X_test, y_test = data
    torch.manual_seed(args.seed)
    net = NeuralNetClassifier(
        NETWORKS[args.network],
        **{f"module__{k}": v for k, v in network_params(args).items()},
        module__input_shape=X_train.shape[1:],
        module__n_classes=10,
        criterion=nn.CrossEntropyLoss,
        optimizer=torch.optim.SGD,
        lr=LR,
        optimizer__momentum=MOMENTUM,
        optimizer__weight_decay=WEIGHT_DECAY,
        batch_size=args.batch_size,
        max_epochs=args.epochs,
        callbacks=[step_decay(args.epochs), CPUTimer()],
        train_split=None,
        iterator_train__shuffle=True,
        device=str(device),
        verbose=0,
    ).fit(X_train, y_train)
    accuracy = float((net.predict(X_test) == y_test).mean())
    return durations_of(net, args), accuracy, "fp32, DataLoader"


def run_hand_loop(data, args, device):
    X_train, y_train, X_test, y_test = data
    torch.manual_seed(args.seed)
    model = NETWORKS[args.network](X_train.shape[1:], 10, **network_params(args)).to(device)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY
    )
    X = torch.from_numpy(X_train).to(device)
    y = torch.from_numpy(y_train).to(device)
    bf16 = device.type == "cuda"
    generator = torch.Generator(device=device).manual_seed(args.seed)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones(args.epochs), 0.1)
    durations = []
    for _ in range(args.epochs):
        start = clock(args)()
        model.train()
        perm = torch.randperm(len(X), device=device, generator=generator)
        for i in range(0, len(X), args.batch_size):
            index = perm[i : i + args.batch_size]
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                loss = nn.functional.cross_entropy(model(X[index]).float(), y[index])
            loss.backward()
            optimizer.step()
        scheduler.step()
        synchronize(device)
        durations.append(clock(args)() - start)
    model.eval()
    correct = 0
    with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        for i in range(0, len(X_test), 1024):
            batch = torch.from_numpy(X_test[i : i + 1024]).to(device)
            correct += int((model(batch).argmax(1).cpu().numpy() == y_test[i : i + 1024]).sum())
    return durations, correct / len(X_test), "bf16" if bf16 else "fp32"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--device", default="auto", help="'auto', 'cuda' or 'cpu'")
    parser.add_argument("--n-train", type=int, default=55000)
    parser.add_argument("--n-test", type=int, default=10000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--network", choices=["resnet20", "mlp"], default="resnet20")
    parser.add_argument("--hidden-units", type=int, nargs="+", default=[512, 512])
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="epoch times in wall seconds, or in this process's CPU seconds (for a busy "
        "machine; with OMP_NUM_THREADS=1 on the CPU)",
    )
    parser.add_argument("--data-home", default=None, help="folder of the Fashion-MNIST files")
    parser.add_argument(
        "--only", nargs="+", choices=["net", "skorch", "loop"], default=["net", "skorch", "loop"]
    )
    args = parser.parse_args()
    device = resolve_device(args.device)
    data = load_data(args.n_train, args.n_test, args.data_home)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.machine()
    print(
        f"{args.network}, Fashion-MNIST: {len(data[0])} train / {len(data[2])} test images, "
        f"batch {args.batch_size}, {args.epochs} epochs, seed {args.seed}, "
        f"device {device} ({name}), torch {torch.__version__}"
    )
    trainers = {
        "net": ("NetClassifier", run_net_classifier),
        "skorch": ("skorch", run_skorch),
        "loop": ("hand loop", run_hand_loop),
    }
    results = {}
    for key in args.only:
        label, run = trainers[key]
        durations, accuracy, mode = run(data, args, device)
        results[key] = (label, np.asarray(durations, dtype=float), accuracy, mode)
        per_epoch = " ".join(f"{d:.2f}" for d in durations)
        print(f"{label:>13} ({mode}): epochs [s] {per_epoch}", flush=True)
    print()
    print(f"{'trainer':>13} {'first epoch':>12} {'mean later':>11} {'ratio':>7} {'test acc':>9}")
    reference = results.get("net")
    for label, durations, accuracy, _ in results.values():
        later = later_epochs(durations)
        ratio = f"{later / later_epochs(reference[1]):.2f}x" if reference is not None else ""
        print(
            f"{label:>13} {durations[0]:>11.2f}s {later:>10.2f}s {ratio:>7} {100 * accuracy:>8.2f}%"
        )
    if reference is not None:
        print("ratio: mean later-epoch time of the trainer / NetClassifier's (higher = slower)")
    if reference is not None and "loop" in results:
        overhead = later_epochs(reference[1]) / later_epochs(results["loop"][1])
        print(f"NetClassifier / hand loop (mean later-epoch time): {overhead:.2f}")


if __name__ == "__main__":
    main()
