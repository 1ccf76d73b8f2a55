"""Per-epoch checkpoints of ``NetClassifier.fit``: written atomically, resumed only if intact.

With ``checkpoint_dir`` set, a fit from a fresh start writes one file after every
finished epoch, named by a fingerprint of the fit: the estimator class, its parameters
except those in :data:`IGNORED_PARAMS`, the classes and the training data. It holds the
weights, optimiser state, history and random-generator states, so that a later ``fit``
with the same parameters and data continues with the next epoch and reaches the same
weights as a fit that was never interrupted. A fit that ran all its epochs is finished:
fitting it again trains nothing (unless it is unseeded, ``random_state=None``, which
trains anew). One that skorch's EarlyStopping stopped is finished, with a UserWarning,
for a fit with an EarlyStopping callback; a fit without one trains its remaining epochs.

A file is written to a temporary name, flushed to disk and renamed over the previous
one (``os.replace``), so a killed process leaves either the old or the new checkpoint,
never a partial one. It starts with a magic line and a BLAKE2b digest of the rest; it is
read with ``torch.load(weights_only=True)`` (tensors, containers and numbers only) and a
JSON header. A file that is truncated, corrupt or written by another fit is ignored with
a :class:`CheckpointWarning` and training starts from the beginning.
"""

import hashlib
import io
import json
import os
import warnings

import joblib
import numpy as np
import torch
from skorch.callbacks import EarlyStopping

from ._state import (
    component_names,
    history_as_list,
    history_from_list,
    restore_components,
    to_cpu_tree,
)

#: Parameters that do not change what a fit computes, left out of its fingerprint: a fit
#: may be resumed with other callbacks, verbosity or device.
IGNORED_PARAMS = ("checkpoint_dir", "callbacks", "verbose", "device", "on_nonfinite", "warm_start")

_MAGIC = b"sklearn_calib checkpoint 1\n"
_DIGEST_SIZE = 32


class CheckpointWarning(UserWarning):
    """A checkpoint file could not be used; the fit starts from the beginning."""


def fit_fingerprint(net, X, y_index):
    """Return a hex digest identifying a fit: class, parameters, classes and data.

    Parameters
    ----------
    net : NetClassifier
        Its ``classes_`` are set.
    X : ndarray of shape (n_samples, ...)
        Validated training inputs.
    y_index : ndarray of shape (n_samples,)
        Class indices.

    Returns
    -------
    fingerprint : str
    """
    params = {
        name: value
        for name, value in net.get_params(deep=False).items()
        if name not in IGNORED_PARAMS and not name.startswith("callbacks__")
    }
    digest = hashlib.blake2b(digest_size=20)
    digest.update(f"{type(net).__module__}.{type(net).__qualname__}".encode())
    digest.update(joblib.hash(params).encode())
    digest.update(joblib.hash(np.asarray(net.classes_)).encode())
    for array in (X, y_index):
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.reshape(-1).view(np.uint8))
    return digest.hexdigest()


class FitCheckpoint:
    """The checkpoint file of one fit.

    Parameters
    ----------
    directory : str or os.PathLike
        Created if missing.
    fingerprint : str
        From :func:`fit_fingerprint`; it names the file.
    prefix : str
        Start of the file name (the estimator's class name).
    """

    def __init__(self, directory, fingerprint, prefix):
        os.makedirs(directory, exist_ok=True)
        self.fingerprint = fingerprint
        self.path = os.path.join(os.fspath(directory), f"{prefix}-{fingerprint}.ckpt")

    @classmethod
    def for_fit(cls, net, X, y_index):
        """Return the checkpoint of the fit of ``net`` on ``(X, y_index)``."""
        return cls(net.checkpoint_dir, fit_fingerprint(net, X, y_index), type(net).__name__)

    def save(self, net, stopped=False):
        """Write the net's state at the end of an epoch, atomically.

        Parameters
        ----------
        net : NetClassifier
            Its ``rng_state_`` holds the generator states of the end of the epoch.
        stopped : bool, default=False
            Whether a callback stopped training at this epoch (EarlyStopping): the fit
            is then finished, and resuming it trains nothing.
        """
        rng = net.rng_state_
        meta = {
            "fingerprint": self.fingerprint,
            "epochs": len(net.history),
            "stopped": bool(stopped),
            "history": history_as_list(net.history),
            "numpy_rng": rng["numpy"],
            "split_seed": rng["split_seed"],
            "device_type": rng["device_type"],
        }
        payload = {
            "meta": json.dumps(meta),
            "components": {
                name: to_cpu_tree(getattr(net, name).state_dict()) for name in component_names(net)
            },
            "rng": to_cpu_tree({key: rng[key] for key in ("torch", "cuda", "generator")}),
        }
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        data = buffer.getvalue()
        digest = hashlib.blake2b(data, digest_size=_DIGEST_SIZE).digest()
        temporary = f"{self.path}.{os.getpid()}.tmp"
        with open(temporary, "wb") as file:
            file.write(_MAGIC + digest + data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)

    def load(self):
        """Return the checkpoint's contents, or None if there is none or it is unusable.

        Returns
        -------
        payload : dict or None
            ``"meta"`` (dict), ``"components"`` and ``"rng"`` (CPU tensors).
        """
        if not os.path.exists(self.path):
            return None
        try:
            with open(self.path, "rb") as file:
                raw = file.read()
            if not raw.startswith(_MAGIC):
                raise ValueError("it is not a sklearn_calib checkpoint")
            digest = raw[len(_MAGIC) : len(_MAGIC) + _DIGEST_SIZE]
            data = raw[len(_MAGIC) + _DIGEST_SIZE :]
            if hashlib.blake2b(data, digest_size=_DIGEST_SIZE).digest() != digest:
                raise ValueError("its checksum does not match (truncated or corrupt file)")
            payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
            payload["meta"] = json.loads(payload["meta"])
            if payload["meta"]["fingerprint"] != self.fingerprint:
                raise ValueError("it was written by another fit")
        except Exception as error:  # any unreadable file is reported and skipped
            warnings.warn(
                f"Ignoring the checkpoint {self.path}: {error}. Training starts from the "
                "beginning and overwrites it.",
                CheckpointWarning,
                stacklevel=5,
            )
            return None
        return payload

    def resume(self, net):
        """Load the checkpoint, if usable, into the freshly initialised ``net``.

        A fit that EarlyStopping stopped is finished (with a UserWarning) only when ``net``
        has an EarlyStopping callback too; otherwise its remaining epochs are trained. A
        finished fit's checkpoint (all ``max_epochs`` epochs, or stopped) is not used when
        ``net.random_state`` is None: an unseeded fit is a new random draw each time, so
        it trains anew (and overwrites the file); an unfinished one is resumed.

        Parameters
        ----------
        net : NetClassifier
            Initialised on its device for the same fit.

        Returns
        -------
        remaining : int or None
            None if no checkpoint was loaded; else the epochs left to train (0 for a
            finished fit), and the checkpoint's weights, optimiser state, history and
            ``rng_state_`` are the net's.
        """
        payload = self.load()
        if payload is None:
            return None
        meta = payload["meta"]
        remaining = max(net.max_epochs - meta["epochs"], 0)
        early_stopping = any(isinstance(cb, EarlyStopping) for _, cb in net.callbacks_)
        stopped = bool(meta.get("stopped")) and remaining > 0 and early_stopping
        if stopped:
            remaining = 0
        if net.random_state is None and remaining == 0:
            return None
        if stopped:
            warnings.warn(
                f"The checkpoint {self.path} holds a fit that EarlyStopping stopped after "
                f"{meta['epochs']} of {net.max_epochs} epochs: fit returns that model and "
                "trains nothing (callbacks are not part of the checkpoint). Fit without "
                "EarlyStopping to train the remaining epochs, or delete the file to train "
                "anew.",
                UserWarning,
                stacklevel=4,
            )
        restore_components(net, payload["components"])
        net.history_ = history_from_list(meta["history"])
        net.rng_state_ = {
            "device_type": meta["device_type"],
            **payload["rng"],
            "numpy": meta["numpy_rng"],
            "split_seed": meta["split_seed"],
        }
        return remaining


__all__ = ["IGNORED_PARAMS", "CheckpointWarning", "FitCheckpoint", "fit_fingerprint"]
