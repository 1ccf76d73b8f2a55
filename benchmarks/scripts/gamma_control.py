"""Positive control of the gamma-Net: a regime whose best fixed focal gamma is far from 1.

Data: scikit-learn's ``make_classification`` (8,000 samples, 20 features of which 10
informative, 4 classes of two clusters each, 20 % of the labels replaced at random,
``class_sep=1``), standardised and split at random (seeded by ``--data-seed``) into
training (4,000), meta-validation (800), validation (1,200) and test (2,000) parts.
Network: ``mlp`` (256, 256), SGD (momentum 0.9, no weight decay), lr ``--lr`` (0.05),
batch 128, ``--epochs`` (30) epochs, one torch thread. The noisy labels are memorised
late in training, so cross-entropy ends very overconfident and the best fixed focal
gamma for the final validation ECE is about 4 (``--method focal``, one run per gamma).

``--method focal --gamma G``: :class:`~sklearn_calib.estimators.NetClassifier` with
focal loss of fixed gamma G on the training part. ``--method meta``:
:class:`~sklearn_calib.MetaNetClassifier` (FLgamma-SECE by default) on the training and
meta-validation parts together, with ``train_split=None`` and ``meta_fraction=1/6``, so
that it trains on 4,000 samples and meta-learns on 800, with the estimator parameters
given as JSON in ``--params`` (e.g. ``'{"lookahead": "network_tuned"}'``). ``--clean`` drops
the label noise and uses lr 0.01 for 20 epochs: a regime whose best fixed gamma is 0.

Per epoch the run records the validation and test ECE (15 bins) and accuracy and, for
the gamma-Net, the mean and standard deviation of
:meth:`~sklearn_calib.MetaNetClassifier.sample_gamma` on the validation part. Runs are
stored as JSON under ``--out`` (a stored run is skipped); ``--summary`` prints them.

``--probe`` diagnoses the meta-gradient's direction in the noisy regime with a plain torch
loop (the same MLP and SGD, focal loss with gamma 1, batches of 128 without the last
partial one): after epochs 10, 20 and 25 it measures

- the finite difference ``d(validation ECE)/d gamma`` of continuations of H = 1, 31 (one
  epoch) and 155 steps with gamma 0.5 and 1.5 (the optimiser state copied, the same
  batches for both), mean and standard error over 8 batch orders;
- the meta-gradient ``d(meta loss after one virtual SGD step)/d gamma`` with respect to
  a gamma common to the training batch (float64), mean and standard error over 60 pairs
  of a training batch (128) and a meta batch (128 or 800), for a virtual step of the head
  on detached features or of the whole network, at ``scale`` times the learning rate,
  and for the meta losses SECE (bandwidth 0.01 and 0.1, soft or hard accuracy, with and
  without ``j = i``), DECE and the signed gap mean confidence - accuracy.

Negative values mean that raising gamma lowers the measure. It writes ``probe.json``;
``--summary`` prints its table too.

Usage (from the repository root)::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/scripts/gamma_control.py NAME \\
        [--method meta] [--gamma 1] [--params JSON] [--seed 0] [--clean] [--out DIR]
    PYTHONPATH=. python benchmarks/scripts/gamma_control.py --summary [--out DIR]
    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/scripts/gamma_control.py --probe [--out DIR]
"""

import argparse
import copy
import json
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import make_classification
from skorch.callbacks import Callback
from torch import nn
from torch.func import functional_call

from sklearn_calib import MetaNetClassifier
from sklearn_calib.estimators import NetClassifier
from sklearn_calib.losses import (
    FocalLoss,
    differentiable_calibration_error,
    smooth_calibration_error,
)
from sklearn_calib.scoring import expected_calibration_error

#: Sizes of the training, meta-validation, validation and test parts.
PARTS = (4000, 800, 1200, 2000)
#: Epochs (1-based; the last is always added) shown in the summary's trajectories.
SHOWN_EPOCHS = (1, 5, 10, 15, 20, 25)


def load_data(clean, seed):
    """Standardised float32 parts ``[(X, y), ...]``: training, meta, validation, test."""
    X, y = make_classification(
        n_samples=sum(PARTS),
        n_features=20,
        n_informative=10,
        n_redundant=0,
        n_classes=4,
        n_clusters_per_class=2,
        flip_y=0.0 if clean else 0.2,
        class_sep=1.0,
        random_state=seed,
    )
    X = ((X - X.mean(0)) / X.std(0)).astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(y))
    return [(X[part], y[part]) for part in np.split(order, np.cumsum(PARTS)[:-1])]


class EpochMetrics(Callback):
    """Record validation/test ECE and accuracy and the gamma-Net's gamma on validation."""

    def __init__(self, val, test):
        self.val, self.test = val, test

    def on_epoch_end(self, net, **kwargs):
        row = {}
        for name, (X, y) in (("val", self.val), ("test", self.test)):
            proba = net.predict_proba(X)
            row[f"{name}_ece"] = expected_calibration_error(y, proba)
            row[f"{name}_acc"] = float((proba.argmax(1) == y).mean())
        if isinstance(net, MetaNetClassifier) and net.regularizer == "gamma_net":
            gamma = net.sample_gamma(self.val[0])
            row["vgamma_mean"], row["vgamma_std"] = float(gamma.mean()), float(gamma.std())
        for key, value in row.items():
            net.history.record(key, value)


def run(args):
    path = Path(args.out) / f"{args.name}.json"
    if path.exists():
        print(f"{path} is stored already")
        return
    torch.set_num_threads(1)
    train, meta, val, test = load_data(args.clean, args.data_seed)
    lr, epochs = (0.01, 20) if args.clean else (args.lr, args.epochs)
    common = {
        "module": "mlp",
        "module__hidden_units": (256, 256),
        "optimizer": "sgd",
        "optimizer__momentum": 0.9,
        "lr": lr,
        "max_epochs": epochs,
        "batch_size": 128,
        "random_state": args.seed,
        "callbacks": [("metrics", EpochMetrics(val, test))],
    }
    params = json.loads(args.params)
    if args.method == "meta":
        net = MetaNetClassifier(train_split=None, meta_fraction=PARTS[1] / sum(PARTS[:2]))
        net.set_params(**common, **params)
        X, y = np.concatenate([train[0], meta[0]]), np.concatenate([train[1], meta[1]])
    else:
        net = NetClassifier(criterion="focal", criterion__gamma=args.gamma, **common, **params)
        X, y = train
    start, cpu = time.time(), time.process_time()
    net.fit(X, y)
    wall, cpu = time.time() - start, time.process_time() - cpu
    keys = [key for key in net.history[-1] if key != "batches"]
    record = {
        "name": args.name,
        "args": vars(args),
        "wall": wall,
        "cpu": cpu,
        "history": [{key: epoch.get(key) for key in keys} for epoch in net.history],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    print(_row(record))


class _MLP(nn.Module):
    def __init__(self, d, k, hidden=(256, 256)):
        super().__init__()
        layers, width = [], d
        for units in hidden:
            layers += [nn.Linear(width, units), nn.ReLU()]
            width = units
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(width, k)

    def forward(self, x):
        return self.head(self.features(x))


def _sece(bandwidth, accuracy, include_self=True):
    def objective(logits, y):
        return smooth_calibration_error(
            torch.softmax(logits, 1),
            y,
            bandwidth=bandwidth,
            accuracy=accuracy,
            include_self=include_self,
        )

    return objective


def _confidence_gap(logits, y):
    return torch.softmax(logits, 1).max(1).values.mean() - (logits.argmax(1) == y).double().mean()


#: The probe's meta losses.
PROBE_OBJECTIVES = {
    "SECE h 0.01 soft": _sece(0.01, "soft"),
    "SECE h 0.01 hard": _sece(0.01, "hard"),
    "SECE h 0.01 soft, j != i": _sece(0.01, "soft", include_self=False),
    "SECE h 0.1 soft": _sece(0.1, "soft"),
    "DECE": lambda logits, y: differentiable_calibration_error(torch.softmax(logits, 1), y),
    "confidence - accuracy": _confidence_gap,
}
#: The probe's virtual steps: (what steps, meta batch size, virtual lr / network lr).
PROBE_STEPS = [
    ("head", 128, 1),
    ("head", 800, 1),
    ("head", 800, 20),
    ("whole", 128, 1),
    ("whole", 800, 1),
    ("whole", 800, 10),
    ("whole", 800, 20),
    ("whole", 128, 20),
]


def _steps(model, optimizer, data, gamma, n_steps, seed):
    """``n_steps`` SGD steps of focal loss on batches of 128 in a seeded order."""
    X, y = data
    generator = torch.Generator().manual_seed(seed)
    loss = FocalLoss(gamma=gamma)
    done = 0
    while done < n_steps:
        order = torch.randperm(len(y), generator=generator)
        for start in range(0, len(y) - 127, 128):
            index = order[start : start + 128]
            optimizer.zero_grad()
            loss(model(X[index]), y[index]).backward()
            optimizer.step()
            done += 1
            if done == n_steps:
                return


def _val_ece(model, data):
    with torch.no_grad():
        proba = torch.softmax(model(data[0]), 1).double().numpy()
    return expected_calibration_error(data[1].numpy(), proba)


def _meta_gradient(model, gamma, batch, meta_batch, lr, whole, objective):
    """d objective(meta batch after one virtual SGD step) / d gamma (common), float64."""
    params = {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}
    gamma = torch.tensor(gamma, dtype=torch.float64, requires_grad=True)

    def features(weights, X):
        inner = {k[len("features.") :]: v for k, v in weights.items() if k.startswith("features.")}
        return functional_call(model.features, inner, (X,))

    (X, y), (X_meta, y_meta) = batch, meta_batch
    names = list(params) if whole else ["head.weight", "head.bias"]
    hidden = features(params, X)
    logits = (hidden if whole else hidden.detach()) @ params["head.weight"].T + params["head.bias"]
    inner = FocalLoss(gamma=1.0)(logits, y, gamma=gamma.expand(len(y)))
    grads = torch.autograd.grad(inner, [params[n] for n in names], create_graph=True)
    stepped = {**params, **{n: params[n] - lr * g for n, g in zip(names, grads, strict=True)}}
    hidden = features(stepped if whole else params, X_meta)
    hidden = hidden if whole else hidden.detach()
    loss = objective(hidden @ stepped["head.weight"].T + stepped["head.bias"], y_meta)
    return torch.autograd.grad(loss, gamma)[0].item()


def probe(args, checkpoints=(10, 20, 25), horizons=(1, 31, 155), n_orders=8, n_pairs=60):
    """Finite differences of fixed-gamma continuations against meta-gradients (see above)."""
    torch.set_num_threads(1)
    train, meta, val, _ = (
        (torch.from_numpy(X), torch.from_numpy(y).long()) for X, y in load_data(False, 0)
    )
    gamma, delta, lr = 1.0, 0.5, args.lr
    torch.manual_seed(0)
    model = _MLP(train[0].shape[1], 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    steps_per_epoch, done, rows = len(train[1]) // 128, 0, []
    for epoch in checkpoints:
        _steps(model, optimizer, train, gamma, (epoch - done) * steps_per_epoch, seed=done)
        done = epoch
        with torch.no_grad():
            proba = torch.softmax(model(val[0]), 1)
        gap = proba.max(1).values.mean() - (proba.argmax(1) == val[1]).float().mean()
        row = {"epoch": epoch, "val_ece": _val_ece(model, val), "val_gap": float(gap)}
        row["finite_differences"] = {}
        for horizon in horizons:
            slopes = []
            for order in range(n_orders):
                values = []
                for sign in (-1, 1):
                    copy_model = copy.deepcopy(model)
                    copy_optimizer = torch.optim.SGD(copy_model.parameters(), lr=lr, momentum=0.9)
                    copy_optimizer.load_state_dict(copy.deepcopy(optimizer.state_dict()))
                    seed = 10_000 + 100 * epoch + order
                    _steps(copy_model, copy_optimizer, train, gamma + sign * delta, horizon, seed)
                    values.append(_val_ece(copy_model, val))
                slopes.append((values[1] - values[0]) / (2 * delta))
            row["finite_differences"][horizon] = [
                float(np.mean(slopes)),
                float(np.std(slopes, ddof=1) / np.sqrt(n_orders)),
            ]
        model64 = copy.deepcopy(model).double()
        rng = np.random.default_rng(epoch)
        pairs = []
        for _ in range(n_pairs):
            index = torch.from_numpy(rng.choice(len(train[1]), 128, replace=False))
            meta_order = torch.from_numpy(rng.permutation(len(meta[1])))
            pairs.append(((train[0][index].double(), train[1][index]), meta_order))
        row["meta_gradients"] = {}
        for where, size, scale in PROBE_STEPS:
            for name, objective in PROBE_OBJECTIVES.items():
                values = np.array(
                    [
                        _meta_gradient(
                            model64,
                            gamma,
                            batch,
                            (meta[0][order[:size]].double(), meta[1][order[:size]]),
                            lr * scale,
                            where == "whole",
                            objective,
                        )
                        for batch, order in pairs
                    ]
                )
                row["meta_gradients"][f"{where}, meta batch {size}, x{scale}, {name}"] = [
                    float(values.mean()),
                    float(values.std(ddof=1) / np.sqrt(n_pairs)),
                ]
        rows.append(row)
        print(json.dumps(row), flush=True)
    path = Path(args.out) / "probe.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows))


def _probe_table(rows):
    """Markdown table of the probe: one column per checkpoint."""
    header = " | ".join(
        f"epoch {r['epoch']} (val ECE {100 * r['val_ece']:.2f} %, conf - acc "
        f"{100 * r['val_gap']:+.2f})"
        for r in rows
    )
    print(f"| measure | {header} |")
    print("|---" * (len(rows) + 1) + "|")
    for horizon in rows[0]["finite_differences"]:
        cells = " | ".join(
            "{:+.4f} ± {:.4f}".format(*r["finite_differences"][horizon]) for r in rows
        )
        print(f"| d(val ECE)/d gamma, {horizon} steps | {cells} |")
    for key in rows[0]["meta_gradients"]:
        cells = " | ".join(
            f"{m:+.2e} (z {m / s:+.1f})" for m, s in (r["meta_gradients"][key] for r in rows)
        )
        print(f"| {key} | {cells} |")


def _trajectory(history, key, scale=1.0):
    shown = sorted({e - 1 for e in SHOWN_EPOCHS if e <= len(history)} | {len(history) - 1})
    values = [history[i].get(key) for i in shown]
    return "/".join("-" if v is None else f"{scale * v:.3g}" for v in values)


def _row(record):
    args, history = record["args"], record["history"]
    last = history[-1]
    if args["method"] == "meta":
        settings = f"gamma-Net {args['params']}"
    else:
        settings = f"focal gamma {args['gamma']:g}"
    regime = "clean" if args["clean"] else "noisy"
    return (
        f"| {record['name']} | {settings}, {regime}, seed {args['seed']} "
        f"| {_trajectory(history, 'vgamma_mean')} | {_trajectory(history, 'val_ece', 100)} "
        f"| {100 * last['val_ece']:.2f} | {100 * last['test_ece']:.2f} "
        f"| {100 * last['test_acc']:.1f} | {record['cpu']:.0f} |"
    )


def summary(out):
    """Print the Markdown table of the runs stored under ``out``."""
    print(
        "| run | settings | gamma mean (validation; epochs 1/5/10/15/20/25/last) "
        "| val ECE (%, same epochs) | val ECE (%) | test ECE (%) | test acc (%) | CPU (s) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for path in sorted(Path(out).glob("*.json")):
        if path.name != "probe.json":
            print(_row(json.loads(path.read_text())))
    if (Path(out) / "probe.json").exists():
        print()
        _probe_table(json.loads((Path(out) / "probe.json").read_text()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", nargs="?", help="run name (its JSON file's stem)")
    parser.add_argument("--method", default="meta", choices=["focal", "meta"])
    parser.add_argument("--gamma", type=float, default=1.0, help="fixed gamma of --method focal")
    parser.add_argument("--params", default="{}", help="estimator parameters as JSON")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0, help="the estimator's random_state")
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--clean", action="store_true", help="no label noise, lr 0.01, 20 epochs")
    parser.add_argument("--out", default="benchmarks/reports/gamma_control")
    parser.add_argument("--summary", action="store_true", help="print the table and exit")
    parser.add_argument("--probe", action="store_true", help="diagnose the meta-gradient")
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
