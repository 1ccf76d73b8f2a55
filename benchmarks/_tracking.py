"""Per-epoch evaluation of a training run on the device (the ``dynamics`` experiment).

:class:`EpochTracker` is an epoch-level skorch callback (it does no per-batch work, so
CUDA graphs stay on). At the end of every epoch it runs the network in evaluation mode,
in float32 and in large batches, on the test set and on a fixed subset of the training
set, and keeps on the device:

- test accuracy, NLL, ECE (M = 15) and the "optimal ECE" of Wang et al. (2021) (the lowest
  ECE over their temperature pool 0.01..10, with ``T`` fitted on the test set itself) and
  that ``T``;
- test NLL and softmax entropy of the correctly and the wrongly classified samples
  (Mukhoti et al. 2020, Figure 2) and the Frobenius norm of the last linear layer's weight;
- which followed training samples are classified correctly (their "learned epoch",
  Wang et al. 2021, Figure 5) and, at the end, their maximum logits.

Only one small tensor per epoch is copied to the host.
"""

import math

import numpy as np
import torch
from skorch.callbacks import Callback

from sklearn_calib.calibrators import grid_ece

#: Names of the per-epoch scalars, in the order of the stacked tensor.
EPOCH_METRICS = (
    "test_acc",
    "test_nll",
    "test_ece",
    "opt_ece",
    "opt_temperature",
    "nll_correct",
    "nll_wrong",
    "entropy_correct",
    "entropy_wrong",
    "head_norm",
    "track_acc",
)


def forward_logits(module, X, batch_size=2048):
    """float32 logits of ``X`` (a device tensor) in evaluation mode, without autocast."""
    was_training = module.training
    module.eval()
    chunks = []
    with torch.inference_mode():
        for start in range(0, len(X), batch_size):
            chunks.append(module(X[start : start + batch_size]).float())
    module.train(was_training)
    return torch.cat(chunks)


def _masked_mean(values, mask):
    count = mask.sum()
    total = (values * mask).sum()
    return torch.where(count > 0, total / count.clamp_min(1), torch.full_like(total, math.nan))


class EpochTracker(Callback):
    """Evaluate the network on test data and followed training samples after every epoch.

    Parameters
    ----------
    X_test, y_test : ndarray
        Test inputs (float32) and class indices.
    X_track, y_track : ndarray
        Followed training samples.
    temperatures : array-like
        Grid of the optimal-ECE search.
    batch_size : int, default=2048
        Evaluation batch size.
    """

    def __init__(self, X_test, y_test, X_track, y_track, temperatures, batch_size=2048):
        self.X_test = X_test
        self.y_test = y_test
        self.X_track = X_track
        self.y_track = y_track
        self.temperatures = temperatures
        self.batch_size = batch_size

    def on_train_begin(self, net, **kwargs):
        device = net.device_
        self._data = {
            "X_test": torch.as_tensor(self.X_test, device=device),
            "y_test": torch.as_tensor(self.y_test, device=device).long(),
            "X_track": torch.as_tensor(self.X_track, device=device),
            "y_track": torch.as_tensor(self.y_track, device=device).long(),
        }
        self.scalars_, self.track_correct_ = [], []
        self.track_max_logit_ = None

    def on_epoch_end(self, net, **kwargs):
        data = self._data
        module = net.module_
        z = forward_logits(module, data["X_test"], self.batch_size)
        y = data["y_test"]
        log_p = torch.log_softmax(z, dim=1)
        nll = -log_p.gather(1, y[:, None])[:, 0]
        entropy = -(log_p.exp() * log_p).sum(dim=1)
        correct = (z.argmax(dim=1) == y).to(torch.float32)
        z_track = forward_logits(module, data["X_track"], self.batch_size)
        track_correct = z_track.argmax(dim=1) == data["y_track"]
        head = getattr(module, "head", None)
        head_norm = (
            torch.linalg.vector_norm(head.weight.detach().float())
            if isinstance(head, torch.nn.Linear)
            else torch.tensor(math.nan, device=z.device)
        )
        stats = torch.stack(
            [
                correct.mean(),
                nll.mean(),
                _masked_mean(nll, correct),
                _masked_mean(nll, 1.0 - correct),
                _masked_mean(entropy, correct),
                _masked_mean(entropy, 1.0 - correct),
                head_norm,
                track_correct.float().mean(),
            ]
        )
        stats = stats.double().cpu().numpy()
        errors = grid_ece(z, y, (1.0,) + tuple(self.temperatures))
        best = int(np.argmin(errors[1:]))
        row = [stats[0], stats[1], errors[0], errors[1 + best], self.temperatures[best]]
        self.scalars_.append(np.array(row + list(stats[2:]), dtype=np.float64))
        self.track_correct_.append(track_correct.cpu().numpy())
        self.track_max_logit_ = z_track.max(dim=1).values.cpu().numpy()

    def results(self):
        """Per-epoch lists by metric name, and the arrays to store.

        Returns
        -------
        history : dict of str to list of float
        arrays : dict of str to ndarray
            ``track_correct`` (n_epochs, n_track) bool, ``track_max_logit`` (n_track,),
            ``track_y`` (n_track,).
        """
        scalars = np.array(self.scalars_, dtype=np.float64).reshape(-1, len(EPOCH_METRICS))
        history = {name: scalars[:, i].tolist() for i, name in enumerate(EPOCH_METRICS)}
        arrays = {
            "track_correct": np.array(self.track_correct_, dtype=bool),
            "track_max_logit": np.asarray(self.track_max_logit_, dtype=np.float32),
            "track_y": np.asarray(self.y_track, dtype=np.int16),
        }
        return history, arrays
