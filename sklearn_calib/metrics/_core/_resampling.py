"""Bootstrap resampling of additive statistics: bin once, resample counts.

A metric that is a function of sums over rows (per-bin counts, score sums, outcome sums,
kernel grid sums) is described by a :class:`ResamplingPlan`: the rows' contributions,
summed per cell, and the metric as a function of those sums, vectorised over replicates.
The rows are split at random into ``G`` groups of equal size (all rows are their own
group when there are at most ``MAX_GROUPS`` of them; fewer groups, down to
``MIN_GROUPS``, when the statistics are many); one pass sums each group's
contributions; a bootstrap replicate draws ``G`` groups with replacement and its sums are
``counts @ group_sums``. With one row per group this is exactly the ordinary bootstrap of
rows; with larger groups it resamples blocks of exchangeable rows, which matches the
first two moments of the resampled sums (the sums are what the metric sees) at a cost
independent of the number of rows.
"""

import numbers
from typing import NamedTuple

import numpy as np

from ..._validation import check_confidence_level

#: Most groups a bootstrap splits the rows into (fewer rows: one group per row).
MAX_GROUPS = 4096
#: Fewest groups when a plan has many statistics (memory budget below).
MIN_GROUPS = 256
#: Most float64 entries of the (groups x statistics) table.
_TABLE_BUDGET = 1 << 24
#: Most multiply-adds of the (replicates x groups) @ (groups x statistics) product.
_PRODUCT_BUDGET = 1 << 31


class ResamplingPlan:
    """A metric as a function of additive per-row statistics.

    Parameters
    ----------
    n_rows : int
        Number of rows.
    n_stats : int
        Number of summed statistics.
    accumulate : callable
        ``accumulate(group, n_groups)`` returns the ``(n_groups, n_stats)`` sums of the
        rows of each group, ``group`` being each row's group in ``[0, n_groups)``.
    value : callable
        ``value(sums)`` maps ``(..., n_stats)`` sums to the metric's ``(...)`` values.
    """

    def __init__(self, n_rows, n_stats, accumulate, value):
        self.n_rows = n_rows
        self.n_stats = n_stats
        self.accumulate = accumulate
        self.value = value


def cell_sums(group, n_groups, cell, n_cells, columns):
    """Sum each column per (group, cell) with one ``np.bincount`` per column.

    Parameters
    ----------
    group : ndarray of shape (n_entries,)
        Group of each entry.
    n_groups : int
        Number of groups.
    cell : ndarray of shape (n_entries,)
        Cell (for example bin) of each entry, in ``[0, n_cells)``.
    n_cells : int
        Number of cells.
    columns : sequence of ndarray of shape (n_entries,)
        Quantities to sum.

    Returns
    -------
    sums : ndarray of shape (n_groups, len(columns) * n_cells)
        Column-major by quantity: the first ``n_cells`` entries sum the first column.
    """
    key = group.astype(np.int64) * n_cells + cell
    size = n_groups * n_cells
    sums = np.empty((n_groups, len(columns), n_cells))
    for position, column in enumerate(columns):
        counted = np.bincount(key, weights=column, minlength=size)
        sums[:, position, :] = counted.reshape(n_groups, n_cells)
    return sums.reshape(n_groups, -1)


def group_count(n_rows, n_stats, n_resamples):
    """Return the number of groups the rows are split into.

    One group per row up to ``MAX_GROUPS`` rows; fewer groups, down to ``MIN_GROUPS``,
    when ``n_stats`` statistics per group (with ``n_resamples`` replicates) would exceed
    the memory or time budget.

    Parameters
    ----------
    n_rows : int
        Number of rows.
    n_stats : int
        Statistics per group.
    n_resamples : int
        Number of replicates.

    Returns
    -------
    n_groups : int
    """
    n_stats = max(n_stats, 1)
    affordable = min(_TABLE_BUDGET // n_stats, _PRODUCT_BUDGET // (n_stats * n_resamples))
    return min(n_rows, MAX_GROUPS, max(MIN_GROUPS, affordable))


def resampled_counts(rng, n_resamples, n_groups):
    """Return how often each group is drawn in each replicate (multinomial counts).

    Parameters
    ----------
    rng : numpy.random.RandomState
        Random numbers.
    n_resamples : int
        Number of replicates.
    n_groups : int
        Number of groups, each drawn with probability ``1 / n_groups``, ``n_groups``
        times per replicate.

    Returns
    -------
    counts : ndarray of shape (n_resamples, n_groups), float64
    """
    draws = rng.randint(0, n_groups, size=(n_resamples, n_groups)).astype(np.int64, copy=False)
    draws += np.arange(0, n_resamples * n_groups, n_groups, dtype=np.int64)[:, None]
    counts = np.bincount(draws.ravel(), minlength=n_resamples * n_groups)
    return counts.reshape(n_resamples, n_groups).astype(np.float64)


class Resampling(NamedTuple):
    """Rows split at random into groups, and how often each replicate draws each group.

    Attributes
    ----------
    group : ndarray of shape (n_rows,)
        Each row's group: groups of equal size (up to one row), or one row each.
    n_groups : int
        Number of groups.
    counts : ndarray of shape (n_resamples, n_groups)
        The multinomial counts of :func:`resampled_counts`.
    """

    group: np.ndarray
    n_groups: int
    counts: np.ndarray


def draw_resampling(n_rows, n_groups, n_resamples, rng):
    """Split ``n_rows`` rows into ``n_groups`` random groups and draw the replicates' counts.

    Parameters
    ----------
    n_rows : int
        Number of rows.
    n_groups : int
        Number of groups (from :func:`group_count`), at most ``n_rows``.
    n_resamples : int
        Number of replicates.
    rng : numpy.random.RandomState
        Random numbers.

    Returns
    -------
    resampling : Resampling
    """
    if n_groups == n_rows:
        group = np.arange(n_rows)
    else:
        group = rng.permutation(n_rows) % n_groups
    return Resampling(group, n_groups, resampled_counts(rng, n_resamples, n_groups))


def bootstrap_sums(plan, resampling):
    """Sum the plan's statistics per group and draw the replicates' sums.

    Parameters
    ----------
    plan : ResamplingPlan
        The metric's statistics.
    resampling : Resampling
        The groups of the plan's rows and the replicates' counts.

    Returns
    -------
    group_sums : ndarray of shape (n_groups, n_stats)
        Each group's sums (their total is the full sample's).
    replicate_sums : ndarray of shape (n_resamples, n_stats)
    """
    group_sums = plan.accumulate(resampling.group, resampling.n_groups)
    return group_sums, resampling.counts @ group_sums


def resample(plan, n_resamples, rng):
    """The :class:`Resampling` of a plan's rows alone, for ``n_resamples`` replicates."""
    n_groups = group_count(plan.n_rows, plan.n_stats, n_resamples)
    return draw_resampling(plan.n_rows, n_groups, n_resamples, rng)


def check_interval_options(n_resamples, confidence_level):
    """Return ``n_resamples`` (an integer >= 10) and ``confidence_level`` (in (0, 1)).

    Parameters
    ----------
    n_resamples : int
        Number of bootstrap replicates.
    confidence_level : float
        Coverage of an interval.

    Returns
    -------
    n_resamples : int
    confidence_level : float
    """
    if (
        isinstance(n_resamples, (bool, np.bool_))
        or not isinstance(n_resamples, numbers.Integral)
        or n_resamples < 10
    ):
        raise ValueError(f"Expected `n_resamples` to be an integer >= 10, got {n_resamples!r}.")
    confidence_level = check_confidence_level(confidence_level)
    return int(n_resamples), confidence_level
