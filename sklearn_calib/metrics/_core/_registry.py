"""The metric registry: every metric declared once, and read by each part that uses it.

A :class:`Metric` names what the library does with a metric: its public function and
the kernel that computes it on checked predictions, the resampling plan of its
bootstrap, the handler of Dask input, its column of the report table
(``REPORT_METRICS``, ``metric_values``) and its row of ``calibration_report``, its
scikit-learn scorers, and how a ``CalibrationAccumulator`` computes it from summed
statistics (:class:`Streaming`, which also says whether ``CalibrationScoring`` records
it every epoch). The library's metrics are declared in ``metrics/_catalogue.py``;
:func:`register` adds another, :func:`unregister` takes one out.

Each reader looks the declarations up when it runs (:func:`declared`, :func:`by_name`,
:func:`by_function`, :data:`KERNELS`), so a metric registered later is read everywhere.
"""

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from ._dispatch import HANDLERS


@dataclass(frozen=True)
class Column:
    """A metric's column of the report table: the ``name`` (a key) and ``label`` (a column
    title) of its ``ReportMetric`` in ``REPORT_METRICS``."""

    name: str
    label: str


@dataclass(frozen=True)
class Scorer:
    """A scikit-learn scorer of a metric, by name (``get_scorer(name)``).

    Attributes
    ----------
    name : str
        The scorer's name (``"neg_ece"``).
    options : dict
        Fixed keyword arguments of the metric.
    greater_is_better : bool
        False (the sign of calibration errors): the scorer returns the negated metric.
    worst_group : bool
        Whether the scorer takes the largest value over groups routed as metadata
        (``make_worst_group_scorer``).
    """

    name: str
    options: dict = field(default_factory=dict)
    greater_is_better: bool = False
    worst_group: bool = False


@dataclass(frozen=True)
class Resampled:
    """A metric's Poisson-bootstrap interval in a ``CalibrationAccumulator``.

    Attributes
    ----------
    group : str
        The resampled statistics it reads (``"top"``, ``"scores"``, ``"smooth"`` or
        ``"classwise"``, the groups of ``_streaming._layout``).
    values : callable
        ``values(replicates, layout, state, settings)`` returns the metric of each
        replicate, ``(n_resamples,)``, from the group's replicate sums
        ``(n_resamples, n_cells, 3)``.
    """

    group: str
    values: object


@dataclass(frozen=True)
class Streaming:
    """How a ``CalibrationAccumulator`` computes a metric from summed statistics.

    Either from parts of the accumulator's own state (``parts`` and ``results``), or from
    sums of the metric's own (``sums``, ``n_sums`` and ``value``).

    Attributes
    ----------
    parts : tuple of str
        The parts of the state it reads (``_streaming._layout``); kept when it is chosen,
        and it is computed whenever they are kept.
    results : callable or None
        ``results(state, layout, settings)`` returns the entries it adds to ``compute``'s
        result, a dict (``settings``: ``confidence_level``, ``smooth_bandwidth``,
        ``sece_bandwidth``).
    sums : callable or None
        ``sums(proba, y_index, weight)`` returns the ``n_sums`` numbers a batch adds
        (numpy arrays, or float64 torch tensors of a tensor batch: write it with what
        both take, such as ``@``, ``.sum()`` and indexing); ``proba`` is float64 and
        ``weight`` holds ones without sample weights.
    n_sums : int
        How many numbers ``sums`` returns.
    value : callable or None
        ``value(sums)`` returns the metric of the summed ``sums``, a float.
    interval : Resampled or None
        Its Poisson-bootstrap interval, where it has one.
    per_epoch : bool
        Whether ``CalibrationScoring`` records it every epoch.
    """

    parts: tuple = ()
    results: object = None
    sums: object = None
    n_sums: int = 0
    value: object = None
    interval: Resampled = None
    per_epoch: bool = False


@dataclass(frozen=True)
class Metric:
    """The declaration of one metric.

    Attributes
    ----------
    name : str
        The metric's name: the key of its entry in ``CalibrationAccumulator.compute``,
        ``CalibrationScoring`` and ``calibration_report`` (``"adaptive_ece"``).
    function : callable or None
        The public function, ``function(y_true, y_prob, *, labels=None,
        sample_weight=None, **options)``; None for a statistic of the accumulator alone.
    kernel : callable or None
        ``kernel(predictions, **options)``: the function on checked ``Predictions``
        (its options but ``labels``, ``sample_weight`` and ``groups``).
    plan : callable or None
        ``plan(predictions, **options)`` returns its ``ResamplingPlan``; None when a
        bootstrap recomputes the metric on every replicate.
    dask : callable or None
        The handler of the function's Dask input: ``dask(call)``, ``call`` a Bunch of the
        call's arguments with the defaults filled in (``_core._dispatch``).
    column : Column or None
        Its column of the report table.
    report : str or None
        The label of its row of ``calibration_report``'s errors (whose intervals share
        one resampling: it needs a kernel and a plan).
    scorers : tuple of Scorer
        Its scorers.
    streaming : Streaming or None
        How an accumulator computes it.
    """

    name: str
    function: object = None
    kernel: object = None
    plan: object = None
    dask: object = None
    column: Column = None
    report: str = None
    scorers: tuple = ()
    streaming: Streaming = None

    def takes(self, option):
        """Whether the metric's kernel (else its function) takes the keyword ``option``."""
        compute = self.kernel if self.kernel is not None else self.function
        return option in inspect.signature(compute).parameters

    def as_kernel(self):
        """Its kernel and plan, a :class:`MetricKernel`."""
        return MetricKernel(self.kernel, self.plan)


_REGISTRY = {}


def register(metric):
    """Declare ``metric`` (a :class:`Metric`) to every reader.

    Raises
    ------
    ValueError
        When a metric of the same name, function or scorer name is declared already, or
        a row of ``calibration_report`` lacks its kernel or plan.
    """
    if not isinstance(metric, Metric):
        raise ValueError(f"Expected a Metric declaration, got {metric!r}.")
    taken = {scorer.name for other in _REGISTRY.values() for scorer in other.scorers}
    clashes = [scorer.name for scorer in metric.scorers if scorer.name in taken]
    if metric.name in _REGISTRY or clashes:
        raise ValueError(
            f"Expected a new metric name and new scorer names, got {metric.name!r} with "
            f"scorers {[scorer.name for scorer in metric.scorers]}: declared already."
        )
    if metric.function is not None and by_function(metric.function) is not None:
        raise ValueError(f"{metric.function.__name__} is declared already.")
    if metric.report is not None and (metric.kernel is None or metric.plan is None):
        raise ValueError(
            f"Expected a kernel and a plan of {metric.name!r}: a row of calibration_report "
            "needs a kernel and a plan (its intervals share one resampling)."
        )
    _REGISTRY[metric.name] = metric
    if metric.dask is not None:
        HANDLERS[metric.function.__name__] = metric.dask
    return metric


def unregister(name):
    """Take the metric declared as ``name`` out of the registry; return its declaration."""
    metric = _REGISTRY.pop(name)
    if metric.dask is not None:
        HANDLERS.pop(metric.function.__name__, None)
    return metric


def declared():
    """The declared metrics, in the order they were declared."""
    return tuple(_REGISTRY.values())


def by_name(name):
    """The metric declared as ``name``, or None."""
    return _REGISTRY.get(name)


def by_function(function):
    """The metric whose public function is ``function``, or None."""
    for metric in _REGISTRY.values():
        if metric.function is not None and metric.function is function:
            return metric
    return None


class MetricKernel(NamedTuple):
    """How a public metric is computed on checked :class:`Predictions`.

    Attributes
    ----------
    compute : callable
        ``compute(predictions, **options)`` returns the metric, ``options`` being the
        public function's keyword arguments but ``labels``, ``sample_weight`` and
        ``groups`` (a kernel computes one set of predictions; see ``_group_rows``).
    plan : callable or None
        ``plan(predictions, **options)`` returns its :class:`ResamplingPlan`; None when
        a bootstrap recomputes the metric on every replicate.
    """

    compute: object
    plan: object


class _Kernels(Mapping):
    """Public metric function to its :class:`MetricKernel`, read from the declarations:
    :func:`calibration_error_ci`, :func:`calibration_report` and :func:`metric_values`
    check one set of predictions once and call the kernels of several metrics."""

    def _with_kernels(self):
        return [metric for metric in _REGISTRY.values() if metric.kernel is not None]

    def __getitem__(self, function):
        metric = by_function(function)
        if metric is None or metric.kernel is None:
            raise KeyError(function)
        return metric.as_kernel()

    def __iter__(self):
        return iter([metric.function for metric in self._with_kernels()])

    def __len__(self):
        return len(self._with_kernels())


#: Public metric function to its kernel and plan.
KERNELS = _Kernels()
