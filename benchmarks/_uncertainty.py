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

An :class:`Estimate` holds a number, its replicates, its replicates with the seeds held
(rows resampled only) and, per method, its replicates with only that method's seeds drawn;
arithmetic on estimates acts on all of them, so any statistic of the methods' numbers gets
its replicates. Its interval is the number ± t · SE, SE the replicates' standard deviation
and t Student's quantile with Satterthwaite's degrees of freedom: method m's seeds carry the
variance v_m (its replicates' variance less the rows-only one) with k_m - 1 degrees of
freedom, the rows' part many more, so ν = variance² / Σ v_m² / (k_m - 1). A method that
never is the lowest of a best-of-N carries none of its variance and adds no degrees of
freedom. With 3 seeds the seed part often dominates and t approaches 4.30 (one method) or
2.78 (two). With one seed there is no seed variation to see, and the interval holds the
test rows' noise only (the normal quantile). Intervals are clipped to the range of the
quantity (an ECE is not below 0); one with fewer than 2 degrees of freedom (2 seeds) is
marked :data:`FEW`.

A claim is split into checks (:class:`Check`), each with a p-value: a number against a bound
(:func:`above`, :func:`below`: the interval's two-sided test), a share of seeds
(:func:`most_seeds`, for numbers chosen on a grid: a binomial test of the seeds' count), or
a shape (:func:`u_shape`, :func:`increasing`). Holm's step-down procedure over the claim's
checks (:func:`holm`) keeps the chance of any wrong decision in the claim at
:data:`ALPHA`; a decided check *holds* when the data lie on the claimed side and *fails*
when they lie on the other; an undecided one is *open*. The claim's headline
(:func:`headline`) is read from the decided checks.
"""

import math
import zlib
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

#: Bootstrap replicates of every estimate. The intervals use the replicates' standard
#: deviation, known to about 1 / sqrt(2 * 400) = 3.5 % from 400 of them; a shape test's
#: p-value near 0.05 to about 0.011.
N_RESAMPLES = 400
#: Coverage of the intervals.
CONFIDENCE = 0.95
#: Level of every claim's checks together (Holm) and of a single check.
ALPHA = 1.0 - CONFIDENCE
#: ``random_state`` of every resampling of test rows (the same for every run: paired).
ROW_SEED = 0
#: Seed of the seed draws, combined with a method's label.
SEED_DRAWS = 1
#: Degrees of freedom below which an interval is marked :data:`FEW` (2 seeds: t > 4.3).
FEW_DF = 2.0
#: The mark of an interval with fewer than :data:`FEW_DF` degrees of freedom.
FEW = "‡"
#: Tolerance of a grid value at a band's edge (1.1 may be stored as 1.1000000000000001).
GRID_TOLERANCE = 1e-9

HOLDS, FAILS, OPEN = "holds", "fails", "open"
#: The headlines of a claim, in the order the summary counts them.
VERDICTS = ("agrees", "mixed", "disagrees", "inconclusive")
_UNBOUNDED = (-math.inf, math.inf)


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
    parts : dict of str to ndarray
        Per method, its value in each replicate with only that method's seeds drawn (rows
        resampled): what the method's seeds add to the variance.
    bounds : tuple of float
        The range of the quantity (an ECE lies in [0, 1]); intervals are clipped to it.
    """

    point: float
    replicates: np.ndarray
    rows: np.ndarray
    seeds: tuple = ()
    parts: dict = field(default_factory=dict, repr=False)
    bounds: tuple = _UNBOUNDED

    @classmethod
    def constant(cls, value, n_resamples):
        """A number known exactly (a bound, a paper's value)."""
        filled = np.full(n_resamples, float(value))
        return cls(float(value), filled, filled, bounds=(float(value), float(value)))

    def part(self, label):
        """Its replicates with only the seeds of ``label`` drawn."""
        return self.parts.get(label, self.rows)

    def _combine(self, other, operation, bounds=_UNBOUNDED):
        if not isinstance(other, Estimate):
            other = Estimate.constant(other, self.replicates.shape[0])
        labels = sorted(set(self.parts) | set(other.parts))
        return Estimate(
            float(operation(self.point, other.point)),
            operation(self.replicates, other.replicates),
            operation(self.rows, other.rows),
            tuple(sorted(set(self.seeds) | set(other.seeds))),
            {label: operation(self.part(label), other.part(label)) for label in labels},
            bounds,
        )

    def _shifted(self, other, sign):
        """The bounds of ``self + sign * other`` for a constant ``other``."""
        if isinstance(other, Estimate):
            return _UNBOUNDED
        low, high = self.bounds
        return (low + sign * other, high + sign * other)

    def _scaled(self, other, divide=False):
        """The bounds of ``self * other`` (or ``/``) for a constant ``other`` > 0, or of a
        ratio of two non-negative estimates."""
        if isinstance(other, Estimate):
            both = divide and self.bounds[0] >= 0 and other.bounds[0] >= 0
            return (0.0, math.inf) if both else _UNBOUNDED
        if other <= 0:
            return _UNBOUNDED
        factor = 1.0 / other if divide else other
        return (self.bounds[0] * factor, self.bounds[1] * factor)

    def __add__(self, other):
        return self._combine(other, np.add, self._shifted(other, 1.0))

    __radd__ = __add__

    def __sub__(self, other):
        return self._combine(other, np.subtract, self._shifted(other, -1.0))

    def __rsub__(self, other):
        return (-self)._combine(other, np.add, (-self)._shifted(other, 1.0))

    def __mul__(self, other):
        return self._combine(other, np.multiply, self._scaled(other))

    __rmul__ = __mul__

    def __truediv__(self, other):
        return self._combine(other, np.divide, self._scaled(other, divide=True))

    def __neg__(self):
        parts = {label: -values for label, values in self.parts.items()}
        low, high = self.bounds
        return Estimate(-self.point, -self.replicates, -self.rows, self.seeds, parts, (-high, -low))

    def __abs__(self):
        parts = {label: np.abs(values) for label, values in self.parts.items()}
        high = max(abs(self.bounds[0]), abs(self.bounds[1]))
        return Estimate(
            abs(self.point),
            np.abs(self.replicates),
            np.abs(self.rows),
            self.seeds,
            parts,
            (0.0, high),
        )

    @property
    def finite(self):
        return math.isfinite(self.point) and bool(np.isfinite(self.replicates).all())

    def df(self):
        """Satterthwaite's degrees of freedom of the interval (inf: rows' noise only):
        the variance squared over Σ v_m² / (k_m - 1), v_m what method m's seeds add."""
        total = float(np.var(self.replicates, ddof=1))
        rows = float(np.var(self.rows, ddof=1))
        spread = 0.0
        for label, k in self.seeds:
            if k > 1:
                seed = max(float(np.var(self.part(label), ddof=1)) - rows, 0.0)
                spread += seed**2 / (k - 1)
        return math.inf if spread == 0.0 else total**2 / spread

    @property
    def measured(self):
        """Whether its variation was seen: False for a number of single runs whose value
        does not depend on the test rows (nothing varies, yet nothing is known exactly)."""
        return bool(np.ptp(self.replicates) > 0) or all(k > 1 for _, k in self.seeds)

    def _t(self, confidence=CONFIDENCE):
        """The t quantile of the interval and the replicates' standard deviation."""
        df = self.df()
        quantile = 0.5 + confidence / 2.0
        t = stats.norm.ppf(quantile) if math.isinf(df) else stats.t.ppf(quantile, df)
        return t, float(np.std(self.replicates, ddof=1))

    def interval(self, confidence=CONFIDENCE):
        """``(low, high)``: the number ± t · SE (see the module docstring), clipped to the
        quantity's range; NaNs when not finite or not :attr:`measured` (no check can then
        hold or fail)."""
        if not (self.finite and self.measured):
            return math.nan, math.nan
        t, sd = self._t(confidence)
        low, high = self.bounds
        return max(self.point - t * sd, low), min(self.point + t * sd, high)

    def p_value(self, bound):
        """The two-sided p-value of the number being ``bound`` (t with :meth:`df`), and
        the side of the bound the number lies on (+1 above, -1 below, 0 on it); NaN and 0
        when the interval is not defined."""
        if not (self.finite and self.measured):
            return math.nan, 0
        sd = float(np.std(self.replicates, ddof=1))
        difference = self.point - bound
        side = int(np.sign(difference))
        if sd == 0.0:
            return (0.0 if side else 1.0), side
        statistic = abs(difference) / sd
        df = self.df()
        tail = stats.norm.sf(statistic) if math.isinf(df) else stats.t.sf(statistic, df)
        return float(2.0 * tail), side

    def text(self, scale=1.0, digits=2):
        """``"m [low, high]"`` times ``scale`` ("–" when not finite), marked :data:`FEW`
        when it has fewer than :data:`FEW_DF` degrees of freedom."""
        if not math.isfinite(self.point):
            return "–"
        low, high = self.interval()
        if not math.isfinite(low):
            return f"{scale * self.point:.{digits}f} [n/a]"
        few = FEW if self.df() < FEW_DF else ""
        return (
            f"{scale * self.point:.{digits}f} "
            f"[{scale * low:.{digits}f}, {scale * high:.{digits}f}]{few}"
        )


def _stack(estimates, reduce):
    seeds = tuple(sorted({pair for estimate in estimates for pair in estimate.seeds}))
    labels = sorted({label for estimate in estimates for label in estimate.parts})
    return Estimate(
        float(reduce([e.point for e in estimates])),
        reduce([e.replicates for e in estimates], axis=0),
        reduce([e.rows for e in estimates], axis=0),
        seeds,
        {label: reduce([e.part(label) for e in estimates], axis=0) for label in labels},
        (min(e.bounds[0] for e in estimates), max(e.bounds[1] for e in estimates)),
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


def over_seeds(label, values, replicates=None, n_resamples=N_RESAMPLES, bounds=_UNBOUNDED):
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
    bounds : tuple of float, default=(-inf, inf)
        The range of the quantity (intervals are clipped to it).

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
    bounds = (float(bounds[0]), float(bounds[1]))
    if k == 0:
        empty = np.full(n_resamples, math.nan)
        return Estimate(math.nan, empty, empty, ((label, 0),), bounds=bounds)
    rows = replicates.mean(axis=0)
    if k == 1:
        return Estimate(float(values[0]), rows, rows, ((label, 1),), bounds=bounds)
    draws = seed_draws(label, k, n_resamples)
    drawn = np.take_along_axis(replicates, draws.T, axis=0).mean(axis=0)
    stretched = rows + math.sqrt(k / (k - 1)) * (drawn - rows)
    return Estimate(
        float(values.mean()), stretched, rows, ((label, k),), {label: stretched}, bounds
    )


@dataclass(frozen=True)
class Check:
    """One check of a claim: what is compared, the claimed side and the test's p-value.

    Parameters
    ----------
    label : str
        What is compared ("LS − CE (points)").
    value : str
        The number as shown, with its interval or count.
    claimed : str
        The claimed side ("< 0", "in [0.9, 1.1] for most seeds").
    p_value : float
        The p-value of the test that decides the check (NaN: it cannot be decided).
    side : int
        +1 when the data lie on the claimed side, -1 on the other, 0 neither.
    """

    label: str
    value: str
    claimed: str
    p_value: float
    side: int


def _decimal(number):
    return f"{number:g}"


def _bound_check(estimate, bound, side, label, scale, digits):
    p_value, where = estimate.p_value(bound)
    claimed = f"{'>' if side > 0 else '<'} {_decimal(scale * bound)}"
    return Check(label, estimate.text(scale, digits), claimed, p_value, where * side)


def above(estimate, bound=0.0, label="", scale=1.0, digits=2):
    """Check that ``estimate`` exceeds ``bound`` (shown times ``scale``)."""
    return _bound_check(estimate, bound, +1, label, scale, digits)


def below(estimate, bound=0.0, label="", scale=1.0, digits=2):
    """Check that ``estimate`` is below ``bound`` (shown times ``scale``)."""
    return _bound_check(estimate, bound, -1, label, scale, digits)


def most_seeds(values, low, high, label="", digits=2):
    """Check that most seeds' values lie in ``[low, high]``: for a number chosen on a
    grid (a temperature on a 0.1 grid), whose mean over seeds is no t-distributed number.

    The count of seeds in the band is tested against half of them (binomial, one-sided in
    the direction the count lies): 5 of 5 seeds give p = 1/32, the least 5 seeds can give.

    Parameters
    ----------
    values : sequence of float
        One value per seed (non-finite values are left out).
    low, high : float
        The band, edges included (to within :data:`GRID_TOLERANCE`).
    label : str, default=""
    digits : int, default=2

    Returns
    -------
    Check
    """
    values = [float(v) for v in values if math.isfinite(v)]
    inside = sum(low - GRID_TOLERANCE <= v <= high + GRID_TOLERANCE for v in values)
    k = len(values)
    claimed = f"in [{_decimal(low)}, {_decimal(high)}] for most seeds"
    shown = f"{inside} of {k} seeds ({', '.join(f'{v:.{digits}f}' for v in values)})"
    if k == 0:
        return Check(label, shown, claimed, math.nan, 0)
    more = float(stats.binom.sf(inside - 1, k, 0.5))
    fewer = float(stats.binom.cdf(inside, k, 0.5))
    side = int(np.sign(2 * inside - k))
    return Check(label, shown, claimed, more if side > 0 else fewer if side < 0 else 1.0, side)


def holm(checks, alpha=ALPHA):
    """The outcome of each check of a claim, Holm-corrected, with its adjusted p-value.

    Holm's step-down procedure: the smallest p-value is compared with alpha / m, the next
    with alpha / (m - 1), and so on, until one is not smaller; the checks before it are
    decided (the chance of any wrong decision among the m checks stays at most alpha). A
    decided check holds or fails by its side; a check of side 0 stays open.

    Returns
    -------
    list of (str, float)
        Each check's outcome and its Holm-adjusted p-value, in the checks' order.
    """
    checks = list(checks)
    m = len(checks)
    order = sorted(range(m), key=lambda i: _p_or_one(checks[i]))
    adjusted, running = [1.0] * m, 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * _p_or_one(checks[index])))
        adjusted[index] = running
    results = []
    for check, p_value in zip(checks, adjusted, strict=True):
        outcome = OPEN
        if p_value < alpha and check.side:
            outcome = HOLDS if check.side > 0 else FAILS
        results.append((outcome, p_value))
    return results


def _p_or_one(check):
    return check.p_value if math.isfinite(check.p_value) else 1.0


def headline(outcomes):
    """The headline of a claim from the outcomes of its checks.

    "agrees" when every decided check holds, "disagrees" when every decided check fails,
    "mixed" when decided checks disagree with each other, "inconclusive" when none is
    decided (the data cannot tell).
    """
    outcomes = list(outcomes)
    if not outcomes:
        raise ValueError("Expected at least one check of the claim, got none.")
    held, failed = outcomes.count(HOLDS), outcomes.count(FAILS)
    if not held and not failed:
        return "inconclusive"
    if not failed:
        return "agrees"
    return "disagrees" if not held else "mixed"


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


def u_shape(estimates, label="", scale=1.0):
    """Test that a curve descends then ascends (its two ends above an interior point).

    The statistic is ``min(y_first, y_last) - min(y_interior)``; its null distribution is
    that of the replicates' deviations from their means (a flat curve plus the same noise),
    and the p-value the share of null values at least the observed one. The inverted curve
    is tested the same way on ``-y``; the check's p-value is the smaller of the two, its
    side that of the shape it belongs to.

    Parameters
    ----------
    estimates : list of Estimate
        The curve's points, at least three.
    label : str, default=""
    scale : float, default=1.0
        Factor of the statistic as shown.

    Returns
    -------
    Check
    """
    if len(estimates) < 3:
        raise ValueError(f"Expected a curve of at least 3 points, got {len(estimates)}.")
    points = np.array([e.point for e in estimates])
    noise = np.array([e.replicates - e.replicates.mean() for e in estimates]).T
    p_values, observed = [], []
    for sign in (1.0, -1.0):
        statistic = _u_statistic(sign * points[None, :])[0]
        null = _u_statistic(sign * noise)
        observed.append(statistic)
        p_values.append((1 + np.count_nonzero(null >= statistic)) / (1 + null.shape[0]))
    side = 1 if p_values[0] <= p_values[1] else -1
    value = f"{scale * observed[0]:.2f} (p = {p_values[0]:.2g} against a flat curve)"
    return Check(label, value, "descends then ascends", float(min(p_values)), side)


def slope(estimates, x):
    """The least-squares slope of the estimates against ``x``, as an :class:`Estimate`."""
    x = np.asarray(x, dtype=np.float64)
    weights = (x - x.mean()) / np.sum((x - x.mean()) ** 2)
    total = estimates[0] * float(weights[0])
    for estimate, weight in zip(estimates[1:], weights[1:], strict=True):
        total = total + estimate * float(weight)
    return total


def increasing(estimates, x, label="", digits=2):
    """Test a monotone increase of the estimates with ``x`` against a zero slope.

    The slope's interval decides, except that a rise with a step between neighbours
    significantly down (at :data:`ALPHA`) is not monotone and stays open.

    Returns
    -------
    check : Check
    trend : Estimate
        The slope.
    """
    trend = slope(estimates, x)
    check = above(trend, label=label, digits=digits)
    steps = zip(estimates, estimates[1:], strict=False)
    down = [b - a for a, b in steps]
    if check.side > 0 and any(_significant(d) and d.point < 0 for d in down):
        check = Check(check.label, check.value + ", a step down", check.claimed, check.p_value, 0)
    return check, trend


def _significant(estimate):
    p_value, _ = estimate.p_value(0.0)
    return math.isfinite(p_value) and p_value < ALPHA
