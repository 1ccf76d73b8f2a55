"""What a :class:`~sklearn_calib.metrics.CalibrationAccumulator` sums, and the shapes.

Every statistic is a float64 array that adds across batches (the state). Always kept:
``rows`` (the number of rows), ``positive`` (the number of rows of positive weight:
rows of weight 0 stand for no sample) and ``invalid`` (4,): the rows rejected by the deferred
checks of torch input (non-finite or negative probabilities, rows not summing to 1,
labels out of range, negative or non-finite weights). The parts, kept when a chosen
metric needs them (:data:`METRIC_PARTS`):

- ``top`` (7, n_bins): per equal-width bin of the score (top-label confidence, or the
  positive-class probability), the sums of ``w``, ``w s``, ``w y``, the count of
  positive weights, and ``w^2`` per range of scale (the weights scaled by a power of two
  first, :func:`~sklearn_calib.metrics._core._weights.square_range`, so that the sums hold
  weights of any scale).
- ``fine`` (7, n_fine): the same on ``n_fine`` equal-width cells (equal-mass bins, the
  tests of the cumulative differences).
- ``classwise`` (3, K, n_bins): per class and bin of ``p_k``: ``w``, ``w p_k``,
  ``w 1[y = k]``; ``predicted`` (3, K, n_bins): per predicted class and bin of the
  top-label confidence: ``w``, ``w r``, ``w 1[correct]``.
- ``scores`` (12,): ``w``, ``w NLL``, ``w Brier``, ``w 1[correct]``, Spiegelhalter's
  ``w (y - s)(1 - 2 s)``, then per range of scale (as ``top``'s squares) Spiegelhalter's
  ``w^2 (1 - 2 s)^2 s (1 - s)`` (:data:`SPREAD`) and ``w^2 s (1 - s)``
  (:data:`VARIANCE`), and the number of rows whose weight is not a count of repeated
  rows (not an integer, or from 2**53 up:
  :func:`~sklearn_calib.metrics._core._weights.sample_count`; :data:`NON_COUNTS`).
- ``grid`` (3, n_grid): ``w``, ``w s`` and ``w y`` linearly binned on ``n_grid`` points
  of [0, 1] (smECE, SECE).
- ``replicates`` (n_cells, 3, n_resamples): the Poisson bootstrap's sums of the
  resampled groups (:data:`GROUPS`): each replicate's ``w``, ``w s``, ``w y`` (or
  ``w``, ``w NLL``, ``w Brier``) per cell.

A metric declared with sums of its own (``Streaming.sums``) adds a part of its name, of
``n_sums`` numbers. Which parts a metric needs, and which group its interval reads, are
in its declaration (``_core._registry``).
"""

from dataclasses import dataclass

from .._core._registry import declared
from .._core._weights import SQUARE_RANGES

#: Where ``scores`` keeps Spiegelhalter's spread and the outcomes' variance under
#: calibration (each per range of scale), and the number of weights that are not counts.
SPREAD = slice(5, 5 + SQUARE_RANGES)
VARIANCE = slice(SPREAD.stop, SPREAD.stop + SQUARE_RANGES)
NON_COUNTS = VARIANCE.stop

#: The statistics a Poisson bootstrap resamples in one pass, in the order of their cells;
#: a metric's declaration names the group its interval reads (``Resampled``).
GROUPS = ("top", "scores", "smooth", "classwise")
#: Points of the replicates' smECE grid (smECE's own grid for bandwidths of at least 0.01).
REPLICATE_GRID = 1001
#: Cells of the fine histogram (equal-mass bins, tests).
FINE_BINS = 1 << 14
#: Points of the smECE and SECE grid: 4 * 10^5 steps, a multiple of smECE's own 1000.
GRID_POINTS = 400_001


@dataclass(frozen=True)
class Layout:
    """Sizes of an accumulator's statistics; two accumulators merge when they agree."""

    n_classes: int
    n_bins: int
    convention: str
    parts: frozenset
    n_resamples: int
    groups: tuple
    own_sums: tuple = ()
    n_fine: int = FINE_BINS
    n_grid: int = GRID_POINTS

    def shapes(self):
        """The name and shape of each statistic of the state."""
        k, b = self.n_classes, self.n_bins
        shapes = {
            "rows": (),
            "positive": (),
            "invalid": (4,),
            "top": (4 + SQUARE_RANGES, b),
            "fine": (4 + SQUARE_RANGES, self.n_fine),
            "classwise": (3, k, b),
            "predicted": (3, k, b),
            "scores": (NON_COUNTS + 1,),
            "grid": (3, self.n_grid),
        }
        shapes.update({name: (n_sums,) for name, n_sums in self.own_sums})
        shapes = {
            name: shape
            for name, shape in shapes.items()
            if name in self.parts | {"rows", "positive", "invalid"}
        }
        if self.n_resamples:
            shapes["replicates"] = (self.replicate_offsets()["end"], 3, self.n_resamples)
        return shapes

    def replicate_offsets(self):
        """The first replicate cell of each resampled group (and ``"end"``, their count)."""
        sizes = {
            "top": self.n_bins,
            "scores": 1,
            "smooth": REPLICATE_GRID,
            "classwise": self.n_classes * self.n_bins,
        }
        offsets, start = {}, 0
        for group in self.groups:
            offsets[group] = start
            start += sizes[group]
        offsets["end"] = start
        return offsets


def metric_parts():
    """Each declared metric an accumulator computes, to the parts of the state it needs."""
    parts = {}
    for metric in declared():
        if metric.streaming is not None:
            own = metric.streaming.sums is not None
            parts[metric.name] = (metric.name,) if own else metric.streaming.parts
    return parts


def interval_groups():
    """Each declared metric with a Poisson-bootstrap interval, to its resampled group."""
    return {
        metric.name: metric.streaming.interval.group
        for metric in declared()
        if metric.streaming is not None and metric.streaming.interval is not None
    }


def own_sums(names):
    """``(name, n_sums)`` of the metrics of ``names`` declared with sums of their own."""
    found = []
    for metric in declared():
        if metric.name in names and metric.streaming.sums is not None:
            found.append((metric.name, metric.streaming.n_sums))
    return tuple(found)
