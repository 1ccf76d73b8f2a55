"""Controls of the gamma-Net: regimes whose best fixed focal gamma is known.

``--regime noisy`` (the default), a positive control whose best fixed gamma is far from 1.
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
given as JSON in ``--params`` (e.g. ``'{"lookahead": "network_tuned"}'``). ``--regime
clean`` drops the label noise and uses lr 0.01 for 20 epochs: a regime whose best fixed
gamma is 0.

``--regime fashion_mnist_sum`` is the regime of the ``cpu`` preset's ``meta`` report
(``python -m benchmarks``): Fashion-MNIST, 5,000 validation images cut from the 60,000
training images by a permutation seeded 0, the next 10,000 for training, the official
10,000 test images, pixels standardised with the training mean and std (one scalar
each); ``mlp`` (512, 512); recipe ``mukhoti2020`` (SGD, momentum 0.9, weight decay 5e-4)
at lr 0.05, decayed x0.1 after epochs 17 and 29 of 40, batch 128, the loss summed over the
batch and the gradient norm clipped to 2. ``--regime fashion_mnist_mean`` is the same with
the loss averaged over the batch. ``--lr`` and ``--epochs`` apply to ``noisy`` only. In
these two regimes the gamma-Net trains on the 10,000 training images with its default
``meta_fraction`` (0.1), as in the report, and focal loss on all 10,000.

Per epoch the run records the validation ECE (15 bins) and accuracy; the test ECE and
accuracy and the mean and standard deviation of
:meth:`~sklearn_calib.MetaNetClassifier.sample_gamma` on the validation part are recorded
per epoch in the synthetic regimes and after the last epoch in the Fashion-MNIST ones
(where an inference pass over 15,000 images costs a sizeable part of an epoch); the
gamma-Net's own history gives the mean gamma on its meta-validation part per epoch
(``gamma_mean``). Runs are stored as JSON under ``--out`` (a stored run is skipped);
``--summary`` prints them, ``--controls`` the tables of the controls (below).

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

``--controls`` reads the runs under ``--out`` by regime. Per seed, the best fixed gamma
is the grid value of the focal runs with the lowest final validation ECE. Per gamma-Net
run it gives the final mean gamma on the meta-validation part and its time average (the
mean over epochs of that per-epoch mean), and the verdict of the control, fixed before
the runs: the gamma-Net *reaches* the known gamma in a seed when its final mean gamma
lies strictly between the grid neighbours of that seed's best fixed gamma; it *moves
towards* it when it is not there but has moved from its initial 1 in the direction of
the best fixed gamma (by more than 0.05); otherwise it *does not*.

Usage (from the repository root)::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/scripts/gamma_control.py NAME \\
        [--method meta] [--gamma 1] [--params JSON] [--seed 0] [--regime noisy] [--out DIR]
    PYTHONPATH=. python benchmarks/scripts/gamma_control.py --summary [--out DIR]
    PYTHONPATH=. python benchmarks/scripts/gamma_control.py --controls [--out DIR]
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
from sklearn_calib.datasets import load_fashion_mnist
from sklearn_calib.estimators import NetClassifier
from sklearn_calib.losses import (
    FocalLoss,
    differentiable_calibration_error,
    smooth_calibration_error,
)
from sklearn_calib.scoring import expected_calibration_error

#: Sizes of the training, meta-validation, validation and test parts (synthetic regimes).
PARTS = (4000, 800, 1200, 2000)
#: Validation and training images of the Fashion-MNIST regimes (the ``cpu`` preset's).
FASHION_MNIST_PARTS = (5000, 10000)
#: Epochs (1-based; the last is always added) shown in the summary's trajectories.
SHOWN_EPOCHS = (1, 5, 10, 15, 20, 25)
#: The estimator settings of each regime but the noisy one (whose lr and epochs are options).
REGIMES = {
    "noisy": {},
    "clean": {"optimizer": "sgd", "optimizer__momentum": 0.9, "lr": 0.01, "max_epochs": 20},
    "fashion_mnist_sum": {
        "module__hidden_units": (512, 512),
        "recipe": "mukhoti2020",
        "lr": 0.05,
        "max_epochs": 40,
        "loss_reduction": "sum",
        "grad_clip": 2.0,
    },
    "fashion_mnist_mean": {
        "module__hidden_units": (512, 512),
        "recipe": "mukhoti2020",
        "lr": 0.05,
        "max_epochs": 40,
        "loss_reduction": "mean",
        "grad_clip": 2.0,
    },
}


def is_synthetic(regime):
    """Whether ``regime`` is one of the ``make_classification`` regimes."""
    return regime in ("noisy", "clean")


def regime_of(args):
    """The regime of a run's arguments (runs stored before ``--regime`` have ``clean``)."""
    if "regime" in args:
        return args["regime"]
    return "clean" if args["clean"] else "noisy"


def load_fashion_mnist_parts(data_home=None):
    """The ``cpu`` preset's Fashion-MNIST parts ``[(X, y), ...]``: training, validation, test.

    The validation images are the first 5,000 of a permutation (seeded 0) of the 60,000
    training images, the training images the next 10,000 (each part in index order);
    every part is standardised with the training images' mean and std (float32).
    """
    X, y, X_test, y_test = load_fashion_mnist(data_home=data_home, return_X_y=True)
    n_val, n_train = FASHION_MNIST_PARTS
    order = np.random.default_rng(0).permutation(len(y))
    val, train = np.sort(order[:n_val]), np.sort(order[n_val : n_val + n_train])
    mean, std = float(X[train].mean()), float(X[train].std())
    return [
        (((X_part - mean) / std).astype(np.float32), y_part)
        for X_part, y_part in ((X[train], y[train]), (X[val], y[val]), (X_test, y_test))
    ]


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


def final_metrics(net, val, test):
    """The test ECE and accuracy and, for a gamma-Net, its gamma on the validation part."""
    row = {}
    proba = net.predict_proba(test[0])
    row["test_ece"] = expected_calibration_error(test[1], proba)
    row["test_acc"] = float((proba.argmax(1) == test[1]).mean())
    if isinstance(net, MetaNetClassifier) and net.regularizer == "gamma_net":
        gamma = net.sample_gamma(val[0])
        row["vgamma_mean"], row["vgamma_std"] = float(gamma.mean()), float(gamma.std())
    return row


class EpochMetrics(Callback):
    """Record the validation ECE and accuracy and, with ``every_epoch``, the
    :func:`final_metrics` at the end of every epoch."""

    def __init__(self, val, test, every_epoch=True):
        self.val, self.test, self.every_epoch = val, test, every_epoch

    def on_epoch_end(self, net, **kwargs):
        proba = net.predict_proba(self.val[0])
        row = {
            "val_ece": expected_calibration_error(self.val[1], proba),
            "val_acc": float((proba.argmax(1) == self.val[1]).mean()),
        }
        if self.every_epoch:
            row.update(final_metrics(net, self.val, self.test))
        for key, value in row.items():
            net.history.record(key, value)


def run(args):
    path = Path(args.out) / f"{args.name}.json"
    if path.exists():
        print(f"{path} is stored already")
        return
    torch.set_num_threads(1)
    synthetic = is_synthetic(args.regime)
    common = {
        "module": "mlp",
        "module__hidden_units": (256, 256),
        "optimizer": "sgd",
        "optimizer__momentum": 0.9,
        "lr": args.lr,
        "max_epochs": args.epochs,
        "batch_size": 128,
        "random_state": args.seed,
    }
    if synthetic:
        train, meta, val, test = load_data(args.regime == "clean", args.data_seed)
        meta_params = {"meta_fraction": PARTS[1] / sum(PARTS[:2])}
        X_meta, y_meta = np.concatenate([train[0], meta[0]]), np.concatenate([train[1], meta[1]])
    else:
        (train, val, test), meta_params = load_fashion_mnist_parts(), {}
        common = {key: common[key] for key in ("module", "batch_size", "random_state")}
        X_meta, y_meta = train
    common.update(REGIMES[args.regime])
    common["callbacks"] = [("metrics", EpochMetrics(val, test, every_epoch=synthetic))]
    params = json.loads(args.params)
    if args.method == "meta":
        net = MetaNetClassifier(train_split=None, **meta_params)
        net.set_params(**common, **params)
        X, y = X_meta, y_meta
    else:
        net = NetClassifier(criterion="focal", criterion__gamma=args.gamma, **common, **params)
        X, y = train
    start, cpu = time.time(), time.process_time()
    net.fit(X, y)
    wall, cpu = time.time() - start, time.process_time() - cpu
    if not synthetic:
        for key, value in final_metrics(net, val, test).items():
            net.history.record(key, value)
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
    # gamma on the validation part per epoch where recorded, else on the meta-validation part
    gamma = "vgamma_mean" if history[0].get("vgamma_mean") is not None else "gamma_mean"
    return (
        f"| {record['name']} | {settings}, {regime_of(args)}, seed {args['seed']} "
        f"| {_trajectory(history, gamma)} | {_trajectory(history, 'val_ece', 100)} "
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


def control_verdict(gamma, best, grid):
    """ "reaches", "moves towards" or "does not": a gamma-Net's final mean ``gamma``
    against the best fixed gamma ``best`` of the sorted ``grid`` (see the docstring)."""
    i = grid.index(best)
    low = grid[i - 1] if i > 0 else -np.inf
    high = grid[i + 1] if i + 1 < len(grid) else np.inf
    if low < gamma < high:
        return "reaches"
    if abs(gamma - 1.0) > 0.05 and np.sign(gamma - 1.0) == np.sign(best - 1.0):
        return "moves towards"
    return "does not"


def _values(values, scale=1.0, digits=2):
    return " / ".join(f"{scale * v:.{digits}f}" for v in values)


def control_tables(records):
    """Markdown lines of the controls of ``records`` (run records), regime by regime."""
    lines = []
    for regime in REGIMES:
        runs = [r for r in records if regime_of(r["args"]) == regime]
        focal = [r for r in runs if r["args"]["method"] == "focal"]
        if not focal:
            continue
        seeds = sorted({r["args"]["seed"] for r in focal})
        grid = sorted({r["args"]["gamma"] for r in focal})
        last = {(r["args"]["gamma"], r["args"]["seed"]): r["history"][-1] for r in focal}
        best = {
            seed: min(
                (g for g in grid if (g, seed) in last), key=lambda g: last[g, seed]["val_ece"]
            )
            for seed in seeds
        }
        lines += [
            f"### Regime `{regime}` (seeds {', '.join(map(str, seeds))})",
            "",
            f"| fixed γ | val ECE (%), seeds {'/'.join(map(str, seeds))} | test ECE (%) "
            "| test acc (%) | CPU (s) |",
            "|---|---|---|---|---|",
        ]
        cpu = {(r["args"]["gamma"], r["args"]["seed"]): r["cpu"] for r in focal}
        for g in grid:
            cells = [
                _values([last[g, s][k] for s in seeds if (g, s) in last], 100)
                for k in ("val_ece", "test_ece", "test_acc")
            ]
            bold = all(best[s] == g for s in seeds)
            label = f"**{g:g}**" if bold else f"{g:g}"
            mean_cpu = np.mean([cpu[g, s] for s in seeds if (g, s) in cpu])
            lines.append(f"| {label} | {' | '.join(cells)} | {mean_cpu:.0f} |")
        lines += [
            "",
            "Best fixed γ by validation ECE, per seed: "
            + ", ".join(f"{best[s]:g} (seed {s})" for s in seeds)
            + "; its test ECE: "
            + _values([last[best[s], s]["test_ece"] for s in seeds], 100)
            + " %.",
            "",
            "| γ-Net (`--params`) | seed | final γ | time-averaged γ | val ECE (%) "
            "| test ECE (%) | test acc (%) | CPU (s) | verdict |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        meta = sorted(
            (r for r in runs if r["args"]["method"] == "meta"),
            key=lambda r: (r["args"]["params"], r["args"]["seed"]),
        )
        for r in meta:
            seed, history = r["args"]["seed"], r["history"]
            gammas = [epoch["gamma_mean"] for epoch in history]
            verdict = control_verdict(gammas[-1], best[seed], grid) if seed in best else "no grid"
            lines.append(
                f"| {r['args']['params']} | {seed} | {gammas[-1]:.2f} | {np.mean(gammas):.2f} "
                f"| {100 * history[-1]['val_ece']:.2f} | {100 * history[-1]['test_ece']:.2f} "
                f"| {100 * history[-1]['test_acc']:.1f} | {r['cpu']:.0f} | {verdict} |"
            )
        lines.append("")
    return lines


def controls(out):
    """Print the tables of the controls stored under ``out``."""
    records = [
        json.loads(path.read_text())
        for path in sorted(Path(out).glob("*.json"))
        if path.name != "probe.json"
    ]
    print("\n".join(control_tables(records)))


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
    parser.add_argument("--regime", default="noisy", choices=list(REGIMES))
    parser.add_argument("--out", default="benchmarks/reports/gamma_control")
    parser.add_argument("--summary", action="store_true", help="print the table and exit")
    parser.add_argument("--controls", action="store_true", help="print the controls' tables")
    parser.add_argument("--probe", action="store_true", help="diagnose the meta-gradient")
    args = parser.parse_args()
    if args.summary:
        summary(args.out)
    elif args.controls:
        controls(args.out)
    elif args.probe:
        probe(args)
    elif args.name is None:
        parser.error("give a run name, or --summary")
    else:
        run(args)


if __name__ == "__main__":
    main()
