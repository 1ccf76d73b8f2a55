"""CalibrationAccumulator: calibration metrics of a stream of predictions in fixed memory."""

import numbers
import secrets

import numpy as np
from scipy.special import softmax

from ..._dask_chunks import uses_dask
from ..._validation import (
    check_classification_inputs,
    check_confidence_level,
    check_n_bins,
    check_option,
    check_probability_shape,
    is_tensor,
    numeric_values,
)
from .._core._dispatch import HANDLERS
from .._core._poisson import row_keys, seed_key
from .._core._scores import CONVENTIONS
from .._functions._smece import _check_smece_bandwidth
from ._batch_sums import add_numpy_batch, add_torch_batch
from ._layout import GROUPS, Layout, interval_groups, metric_parts, own_sums
from ._results import results

_INPUTS = ("probabilities", "logits")
_INVALID = (
    "non-finite or negative probabilities",
    "probabilities whose row does not sum to 1",
    "labels outside [0, n_classes)",
    "negative or non-finite sample weights",
)


def _check_names(values, name, options):
    values = tuple(values)
    unknown = [value for value in values if value not in options]
    if unknown or not values and name == "metrics":
        raise ValueError(
            f"Expected `{name}` to name metrics from {sorted(options)}, got {list(values)}."
        )
    return values


class CalibrationAccumulator:
    """Calibration metrics of a stream of predictions, in memory that does not grow.

    Each :meth:`update` adds a batch's sums (per bin, per fine cell, per grid point) to
    the state; :meth:`merge` adds another accumulator's (from another chunk, worker or
    process; :meth:`all_reduce` across ``torch.distributed`` ranks); :meth:`compute`
    turns the sums into metrics. Batches may be numpy arrays (checked as the metric
    functions check them) or torch tensors, summed on their device without a copy to the
    host (their checks are deferred: invalid rows are counted there and :meth:`compute`
    raises). A batch without rows adds nothing (its shape is checked, and it makes the
    state that merges and reduces); a batch that raises leaves the accumulator as it was.
    Accumulators pickle, with their state as numpy arrays; an unpickled one sums on the
    device of its next batch.

    What is exact and what is approximate:

    - exact (the in-memory functions' values up to the order of float64 additions):
      ``ece``, ``mce``, ``reliability`` (with Clopper-Pearson intervals on Kish's
      effective counts), ``classwise_ece``, ``top_label_ece`` (equal-width bins),
      ``accuracy``, ``nll``, ``brier`` and ``spiegelhalter``;
    - ``adaptive_ece``: the equal-mass bins' edges are moved up to the end of the cell
      of a fine histogram (``FINE_BINS = 2^14`` equal cells) that holds them, so only
      the samples of those cells can change bin; the error is within
      ``adaptive_ece_bound = 2 * (their weight) / (total weight)`` of
      ``adaptive_calibration_error``; ``debiased_ce`` uses the same bins (no bound);
    - ``ks`` and ``kuiper``: the cumulative differences read at the fine cells' ends,
      within ``bound`` (largest cell weight over sigma, twice for Kuiper) of the
      statistics of ``calibration_test``;
    - ``smooth_ece`` and ``sece``: from sums linearly binned on ``GRID_POINTS`` =
      400,001 points of [0, 1]. smECE equals ``smooth_ece`` up to rounding whenever its
      own grid nests in that one (every bandwidth of at least 0.01, and others), and
      is within ``smooth_ece_bound`` otherwise; ``sece`` (``include_self=True``) is
      within ``sece_bound`` of ``smooth_calibration_error(..., method="exact")``.
      Both bounds are computed from the sums at every call.

    Bootstrap intervals (``n_resamples > 0``) use the Poisson bootstrap: every row gets,
    per replicate, a Poisson(1) count from a counter-based generator keyed by the seed
    and the row's id, so the replicate sums of any chunking, merged in any order, equal
    those of one pass over all rows (:mod:`sklearn_calib.metrics._core._poisson`). The cost is
    ``n_rows * n_resamples`` draws, each added into its replicate's sums: about 1.3 ns of
    CPU each with numba installed, 60 ns with numpy (measured on one core; both give the
    same sums). ECE, MCE, accuracy, NLL, Brier score, classwise
    ECE and smECE (at the estimate's bandwidth, on a grid of 1,001 points) can be
    resampled.

    Parameters
    ----------
    n_bins : int, default=15
        Number of equal-width (and equal-mass) bins.
    input : {"probabilities", "logits"}, default="probabilities"
        What ``update`` receives; logits go through a softmax (1-D: the positive-class
        log-odds).
    convention : {"top_label", "positive_class"}, default="top_label"
        What the binned and smooth errors judge, as in
        :func:`expected_calibration_error`.
    labels : array-like of shape (n_classes,), default=None
        The class of each column; None reads the labels as column indices (torch
        batches always are).
    metrics : iterable of str, default=None
        Which metrics to keep the sums of (see :meth:`compute`); None for all. Fewer
        metrics cost less time and memory.
    n_resamples : int, default=0
        Poisson bootstrap replicates (0: no intervals).
    interval_metrics : iterable of str, default=("ece",)
        The metrics whose intervals are resampled: from ``"ece"``, ``"mce"``,
        ``"accuracy"`` (top-label convention), ``"nll"``, ``"brier"``,
        ``"classwise_ece"``, ``"smooth_ece"``.
    random_state : int, default=None
        Seed of the bootstrap's generator, in ``[0, 2^63)``; None draws one now (the
        accumulators that merge must share it: copy or pickle this one).

    Attributes
    ----------
    n_samples_ : int
        Rows added so far here (before merges and reductions, which count theirs in
        :meth:`compute`'s ``n_samples``).

    See Also
    --------
    expected_calibration_error : The ECE of predictions held in memory.
    smooth_ece : The smECE of predictions held in memory.
    calibration_report : The errors, tests and decompositions of predictions in memory.

    References
    ----------
    .. [1] J. A. Hanley and B. MacGibbon, "Creating non-parametric bootstrap samples
       using Poisson frequencies", Computer Methods and Programs in Biomedicine 83(1),
       2006.
    .. [2] J. Błasiok and P. Nakkiran, "Smooth ECE: Principled Reliability Diagrams via
       Kernel Smoothing", International Conference on Learning Representations, 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.metrics import CalibrationAccumulator, expected_calibration_error
    >>> rng = np.random.default_rng(0)
    >>> proba = rng.dirichlet(np.ones(3), size=1000)
    >>> y = rng.integers(0, 3, size=1000)
    >>> first = CalibrationAccumulator(metrics=["ece"], n_resamples=200, random_state=0)
    >>> second = CalibrationAccumulator(metrics=["ece"], n_resamples=200, random_state=0)
    >>> first = first.update(y[:600], proba[:600], row_ids=0)
    >>> second = second.update(y[600:], proba[600:], row_ids=600)
    >>> result = first.merge(second).compute()
    >>> bool(np.isclose(result.ece, expected_calibration_error(y, proba), rtol=1e-12))
    True
    >>> interval = result.intervals["ece"]
    >>> bool(interval.low <= result.ece <= interval.high)
    True
    """

    def __init__(
        self,
        *,
        n_bins=15,
        input="probabilities",
        convention="top_label",
        labels=None,
        metrics=None,
        n_resamples=0,
        interval_metrics=("ece",),
        random_state=None,
    ):
        self.n_bins = check_n_bins(n_bins)
        self.input = check_option(input, "input", _INPUTS)
        self.convention = check_option(convention, "convention", CONVENTIONS)
        self.labels = None if labels is None else np.asarray(labels)
        parts = metric_parts()
        self.metrics = tuple(parts) if metrics is None else _check_names(metrics, "metrics", parts)
        if (
            isinstance(n_resamples, (bool, np.bool_))
            or not isinstance(n_resamples, numbers.Integral)
            or n_resamples < 0
        ):
            raise ValueError(f"Expected `n_resamples` to be an integer >= 0, got {n_resamples!r}.")
        self.n_resamples = int(n_resamples)
        self.interval_metrics = _check_names(
            interval_metrics, "interval_metrics", interval_groups()
        )
        if self.n_resamples and "accuracy" in self.interval_metrics and convention != "top_label":
            raise ValueError(
                "The accuracy interval is resampled from the top-label bins: use "
                "convention='top_label', or leave 'accuracy' out of `interval_metrics`."
            )
        if random_state is None:
            random_state = secrets.randbits(63)
        if (
            isinstance(random_state, (bool, np.bool_))
            or not isinstance(random_state, numbers.Integral)
            or not 0 <= random_state < 2**63
        ):
            raise ValueError(
                f"Expected `random_state` to be an integer in [0, 2^63) or None, got "
                f"{random_state!r}."
            )
        self.random_state = int(random_state)
        self.n_samples_ = 0
        self._layout = None
        self._state = None
        self._implicit_ids = False
        self._placed = True

    def _new_layout(self, n_classes):
        chosen = set(self.metrics)
        if self.n_resamples:
            chosen |= set(self.interval_metrics)
        groups = ()
        if self.n_resamples:
            wanted = {interval_groups()[name] for name in self.interval_metrics}
            groups = tuple(group for group in GROUPS if group in wanted)
        parts = metric_parts()
        return Layout(
            n_classes=n_classes,
            n_bins=self.n_bins,
            convention=self.convention,
            parts=frozenset(part for name in chosen for part in parts[name]),
            n_resamples=self.n_resamples,
            groups=groups,
            own_sums=own_sums(chosen),
        )

    def _check_fits(self, n_classes, device):
        """Check that a batch of ``n_classes`` columns on ``device`` (None: numpy) can be
        added to the state, without changing it."""
        if self._layout is None:
            if self.convention == "positive_class" and n_classes != 2:
                raise ValueError(
                    "Expected a binary problem (2 classes) for convention='positive_class', "
                    f"got {n_classes} classes."
                )
            return
        if n_classes != self._layout.n_classes:
            raise ValueError(
                f"Expected batches of {self._layout.n_classes} classes (as the first one), "
                f"got {n_classes}."
            )
        if self._placed and (
            self._on_torch() != (device is not None)
            or (device is not None and self._device() != device)
        ):
            where = self._device() if self._on_torch() else "numpy"
            raise ValueError(
                f"This accumulator sums on {where}; got a batch on {device or 'numpy'}. Keep "
                "every batch on one device (merge accumulators of different devices)."
            )

    def _ensure_state(self, n_classes, device):
        """The state of a batch that :meth:`_check_fits`: made at the first batch, and
        moved to the batch's device at the first batch after unpickling."""
        if device is not None:
            import torch  # imported already: the batch is a tensor
        if self._layout is None:
            self._layout = self._new_layout(n_classes)
            self._state = {
                name: np.zeros(shape)
                if device is None
                else torch.zeros(shape, dtype=torch.float64, device=device)
                for name, shape in self._layout.shapes().items()
            }
        elif device is not None and not self._on_torch():
            self._state = {
                name: torch.as_tensor(value, device=device) for name, value in self._state.items()
            }
        self._placed = True

    def _holds_rows(self):
        return self._state is not None and float(self._state["rows"]) > 0

    def _on_torch(self):
        return self._state is not None and is_tensor(self._state["rows"])

    def _device(self):
        return self._state["rows"].device

    def _row_ids(self, row_ids, n_rows, torch_device=None):
        """The batch's row ids (consecutive from an int, or given), for the bootstrap."""
        if not self.n_resamples:
            return None
        if torch_device is not None:
            import torch  # imported already: the batch is a tensor
        if row_ids is None:
            row_ids = self.n_samples_
        if isinstance(row_ids, numbers.Integral) and not isinstance(row_ids, (bool, np.bool_)):
            if row_ids < 0:
                raise ValueError(f"Expected `row_ids` to be >= 0, got {row_ids}.")
            if torch_device is not None:
                return torch.arange(row_ids, row_ids + n_rows, device=torch_device)
            return np.arange(row_ids, row_ids + n_rows)
        if torch_device is not None and isinstance(row_ids, torch.Tensor):
            ids = row_ids.to(device=torch_device, dtype=torch.int64)
        else:
            ids = np.asarray(row_ids)
            if ids.dtype.kind not in "iu" or (ids.size and ids.min() < 0):
                raise ValueError("Expected `row_ids` to hold non-negative integers.")
            if torch_device is not None:
                ids = torch.as_tensor(ids, dtype=torch.int64, device=torch_device)
        if tuple(ids.shape) != (n_rows,):
            raise ValueError(
                f"Expected `row_ids` of shape ({n_rows},) (one id per row), got shape "
                f"{tuple(ids.shape)}."
            )
        return ids

    def update(self, y_true, y_prob, sample_weight=None, row_ids=None):
        """Add a batch of predictions.

        Parameters
        ----------
        y_true : array-like or torch.Tensor of shape (n_rows,)
            True labels (torch: column indices, int64, on the device of ``y_prob``).
        y_prob : array-like or torch.Tensor of shape (n_rows, n_classes) or (n_rows,)
            Probabilities or logits (``input``); 1-D for the positive class of a
            binary problem. A tensor is summed on its device.
        sample_weight : array-like or torch.Tensor of shape (n_rows,), default=None
            Sample weights.
        row_ids : int or array-like of shape (n_rows,), default=None
            The rows' ids, which key their bootstrap counts: an int is the first of
            consecutive ids. None continues from the rows this accumulator has seen,
            which is right for one stream; give the ids (such as each chunk's first
            row) when accumulators of different chunks or workers are merged.

        Returns
        -------
        self : CalibrationAccumulator
            The accumulator.

        Notes
        -----
        Dask collections (arrays, DataFrame columns) are accumulated chunk by chunk on
        the active Dask scheduler (the user's client, if any) and merged into this
        accumulator; their rows get consecutive ids from ``row_ids`` (an int; None
        continues this accumulator's, as for other batches).
        """
        if uses_dask(y_true, y_prob, sample_weight):
            return HANDLERS["CalibrationAccumulator.update"](
                self, y_true, y_prob, sample_weight, row_ids
            )
        if is_tensor(y_prob):
            return self._update_torch(y_true, y_prob, sample_weight, row_ids)
        scores = numeric_values(y_prob)
        check_probability_shape(scores.shape)
        n_classes = 2 if scores.ndim == 1 else scores.shape[1]
        self._check_fits(n_classes, None)
        if scores.shape[0] == 0:
            _check_no_rows(y_true, sample_weight)
            self._ensure_state(n_classes, None)
            return self._added(row_ids, 0)
        if self.input == "logits":
            scores = _softmax(scores)
        classes = self.labels if self.labels is not None else np.arange(n_classes)
        y_index, proba, weight = check_batch(y_true, scores, classes, sample_weight)
        ids = self._row_ids(row_ids, proba.shape[0])
        base = None if ids is None else row_keys(ids, seed_key(self.random_state))
        self._ensure_state(n_classes, None)
        add_numpy_batch(self._state, self._layout, proba, y_index, weight, base)
        return self._added(row_ids, proba.shape[0])

    def _added(self, row_ids, n_rows):
        """Count a batch of ``n_rows`` added to the state."""
        self.n_samples_ += n_rows
        implicit = bool(self.n_resamples and n_rows) and row_ids is None
        self._implicit_ids = self._implicit_ids or implicit
        return self

    def _update_torch(self, y_true, y_prob, sample_weight, row_ids):
        import torch  # imported already: ``y_prob`` is a tensor

        if self.labels is not None:
            raise ValueError(
                "torch batches take labels as column indices; create the accumulator "
                "without `labels` (encode the labels first)."
            )
        if y_prob.ndim not in (1, 2):
            raise ValueError(
                f"Expected `y_prob` to be 1-D or 2-D, got a tensor of shape {tuple(y_prob.shape)}."
            )
        device = y_prob.device
        n_rows, n_classes = y_prob.shape[0], 2 if y_prob.ndim == 1 else y_prob.shape[1]
        self._check_fits(n_classes, device)
        if not y_prob.is_floating_point():
            y_prob = y_prob.to(torch.float64)
        if y_prob.ndim == 1:
            if self.input == "logits":
                y_prob = torch.stack([torch.zeros_like(y_prob), y_prob], dim=1)
            else:
                y_prob = y_prob.clamp(max=1.0)
                y_prob = torch.stack([1.0 - y_prob, y_prob], dim=1)
        if self.input == "logits":
            y_prob = torch.softmax(y_prob, dim=1)
        y_index = torch.as_tensor(y_true, device=device)
        if y_index.dtype.is_floating_point or y_index.dtype == torch.bool:
            y_index = y_index.to(torch.int64)
        if tuple(y_index.shape) != (n_rows,):
            raise ValueError(
                f"`y_true` has shape {tuple(y_index.shape)} but `y_prob` has "
                f"{n_rows} rows; they must have the same length."
            )
        weight = None if sample_weight is None else torch.as_tensor(sample_weight, device=device)
        if weight is not None and tuple(weight.shape) != (n_rows,):
            raise ValueError(
                f"Expected `sample_weight` of shape ({n_rows},), got shape {tuple(weight.shape)}."
            )
        ids = self._row_ids(row_ids, n_rows, device)
        self._ensure_state(n_classes, device)
        add_torch_batch(
            self._state,
            self._layout,
            y_prob,
            y_index.to(torch.int64),
            weight,
            ids,
            seed_key(self.random_state),
        )
        return self._added(row_ids, n_rows)

    def _check_mergeable(self, other):
        """Check that ``other`` merges into this accumulator; return the column of
        ``other`` that holds each of this one's classes (None: the same columns)."""
        if not isinstance(other, CalibrationAccumulator):
            raise ValueError(f"Expected a CalibrationAccumulator to merge, got {other!r}.")
        mine, theirs = (
            (
                a.n_bins,
                a.convention,
                frozenset(a.metrics),
                a.n_resamples,
                frozenset(a.interval_metrics),
            )
            for a in (self, other)
        )
        if mine != theirs or (self._layout and other._layout and self._layout != other._layout):
            raise ValueError(
                "Accumulators merge only with the same n_bins, convention, metrics, "
                "n_resamples and interval_metrics, and the same number of classes."
            )
        if self.n_resamples and self.random_state != other.random_state:
            raise ValueError(
                "Accumulators with bootstrap replicates merge only with the same "
                "`random_state` (their generators must agree)."
            )
        both = self._holds_rows() and other._holds_rows()
        if self.n_resamples and both and (self._implicit_ids or other._implicit_ids):
            raise ValueError(
                "Both accumulators numbered their rows from 0 (no `row_ids`), so their "
                "bootstrap counts would repeat; pass `row_ids` (for example each chunk's "
                "first row) to `update`."
            )
        return self._columns_of(other)

    def _columns_of(self, other):
        """The column of ``other`` holding each of this accumulator's classes, or None
        when they are the same (or not known yet: no labels and no batch)."""
        layout = self._layout or other._layout
        if layout is None and (self.labels is None or other.labels is None):
            return None
        mine, theirs = (
            (np.arange(layout.n_classes) if a.labels is None else a.labels).tolist()
            for a in (self, other)
        )
        if mine == theirs:
            return None
        if set(mine) != set(theirs) or len(set(mine)) != len(mine):
            raise ValueError(
                f"Accumulators merge only with the same classes, got labels {mine} and {theirs}."
            )
        if self.convention == "positive_class":
            raise ValueError(
                "Accumulators with convention='positive_class' merge only with the same order "
                f"of `labels` (the second class is the positive one), got {mine} and {theirs}."
            )
        return [theirs.index(label) for label in mine]

    def merge(self, other):
        """Add another accumulator's sums to this one's.

        Parameters
        ----------
        other : CalibrationAccumulator
            An accumulator with the same options (``metrics`` and ``interval_metrics`` in
            any order), the same classes (``labels`` in any order: its per-class sums are
            aligned on this accumulator's), and the same seed with replicates.

        Returns
        -------
        self : CalibrationAccumulator
            The accumulator.
        """
        self._add(other, self._check_mergeable(other))
        self._implicit_ids = self._implicit_ids or other._implicit_ids
        return self

    def _add(self, other, columns):
        """Add the state of ``other``, its classes taken from ``columns`` (None: as they
        are), to this one's."""
        if other._state is None:
            return
        incoming = other._state
        if columns is not None:
            incoming = {
                name: _reorder(name, value, columns, other._layout)
                for name, value in incoming.items()
            }
        if self._state is None:
            self._layout = other._layout
            self._state = {name: _copy(value) for name, value in incoming.items()}
        else:
            for name, value in incoming.items():
                self._state[name] += _like(value, self._state[name])

    def all_reduce(self, group=None):
        """Sum the state over the ranks of a ``torch.distributed`` process group, in place.

        Every rank must call it (a collective), with accumulators of the same options
        that have seen at least one batch; afterwards each holds the sums of all.

        Parameters
        ----------
        group : torch.distributed.ProcessGroup, default=None
            The group (None: the default one).

        Returns
        -------
        self : CalibrationAccumulator
            The accumulator.
        """
        import torch
        import torch.distributed as dist

        if self._state is None:
            raise ValueError("Update the accumulator with at least one batch before reducing.")
        if self.n_resamples and self._implicit_ids and dist.get_world_size(group) > 1:
            raise ValueError(
                "The ranks numbered their rows from 0 (no `row_ids`), so their bootstrap "
                "counts would repeat; pass each row's index in the data set as `row_ids`."
            )
        names = sorted(self._state)
        tensors = [torch.as_tensor(self._state[name]).reshape(-1) for name in names]
        flat = torch.cat(tensors)
        if dist.get_backend(group) == "nccl" and flat.device.type != "cuda":
            flat = flat.cuda()
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
        start = 0
        for name, tensor in zip(names, tensors, strict=True):
            part = flat[start : start + tensor.numel()].reshape(self._state[name].shape)
            start += tensor.numel()
            self._state[name] = _like(part, self._state[name])
        return self

    def compute(self, *, confidence_level=0.95, smooth_bandwidth="auto", sece_bandwidth=0.01):
        """The metrics of all the rows added and merged so far.

        Parameters
        ----------
        confidence_level : float, default=0.95
            Coverage of the reliability diagram's and the bootstrap's intervals.
        smooth_bandwidth : "auto" or float, default="auto"
            The bandwidth of the smECE (as :func:`smooth_ece`).
        sece_bandwidth : float, default=0.01
            SECE's bandwidth (as :func:`smooth_calibration_error`).

        Returns
        -------
        result : :class:`~sklearn.utils.Bunch`
            ``n_samples``, and for the chosen metrics: ``weight``, ``ece``, ``mce``,
            ``reliability`` (``edges``, ``count``, ``mean_confidence``, ``accuracy``,
            ``accuracy_low``, ``accuracy_high``); ``adaptive_ece`` with
            ``adaptive_ece_bound`` and ``adaptive_edges``, ``debiased_ce``;
            ``classwise_ece``; ``top_label_ece``; ``accuracy``, ``nll``, ``brier``,
            ``spiegelhalter`` (``statistic``, ``pvalue``; None when undefined), and with
            the fine histogram ``ks`` and ``kuiper`` (``statistic``, ``pvalue``,
            ``bound``; None when undefined); ``smooth_ece`` with
            ``smooth_ece_bandwidth`` and ``smooth_ece_bound``, ``sece`` with
            ``sece_bound``; with replicates, ``intervals``: per resampled metric a
            :class:`BootstrapInterval` (percentile, with its flags). Weights read as the
            metric functions read them: rows of weight 0 stand for no sample, and
            integer weights count rows where a metric counts samples.
        """
        confidence_level = check_confidence_level(confidence_level)
        smooth_bandwidth = _check_smece_bandwidth(smooth_bandwidth)
        state = (
            {}
            if self._state is None
            else {name: np.asarray(_to_numpy(value)) for name, value in self._state.items()}
        )
        if not state or state["rows"] == 0:
            raise ValueError(
                "The accumulator holds no rows: no batch with rows was added (or merged); "
                "call `update` with some first."
            )
        invalid = state["invalid"]
        if invalid.any():
            found = ", ".join(
                f"{int(count)} row(s) with {what}"
                for count, what in zip(invalid, _INVALID, strict=True)
                if count
            )
            raise ValueError(f"The accumulated torch batches held invalid input: {found}.")
        if "top" in state and state["top"][0].sum() <= 0:
            raise ValueError("Expected the sample weights to have a positive sum, got all zero.")
        return results(
            state,
            self._layout,
            self.interval_metrics if self.n_resamples else (),
            confidence_level,
            smooth_bandwidth,
            sece_bandwidth,
        )

    def n_positive_rows(self):
        """Return the number of rows of positive weight in the state.

        The rows added here, merged and reduced count: the samples, rows of weight 0
        standing for none.

        Returns
        -------
        n_rows : int
            The number of rows of positive weight.
        """
        return 0 if self._state is None else int(_to_numpy(self._state["positive"]))

    def __getstate__(self):
        state = dict(self.__dict__)
        if self._state is not None:
            state["_state"] = {name: _to_numpy(value) for name, value in self._state.items()}
            state["_placed"] = False
        return state


def check_batch(y_true, y_prob, labels, sample_weight):
    """``check_classification_inputs`` of one batch, which may weigh nothing in all.

    The weights' positive sum is a property of all batches together (checked by
    ``compute``), so a batch of zero weights passes with zeros.
    """
    weightless = sample_weight is not None and not np.any(sample_weight)
    y_index, proba, weight = check_classification_inputs(
        y_true, y_prob, labels=labels, sample_weight=None if weightless else sample_weight
    )
    if weightless:
        weight = np.zeros(np.shape(sample_weight))
        if weight.shape != (proba.shape[0],):
            raise ValueError(
                f"Expected `sample_weight` of shape ({proba.shape[0]},), got shape {weight.shape}."
            )
    return y_index, proba, weight


def _softmax(scores):
    """Probabilities of logits (1-D: the positive-class log-odds)."""
    if scores.dtype.kind != "f":
        scores = scores.astype(np.float64)
    if scores.ndim == 1:
        scores = np.column_stack([np.zeros_like(scores), scores])
    return softmax(scores, axis=1)


def _reorder(name, value, columns, layout):
    """The entry ``name`` of a state with its classes taken in the order ``columns``."""
    if name in ("classwise", "predicted"):
        return value[:, columns]
    if name != "replicates" or "classwise" not in layout.groups:
        return value
    start = layout.replicate_offsets()["classwise"]
    cells = np.arange(value.shape[0])
    per_class = np.asarray(columns)[:, None] * layout.n_bins + np.arange(layout.n_bins)
    cells[start : start + per_class.size] = start + per_class.ravel()
    if is_tensor(value):
        import torch  # imported already: the state is on a tensor's device

        cells = torch.as_tensor(cells, device=value.device)
    return value[cells]


def _check_no_rows(y_true, sample_weight):
    """Check the labels and weights of a batch without rows."""
    for name, value in (("y_true", y_true), ("sample_weight", sample_weight)):
        if value is not None and np.shape(value) not in ((0,), (0, 1)):
            raise ValueError(
                f"`{name}` has shape {np.shape(value)} but `y_prob` has 0 rows; they must have "
                "the same length."
            )


def _to_numpy(value):
    return value.detach().cpu().numpy() if is_tensor(value) else value


def _copy(value):
    return value.clone() if is_tensor(value) else value.copy()


def _like(value, target):
    """``value`` as the kind of ``target`` (numpy array or tensor on its device)."""
    if is_tensor(target):
        import torch  # imported already: ``target`` is a tensor

        return torch.as_tensor(value).to(device=target.device, dtype=target.dtype)
    return _to_numpy(value)
