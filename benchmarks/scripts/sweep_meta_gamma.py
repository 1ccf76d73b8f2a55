"""Sweep of the gamma-Net's meta step in an overconfident CPU regime.

One run per call, stored as JSON under ``--out`` (a run already stored is skipped), so a
sweep is a list of calls that can be resumed; ``--summary`` prints the Markdown table of
the stored runs.

Regime: an MLP (512, 512) on ``--n-fit`` standardised Fashion-MNIST training images (a
seeded subset; the next ``--n-val`` images are a validation set the fit never sees), the
wang2021 recipe (SGD momentum 0.9, weight decay 1e-4, lr ``--lr`` divided by 10 at 50 %
and 75 % of the epochs), batch 128, ``--epochs`` epochs, one torch thread.
Cross-entropy ends overconfident there (validation NLL temperature 1.95 at 20 epochs).

Methods: ``--method ce`` or ``focal`` (:class:`~sklearn_calib.estimators.NetClassifier`,
focal gamma 1) on all ``--n-fit`` images, or ``meta`` (FLgamma-SECE by default:
:class:`~sklearn_calib.estimators.MetaNetClassifier` with ``train_split=None``, so 10 %
of the images are its meta-validation part and the history's ``gamma_mean`` and
``gamma_std`` are those of that part) with the estimator parameters given as JSON in
``--params`` (e.g. ``'{"meta_lr": 0.01, "bandwidth": 0.1}'``,
``'{"meta_optimizer__lr": 0.001}'``).

Per epoch the run records the validation and test (official 10,000 images) ECE (15 bins)
and accuracy and, for the gamma-Net, the mean, standard deviation, quantiles (0, 5, 50,
95, 100 %) and a histogram of :meth:`~sklearn_calib.estimators.MetaNetClassifier.sample_gamma`
on the validation set; at the end the validation set's NLL-optimal temperature, the wall
time and the process CPU time.

``--probe`` instead trains focal loss (gamma 1) in the same regime and, after the epochs
``--probe-epochs``, compares on 40 random pairs of a training batch (128) and a meta batch
(128, from 1,111 held-out images) the gradient of SECE after one virtual SGD step (the
network's current learning rate) with respect to the training batch's per-sample gammas
(all 1), in float64, for a virtual step of the head only on detached features (the
library's meta step) and of the whole network: their cosine and norm ratio, and the
signal-to-noise ratio (mean / std over the pairs) of their sum, also for SECE bandwidths
0.05 and 0.1 and a meta batch of 1024 (head only). It writes ``probe.json``.

Usage (from the repository root)::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/scripts/sweep_meta_gamma.py NAME \\
        [--method meta] [--epochs 20] [--seed 0] [--params JSON] [--out DIR]
    PYTHONPATH=. python benchmarks/scripts/sweep_meta_gamma.py --summary [--out DIR]
    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/scripts/sweep_meta_gamma.py --probe \\
        [--probe-epochs 4,9,14,19] [--out DIR]

Small: ``--n-fit 1000 --n-val 300 --epochs 2``.
"""

import argparse
import copy
import json
import time
from pathlib import Path

import numpy as np
import torch
from skorch.callbacks import Callback
from torch.func import functional_call

from sklearn_calib import MetaNetClassifier, TemperatureScaling
from sklearn_calib.datasets import load_fashion_mnist
from sklearn_calib.estimators import NetClassifier
from sklearn_calib.losses import FocalLoss, smooth_calibration_error
from sklearn_calib.scoring import expected_calibration_error

#: Edges of the recorded histogram of gamma.
GAMMA_BINS = [0, 0.25, 0.5, 0.75, 0.9, 1.1, 1.25, 1.5, 2, 3, 5, 10, float("inf")]
#: Epochs (1-based; the last is always added) shown in the summary's trajectories.
SHOWN_EPOCHS = (1, 5, 10, 15)


def load_data(n_fit, n_val):
    """Standardised training subset, validation subset and test set (flat float32)."""
    X, y, X_test, y_test = load_fashion_mnist(return_X_y=True, as_image=False)
    order = np.random.default_rng(0).permutation(len(X))
    fit, val = order[:n_fit], order[n_fit : n_fit + n_val]
    mean, std = X[fit].mean(0), X[fit].std(0) + 1e-3

    def standardise(values):
        return ((values - mean) / std).astype(np.float32)

    return standardise(X[fit]), y[fit], standardise(X[val]), y[val], standardise(X_test), y_test


class EpochMetrics(Callback):
    """Record validation/test ECE and accuracy and the gamma-Net's gamma on validation."""

    def __init__(self, X_val, y_val, X_test, y_test):
        self.X_val, self.y_val, self.X_test, self.y_test = X_val, y_val, X_test, y_test

    def on_epoch_end(self, net, **kwargs):
        row = {}
        for name, X, y in (("val", self.X_val, self.y_val), ("test", self.X_test, self.y_test)):
            proba = net.predict_proba(X)
            row[f"{name}_ece"] = expected_calibration_error(y, proba)
            row[f"{name}_acc"] = float((proba.argmax(1) == y).mean())
        if isinstance(net, MetaNetClassifier) and net.regularizer == "gamma_net":
            gamma = net.sample_gamma(self.X_val)
            row["vgamma_mean"], row["vgamma_std"] = float(gamma.mean()), float(gamma.std())
            row["vgamma_q"] = np.quantile(gamma, [0.0, 0.05, 0.5, 0.95, 1.0]).tolist()
            row["vgamma_hist"] = np.histogram(gamma, GAMMA_BINS)[0].tolist()
        for key, value in row.items():
            net.history.record(key, value)


def run(args):
    path = Path(args.out) / f"{args.name}.json"
    if path.exists():
        print(f"{path} is stored already")
        return
    torch.set_num_threads(1)
    X, y, X_val, y_val, X_test, y_test = load_data(args.n_fit, args.n_val)
    common = {
        "module": "mlp",
        "module__hidden_units": (512, 512),
        "recipe": "wang2021",
        "lr": args.lr,
        "max_epochs": args.epochs,
        "batch_size": 128,
        "random_state": args.seed,
        "callbacks": [("metrics", EpochMetrics(X_val, y_val, X_test, y_test))],
    }
    params = json.loads(args.params)
    if args.method == "meta":
        net = MetaNetClassifier(train_split=None, **common, **params)
    elif args.method == "focal":
        net = NetClassifier(criterion="focal", **{"criterion__gamma": 1.0, **common, **params})
    else:
        net = NetClassifier(criterion="ce", **common, **params)
    start, cpu = time.time(), time.process_time()
    net.fit(X, y)
    wall, cpu = time.time() - start, time.process_time() - cpu
    scaling = TemperatureScaling(input="probabilities").fit(net.predict_proba(X_val), y_val)
    keys = [key for key in net.history[-1] if key != "batches"]
    record = {
        "name": args.name,
        "args": vars(args),
        "wall": wall,
        "cpu": cpu,
        "temperature": float(scaling.temperature_),
        "history": [{key: epoch.get(key) for key in keys} for epoch in net.history],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    last = record["history"][-1]
    print(
        f"{args.name}: T {record['temperature']:.2f}, val ECE {100 * last['val_ece']:.2f} %, "
        f"test ECE {100 * last['test_ece']:.2f} %, gamma {last.get('gamma_mean')} "
        f"+- {last.get('gamma_std')}, CPU {cpu:.0f} s"
    )


def _meta_gradient(module, lr, batch, meta_batch, bandwidth, whole):
    """d SECE(meta batch after a virtual SGD step) / d (per-sample gamma), float64."""
    (X, y), (X_meta, y_meta) = batch, meta_batch
    module = copy.deepcopy(module).double()
    gamma = torch.ones(len(y), dtype=torch.float64, requires_grad=True)
    params = dict(module.named_parameters())
    if whole:
        logits, stepped = functional_call(module, params, (X.double(),)), list(params)
    else:
        features = module.features(X.double()).detach()
        logits = features @ params["head.weight"].T + params["head.bias"]
        stepped = ["head.weight", "head.bias"]
    inner = FocalLoss(gamma=1.0)(logits, y, gamma=gamma)
    grads = torch.autograd.grad(inner, [params[n] for n in stepped], create_graph=True)
    updated = {**params, **{n: params[n] - lr * g for n, g in zip(stepped, grads, strict=True)}}
    if whole:
        meta_logits = functional_call(module, updated, (X_meta.double(),))
    else:
        meta_features = module.features(X_meta.double()).detach()
        meta_logits = meta_features @ updated["head.weight"].T + updated["head.bias"]
    loss = smooth_calibration_error(torch.softmax(meta_logits, 1), y_meta, bandwidth=bandwidth)
    return torch.autograd.grad(loss, gamma)[0].numpy()


class MetaGradientProbe(Callback):
    """At some epochs, compare head-only and whole-network meta-gradients on batch pairs."""

    variants = {  # name: (bandwidth, meta batch size, whole network)
        "head": (0.01, 128, False),
        "whole": (0.01, 128, True),
        "head_bandwidth_0.05": (0.05, 128, False),
        "head_bandwidth_0.1": (0.1, 128, False),
        "head_meta_batch_1024": (0.01, 1024, False),
    }

    def __init__(self, train, meta, epochs, n_pairs=40):
        self.train, self.meta, self.epochs, self.n_pairs = train, meta, epochs, n_pairs
        self.results = []

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) not in self.epochs:
            return
        lr = float(net.optimizer_.param_groups[0]["lr"])
        rng = np.random.default_rng(len(net.history))
        grads = {name: [] for name in self.variants}
        for _ in range(self.n_pairs):
            index = rng.choice(len(self.train[1]), 128, replace=False)
            batch = (self.train[0][index], self.train[1][index])
            meta_index = rng.permutation(len(self.meta[1]))
            for name, (bandwidth, size, whole) in self.variants.items():
                chosen = meta_index[:size]
                meta_batch = (self.meta[0][chosen], self.meta[1][chosen])
                grads[name].append(
                    _meta_gradient(net.module_, lr, batch, meta_batch, bandwidth, whole)
                )
        head, whole = np.array(grads["head"]), np.array(grads["whole"])
        norms = np.linalg.norm(head, axis=1), np.linalg.norm(whole, axis=1)
        cosine = (head * whole).sum(1) / (norms[0] * norms[1])
        row = {
            "epoch": len(net.history),
            "lr": lr,
            "cosine_quantiles_10_50_90": np.quantile(cosine, [0.1, 0.5, 0.9]).tolist(),
            "norm_ratio_median": float(np.median(norms[1] / norms[0])),
        }
        for name, values in grads.items():
            total = np.array(values).sum(1)
            row[f"snr_{name}"] = float(total.mean() / total.std())
        self.results.append(row)
        print(json.dumps(row), flush=True)


def probe(args):
    torch.set_num_threads(1)
    X, y, _, _, _, _ = load_data(args.n_fit, args.n_val)
    order = np.random.default_rng(0).permutation(len(X))
    meta, train = order[:1111], order[1111:]
    callback = MetaGradientProbe(
        (torch.from_numpy(X[train]), torch.from_numpy(y[train])),
        (torch.from_numpy(X[meta]), torch.from_numpy(y[meta])),
        {int(epoch) for epoch in args.probe_epochs.split(",")},
    )
    NetClassifier(
        "mlp",
        module__hidden_units=(512, 512),
        criterion="focal",
        criterion__gamma=1.0,
        recipe="wang2021",
        lr=args.lr,
        max_epochs=args.epochs,
        batch_size=128,
        random_state=args.seed,
        callbacks=[("probe", callback)],
    ).fit(X[train], y[train])
    path = Path(args.out) / "probe.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(callback.results))


def _trajectory(history, key):
    shown = sorted({e - 1 for e in SHOWN_EPOCHS if e <= len(history)} | {len(history) - 1})
    values = [history[i].get(key) for i in shown]
    return "/".join("-" if v is None else f"{v:.3g}" for v in values)


#: Options of stored runs made with a patched step (not library options; see RESULTS.md).
_PATCHED = {
    "meta_batch": "meta batch {} (patched)",
    "per_unit_lr": "meta-gradient divided by the virtual lr (patched)",
}


def summary(out):
    """Print the Markdown table of the runs stored under ``out``."""
    print(
        "| run | settings | gamma mean (epochs 1/5/10/15/last) | gamma std (same epochs) "
        "| gamma 5-95 % (last, validation) | val ECE (%) | test ECE (%) | test acc (%) | T "
        "| CPU (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in sorted(Path(out).glob("*.json")):
        if path.name == "probe.json":
            continue
        record = json.loads(path.read_text())
        history, args = record["history"], record["args"]
        last = history[-1]
        quantiles = last.get("vgamma_q")
        spread = f"{quantiles[1]:.2f}-{quantiles[3]:.2f}" if quantiles else "-"
        settings = args["params"] if args["method"] == "meta" else args["method"]
        for flag, text in _PATCHED.items():
            if args.get(flag):
                settings += f", {text.format(args[flag])}"
        print(
            f"| {record['name']} | {settings}, seed {args['seed']} "
            f"| {_trajectory(history, 'gamma_mean')} | {_trajectory(history, 'gamma_std')} "
            f"| {spread} | {100 * last['val_ece']:.2f} | {100 * last['test_ece']:.2f} "
            f"| {100 * last['test_acc']:.1f} | {record['temperature']:.2f} "
            f"| {record['cpu']:.0f} |"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", nargs="?", help="run name (its JSON file's stem)")
    parser.add_argument("--method", default="meta", choices=["ce", "focal", "meta"])
    parser.add_argument("--n-fit", type=int, default=11111)
    parser.add_argument("--n-val", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--params", default="{}", help="estimator parameters as JSON")
    parser.add_argument("--out", default="benchmarks/reports/sweep_meta_gamma")
    parser.add_argument("--summary", action="store_true", help="print the table and exit")
    parser.add_argument("--probe", action="store_true", help="compare meta-gradients")
    parser.add_argument("--probe-epochs", default="4,9,14,19", help="1-based epochs")
    args = parser.parse_args()
    if args.summary:
        summary(args.out)
    elif args.probe:
        probe(args)
    elif args.name is None:
        parser.error("give a run name, or --summary")
    else:
        run(args)


if __name__ == "__main__":
    main()
