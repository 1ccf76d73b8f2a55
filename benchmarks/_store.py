"""The run store: one record per trained run, keyed by a hash of everything that defines it.

A record is two files in the store folder, named by the run's key:

- ``<key>.npz``: the arrays (validation and test logits and labels, and the per-epoch
  arrays of a tracked run), written first;
- ``<key>.json``: the manifest, written last: the run's specification, its training
  history and timings, the SHA-256 of the ``.npz`` file, the version of sklearn_calib
  that trained the run and the SHA-256 of the manifest's own content (:func:`manifest_digest`).

Both are written to a temporary file in the same folder and moved into place with
``os.replace``, so a reader sees a whole file or none. A record counts only when its
manifest parses, names the same key and specification, and both checksums match (the
``.npz`` file's and the manifest's): an interrupted write, a truncated or altered file is
detected and the run is trained again. A record trained by another version of
sklearn_calib (``__version__``) is outdated and trained again too. Records written before
the version and the manifest checksum were recorded carry neither; they are accepted as
they are (:attr:`Record.legacy`).

Logits are stored compactly: each row as float16 offsets from its maximum plus the float32
row maxima (half the size of float32 logits). Every metric used here (softmax, temperature
scaling, binning) depends on the logits only through these offsets, and an offset ``d`` is
kept to a relative 2^-11, so each probability moves by at most ``|d| exp(-|d|) 2^-11`` plus
the same through the normalisation: less than 2.5e-4 in absolute value (tested), far below
the seed-to-seed spread of any metric reported. The predicted class is unchanged.
"""

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np

import sklearn_calib

#: Version of the record layout; part of every key, so a new layout never reads old files.
FORMAT_VERSION = 1


def canonical_json(value):
    """Return ``value`` as JSON with sorted keys and no whitespace (the hashed form)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def manifest_digest(manifest):
    """Return the SHA-256 of a manifest's content: its JSON with sorted keys, no whitespace
    and without its own ``manifest_sha256`` entry (NaN and infinities allowed, as in the
    per-epoch history)."""
    content = {name: value for name, value in manifest.items() if name != "manifest_sha256"}
    payload = json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def run_key(spec):
    """Return the key of a run: the first 20 hex digits of the SHA-256 of its specification.

    Parameters
    ----------
    spec : dict
        JSON-serialisable specification (data, model, loss, recipe, epochs, seed, split).

    Returns
    -------
    key : str
    """
    payload = canonical_json({"format": FORMAT_VERSION, "spec": spec})
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def pack_logits(logits):
    """Split logits into float16 offsets from the row maximum and float32 row maxima.

    Parameters
    ----------
    logits : ndarray of shape (n_samples, n_classes)

    Returns
    -------
    offsets : ndarray of shape (n_samples, n_classes), float16
    maxima : ndarray of shape (n_samples,), float32
    """
    logits = np.asarray(logits, dtype=np.float32)
    maxima = logits.max(axis=1)
    offsets = np.maximum(logits - maxima[:, None], np.finfo(np.float16).min)
    return offsets.astype(np.float16), maxima


def unpack_logits(offsets, maxima):
    """Inverse of :func:`pack_logits`, as float32 logits."""
    return offsets.astype(np.float32) + maxima[:, None].astype(np.float32)


def _atomic_write(path, data):
    """Write ``data`` (bytes) to ``path`` through a temporary file and ``os.replace``."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class Record:
    """A stored run: its manifest and (loaded on first use) its arrays.

    Parameters
    ----------
    key : str
    manifest : dict
        ``spec``, ``history``, ``meta`` (device, timings) and ``sha256``.
    path : Path
        The ``.npz`` file.
    """

    def __init__(self, key, manifest, path):
        self.key = key
        self.manifest = manifest
        self.path = path
        self._arrays = None

    @property
    def legacy(self):
        """Whether the record predates the version check and the manifest checksum (it
        carries no library version)."""
        return "sklearn_calib" not in self.manifest

    @property
    def spec(self):
        return self.manifest["spec"]

    @property
    def history(self):
        return self.manifest["history"]

    @property
    def meta(self):
        return self.manifest["meta"]

    @property
    def arrays(self):
        """All stored arrays by name (logits unpacked to float32)."""
        if self._arrays is None:
            with np.load(self.path, allow_pickle=False) as data:
                raw = {name: data[name] for name in data.files}
            arrays = {}
            for name, value in raw.items():
                if name.endswith("_offsets"):
                    stem = name[: -len("_offsets")]
                    arrays[stem] = unpack_logits(value, raw[f"{stem}_maxima"])
                elif not name.endswith("_maxima"):
                    arrays[name] = value
            self._arrays = arrays
        return self._arrays

    def logits(self, split):
        """Return ``(logits, labels)`` of ``split`` ("val" or "test")."""
        arrays = self.arrays
        return arrays[f"{split}_logits"], arrays[f"{split}_y"].astype(np.int64)


class RunStore:
    """A folder of run records (see the module docstring).

    Parameters
    ----------
    root : str or Path
        Folder, created on the first write.
    version : str or None, default=None
        Library version written into new records and required of stored ones that
        carry one (None: ``sklearn_calib.__version__``).
    """

    def __init__(self, root, version=None):
        self.root = Path(root)
        self.version = sklearn_calib.__version__ if version is None else version

    def _paths(self, key):
        return self.root / f"{key}.npz", self.root / f"{key}.json"

    def load(self, key, spec=None):
        """Return the valid record of ``key``, or None if it is missing, partial, corrupt or
        outdated (see :meth:`status`).

        Parameters
        ----------
        key : str
        spec : dict or None
            When given, the record must hold exactly this specification.

        Returns
        -------
        record : Record or None
        """
        status, record = self._check(key, spec)
        return record if status == "valid" else None

    def status(self, key, spec=None):
        """Return "valid", "missing" (no files), "corrupt" (files that do not check out) or
        "outdated" (a whole record trained by another version of sklearn_calib)."""
        return self._check(key, spec)[0]

    def _check(self, key, spec):
        data_path, manifest_path = self._paths(key)
        if not any(path.exists() for path in (data_path, manifest_path)):
            return "missing", None
        try:
            manifest = json.loads(manifest_path.read_text())
            digest = hashlib.sha256(data_path.read_bytes()).hexdigest()
        except (OSError, ValueError):
            return "corrupt", None
        if not isinstance(manifest, dict) or manifest.get("key") != key:
            return "corrupt", None
        if manifest.get("format") != FORMAT_VERSION or manifest.get("sha256") != digest:
            return "corrupt", None
        if spec is not None and canonical_json(manifest.get("spec")) != canonical_json(spec):
            return "corrupt", None
        legacy = "sklearn_calib" not in manifest and "manifest_sha256" not in manifest
        if not legacy and manifest.get("manifest_sha256") != manifest_digest(manifest):
            return "corrupt", None
        if manifest.get("sklearn_calib", self.version) != self.version:
            return "outdated", None
        return "valid", Record(key, manifest, data_path)

    def save(self, key, spec, arrays, history, meta):
        """Write a record: the arrays first, then the manifest that validates them.

        Parameters
        ----------
        key : str
        spec : dict
        arrays : dict of str to ndarray
            Entries ending in ``_logits`` are packed with :func:`pack_logits`.
        history : dict
            Per-epoch lists (``train_loss``, ``lr``, ``dur``, tracked metrics).
        meta : dict
            Device, versions, wall time.

        Returns
        -------
        record : Record
        """
        self.root.mkdir(parents=True, exist_ok=True)
        data_path, manifest_path = self._paths(key)
        packed = {}
        for name, value in arrays.items():
            if name.endswith("_logits"):
                packed[f"{name}_offsets"], packed[f"{name}_maxima"] = pack_logits(value)
            else:
                packed[name] = np.asarray(value)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **packed)
        data = buffer.getvalue()
        _atomic_write(data_path, data)
        manifest = {
            "format": FORMAT_VERSION,
            "key": key,
            "spec": spec,
            "history": history,
            "meta": meta,
            "sha256": hashlib.sha256(data).hexdigest(),
            "sklearn_calib": self.version,
        }
        manifest["manifest_sha256"] = manifest_digest(manifest)
        _atomic_write(manifest_path, json.dumps(manifest, indent=1, allow_nan=True).encode())
        return Record(key, manifest, data_path)

    def discard(self, key):
        """Remove a record's files (a corrupt or outdated record before it is trained again)."""
        for path in self._paths(key):
            path.unlink(missing_ok=True)
