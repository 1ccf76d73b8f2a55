"""How sure the reports' numbers are: a joint bootstrap of seeds and test rows, intervals,
and the checks and verdicts of the papers' claims.

A method is trained with k seeds and scored on one test set shared by every run, so each
number of a report (a method's mean over seeds, a difference, a ratio, a slope) varies for
two reasons, the training seed and the sample of test rows, and both are resampled together
in every replicate b = 1..B:

- test rows: a run's metric is recomputed on bootstrap resample b of the test rows
  (:func:`sklearn_calib.metrics.calibration_error_ci` called with the same
  ``random_state`` for every run: resample b is the same rows for every run and method, so
  comparisons are paired, as the test set is shared);
- seeds: each method draws k of its k seeds with replacement (its own draws, fixed by its
  label), and the drawn seeds' deviations from the seeds' mean are stretched by
  sqrt(k / (k - 1)), so that the replicates' variance of the mean over seeds is s² / k
  (the plain bootstrap gives (k - 1) / k of it: a third too little with 3 seeds).

An :class:`Estimate` holds a number, its replicates, and its replicates with the seeds held
(rows resampled only); arithmetic on estimates acts on all three, so any statistic of the
methods' numbers gets its replicates. Its interval is the number ± t · SE, SE the
replicates' standard deviation and t Student's quantile with Satterthwaite's degrees of
freedom: the seed part of the variance (the replicates' variance less that of the rows-only
replicates) carries Σ (k_m - 1) degrees of freedom, the rows' part many more, so
ν = df_seeds · (variance / seed variance)². With 3 seeds the seed part often dominates and
t approaches 4.30 (one method) or 2.78 (two). With one seed there is no seed variation to
see, and the interval holds the test rows' noise only (the normal quantile).

A check of a claim *holds* when its interval lies on the claimed side of the bound, *fails*
when it lies on the other side, and is *open* when the interval holds the bound; the
verdict of a claim is read from its checks (:func:`verdict`). Shape claims are tested
against a null: :func:`u_shape` (descends then ascends) against a flat curve,
:func:`increasing` (a monotone trend) against a zero slope.
"""

import math
import zlib
from dataclasses import dataclass

import numpy as np
from scipy import stats

#: Bootstrap replicates of every estimate. The intervals use the replicates' standard
#: deviation, known to about 1 / sqrt(2 * 400) = 3.5 % from 400 of them; a shape test's
#: p-value near 0.05 to about 0.011.
N_RESAMPLES = 400
#: Coverage of the intervals.
CONFIDENCE = 0.95
#: Level of the shape tests (one minus the intervals' coverage).
ALPHA = 1.0 - CONFIDENCE
#: ``random_state`` of every resampling of test rows (the same for every run: paired).
ROW_SEED = 0
#: Seed of the seed draws, combined with a method's label.
SEED_DRAWS = 1

HOLDS, FAILS, OPEN = "holds", "fails", "open"
#: The verdicts of a claim, in the order the summary counts them.
VERDICTS = ("agrees", "partly", "disagrees", "inconclusive")


@dataclass(frozen=True)
class Estimate:
    """A number of a report with its bootstrap replicates.

    Parameters
    ----------
    point : float
        The number from all seeds and all test rows.
    replicates : ndarray of shape (n_resamples,)
        Its value in each replicate (seeds and rows resampled).
    rows : ndarray of shape (n_resamples,)
        Its value in each replicate with every seed kept (rows resampled only).
    seeds : tuple of (str, int)
        The methods it depends on and their numbers of seeds.
    """

    point: float
    replicates: np.ndarray
    rows: np.ndarray
    seeds: tuple = ()

    @classmethod
    def constant(cls, value, n_resamples):
        """A number known exactly (a bound, a paper's value)."""
        filled = np.full(n_resamples, float(value))
        return cls(float(value), filled, filled)

    def _combine(self, other, operation):
        if not isinstance(other, Estimate):
            other = Estimate.constant(other, self.replicates.shape[0])
        seeds = tuple(sorted(set(self.seeds) | set(other.seeds)))
        return Estimate(
            float(operation(self.point, other.point)),
            operation(self.replicates, other.replicates),
            operation(self.rows, other.rows),
            seeds,
        )

    def __add__(self, other):
        return self._combine(other, np.add)

    __radd__ = __add__

    def __sub__(self, other):
        return self._combine(other, np.subtract)

    def __rsub__(self, other):
        return self._combine(other, lambda a, b: np.subtract(b, a))

    def __mul__(self, other):
        return self._combine(other, np.multiply)

    __rmul__ = __mul__

    def __truediv__(self, other):
        return self._combine(other, np.divide)

    def __neg__(self):
        return Estimate(-self.point, -self.replicates, -self.rows, self.seeds)

    def __abs__(self):
        return Estimate(abs(self.point), np.abs(self.replicates), np.abs(self.rows), self.seeds)

    @property
    def seed_df(self):
        """Degrees of freedom of the seed variation: Σ (k - 1) over the methods."""
        return sum(k - 1 for _, k in self.seeds)

    @property
    def finite(self):
        return math.isfinite(self.point) and bool(np.isfinite(self.replicates).all())

    def df(self):
        """Satterthwaite's degrees of freedom of the interval (inf: rows' noise only)."""
        total = float(np.var(self.replicates, ddof=1))
        seed = max(total - float(np.var(self.rows, ddof=1)), 0.0)
        if self.seed_df == 0 or seed == 0.0:
            return math.inf
        return self.seed_df * (total / seed) ** 2

    @property
    def measured(self):
        """Whether its variation was seen: False for a number of single runs whose value
        does not depend on the test rows (nothing varies, yet nothing is known exactly)."""
        return bool(np.ptp(self.replicates) > 0) or all(k > 1 for _, k in self.seeds)

    def interval(self, confidence=CONFIDENCE):
        """``(low, high)``: the number ± t · SE (see the module docstring); NaNs when not
        finite or not :attr:`measured` (no check can then hold or fail)."""
        if not (self.finite and self.measured):
            return math.nan, math.nan
        quantile = 0.5 + confidence / 2.0
        df = self.df()
        t = stats.norm.ppf(quantile) if math.isinf(df) else stats.t.ppf(quantile, df)
        half = t * float(np.std(self.replicates, ddof=1))
        return self.point - half, self.point + half

    def text(self, scale=1.0, digits=2):
        """``"m [low, high]"`` times ``scale`` ("–" when not finite)."""
        if not math.isfinite(self.point):
            return "–"
        low, high = self.interval()
        if not math.isfinite(low):
            return f"{scale * self.point:.{digits}f} [n/a]"
        return (
            f"{scale * self.point:.{digits}f} [{scale * low:.{digits}f}, {scale * high:.{digits}f}]"
        )


def _stack(estimates, reduce):
    seeds = tuple(sorted({pair for estimate in estimates for pair in estimate.seeds}))
    return Estimate(
        float(reduce([e.point for e in estimates])),
        reduce([e.replicates for e in estimates], axis=0),
        reduce([e.rows for e in estimates], axis=0),
        seeds,
    )


def minimum(estimates):
    """The smallest of several estimates, replicate by replicate."""
    return _stack(list(estimates), np.min)


def maximum(estimates):
    """The largest of several estimates, replicate by replicate."""
    return _stack(list(estimates), np.max)


def median(estimates):
    """The median of several estimates, replicate by replicate."""
    return _stack(list(estimates), np.median)


def seed_draws(label, n_seeds, n_resamples):
    """The seeds each replicate draws for the method ``label``: (n_resamples, n_seeds)
    indices, the same whatever the order in which methods are evaluated."""
    rng = np.random.default_rng([SEED_DRAWS, zlib.crc32(label.encode())])
    return rng.integers(0, n_seeds, size=(n_resamples, n_seeds))


def over_seeds(label, values, replicates=None, n_resamples=N_RESAMPLES):
    """The mean over seeds of a method's per-run values, as an :class:`Estimate`.

    Parameters
    ----------
    label : str
        The method (its seeds are drawn by label: the same draws for all its numbers).
    values : sequence of float
        One value per seed (non-finite values, diverged runs, are left out).
    replicates : ndarray of shape (n_seeds, n_resamples) or None, default=None
        Each run's value on each resample of the test rows; None for a number that does
        not depend on the test rows (a temperature chosen on validation data).
    n_resamples : int, default=N_RESAMPLES
        Used when ``replicates`` is None.

    Returns
    -------
    Estimate
    """
    values = np.asarray(values, dtype=np.float64)
    if replicates is None:
        replicates = np.repeat(values[:, None], n_resamples, axis=1)
    replicates = np.asarray(replicates, dtype=np.float64)
    keep = np.isfinite(values) & np.isfinite(replicates).all(axis=1)
    values, replicates = values[keep], replicates[keep]
    n_resamples = replicates.shape[1]
    k = values.shape[0]
    if k == 0:
        empty = np.full(n_resamples, math.nan)
        return Estimate(math.nan, empty, empty, ((label, 0),))
    rows = replicates.mean(axis=0)
    if k == 1:
        return Estimate(float(values[0]), rows, rows, ((label, 1),))
    draws = seed_draws(label, k, n_resamples)
    drawn = np.take_along_axis(replicates, draws.T, axis=0).mean(axis=0)
    stretched = rows + math.sqrt(k / (k - 1)) * (drawn - rows)
    return Estimate(float(values.mean()), stretched, rows, ((label, k),))


def outcome(low, high, bound, side):
    """Whether the interval ``[low, high]`` lies above (``side=+1``) or below (``-1``) the
    bound: :data:`HOLDS` on the claimed side, :data:`FAILS` on the other, :data:`OPEN`
    when it holds the bound (or is not finite)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return OPEN
    if side > 0:
        return HOLDS if low > bound else FAILS if high < bound else OPEN
    return HOLDS if high < bound else FAILS if low > bound else OPEN


def above(estimate, bound=0.0):
    """Check that ``estimate`` exceeds ``bound``."""
    return outcome(*estimate.interval(), bound, +1)


def below(estimate, bound=0.0):
    """Check that ``estimate`` is below ``bound``."""
    return outcome(*estimate.interval(), bound, -1)


def within(estimate, low, high):
    """Check that ``estimate`` lies in ``[low, high]``: holds when its interval does, fails
    when its interval lies outside, open otherwise."""
    lower, upper = estimate.interval()
    if not (math.isfinite(lower) and math.isfinite(upper)):
        return OPEN
    if low <= lower and upper <= high:
        return HOLDS
    return FAILS if upper < low or lower > high else OPEN


def verdict(outcomes):
    """The verdict on a claim from the outcomes of its checks.

    "agrees" when every check holds, "partly" when some do, "disagrees" when none does and
    some fail, "inconclusive" when every interval holds its bound (the data cannot tell).
    """
    outcomes = list(outcomes)
    if not outcomes:
        raise ValueError("Expected at least one check of the claim, got none.")
    held = outcomes.count(HOLDS)
    if held == len(outcomes):
        return "agrees"
    if held:
        return "partly"
    return "disagrees" if FAILS in outcomes else "inconclusive"


def tally(outcomes):
    """``"2 hold, 1 fails, 1 open"``: how many checks hold, fail and are open."""
    words = ((HOLDS, "hold"), (FAILS, "fail"), (OPEN, OPEN))
    parts = [(outcomes.count(name), name, plural) for name, plural in words]
    return ", ".join(
        f"{count} {name if count == 1 else plural}" for count, name, plural in parts if count
    )


def _u_statistic(curves):
    """How far both ends of each curve rise above its lowest interior point (rows: curves)."""
    interior = curves[:, 1:-1].min(axis=1)
    return np.minimum(curves[:, 0], curves[:, -1]) - interior


def u_shape(estimates):
    """Test that a curve descends then ascends (its two ends above an interior point).

    The statistic is ``min(y_first, y_last) - min(y_interior)``; its null distribution is
    that of the replicates' deviations from their means (a flat curve plus the same noise),
    and the p-value the share of null values at least the observed one. An inverted curve
    is tested the same way on ``-y``.

    Parameters
    ----------
    estimates : list of Estimate
        The curve's points, at least three.

    Returns
    -------
    outcome : str
        :data:`HOLDS` when the shape is significant at :data:`ALPHA`, :data:`FAILS` when the
        inverted shape is, else :data:`OPEN`.
    p_value : float
        The p-value of the claimed shape.
    """
    if len(estimates) < 3:
        raise ValueError(f"Expected a curve of at least 3 points, got {len(estimates)}.")
    points = np.array([e.point for e in estimates])
    noise = np.array([e.replicates - e.replicates.mean() for e in estimates]).T
    p_values = []
    for sign in (1.0, -1.0):
        observed = _u_statistic(sign * points[None, :])[0]
        null = _u_statistic(sign * noise)
        p_values.append((1 + np.count_nonzero(null >= observed)) / (1 + null.shape[0]))
    if p_values[0] < ALPHA:
        return HOLDS, p_values[0]
    return (FAILS if p_values[1] < ALPHA else OPEN), p_values[0]


def slope(estimates, x):
    """The least-squares slope of the estimates against ``x``, as an :class:`Estimate`."""
    x = np.asarray(x, dtype=np.float64)
    weights = (x - x.mean()) / np.sum((x - x.mean()) ** 2)
    total = estimates[0] * float(weights[0])
    for estimate, weight in zip(estimates[1:], weights[1:], strict=True):
        total = total + estimate * float(weight)
    return total


def increasing(estimates, x):
    """Test a monotone increase of the estimates with ``x`` against a zero slope.

    Holds when the slope's interval lies above zero and no step between neighbours goes
    significantly down; fails when the slope's interval lies below zero; open otherwise.

    Returns
    -------
    outcome : str
    trend : Estimate
        The slope.
    """
    trend = slope(estimates, x)
    result = above(trend)
    steps = zip(estimates, estimates[1:], strict=False)
    if result == HOLDS and any(below(b - a) == HOLDS for a, b in steps):
        result = OPEN
    return result, trend
