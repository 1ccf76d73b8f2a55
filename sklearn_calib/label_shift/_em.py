"""Target priors of maximum likelihood: EM (Saerens et al. 2002) with Newton steps.

Under label shift the target density of a row is ``sum_k p(x | k) q_k``, and a calibrated
source posterior ``p_k(x) = p(x | k) pi_k / p(x)`` gives it up to a factor of the row:
``d(x) = sum_k p_k(x) q_k / pi_k``. The mean log-likelihood ``l(q) = mean_i log d(x_i)``
is concave in ``q`` on the simplex, with gradient ``g_k = mean_i p_k(x_i) / (pi_k d(x_i))``
and ``sum_k q_k g_k = 1``. EM's step is ``q <- q * g`` (Saerens et al.'s E and M steps in
one). Its fixed points satisfy ``g_k = 1`` where ``q_k > 0``, and ``max_k g_k - 1`` (the
Frank-Wolfe gap) bounds ``l(q*) - l(q)`` from above, so the fit stops when this gap, in
nats per row, is at most ``tol``: unlike a small change of ``q``, which EM also shows far
from the maximum where the likelihood is flat.

EM is slow where the likelihood is flat. Two accelerations reach the same maximum in fewer
passes over the rows:

- Newton steps, when a curvature is given: the maximum of ``l(q) - sum_k q_k`` (the same
  point as on the simplex, where ``g_k = 1``) under the quadratic model with the curvature
  ``C = mean_i a_i a_i^T``, ``a_ik = p_k(x_i) / (pi_k d(x_i))`` (minus the Hessian of
  ``l``), over priors that are not negative (an active set: non-negative least squares). The
  curvature is computed at every step, from all rows (Newton's method, quadratic
  convergence) or from a sample of them (linear convergence, at a rate set by the sample's
  error of the curvature); a sampled curvature takes its diagonal from all rows (summed in
  the pass that gives ``g``) and its correlations from the sample (computed again once
  the priors have moved by more than :data:`CORRELATION_DRIFT`), and its steps divide no
  prior by more than :data:`SHRINK`
  (the quadratic model would set to 0 classes that the likelihood's barrier at 0 keeps
  small, and later steps bring them back slowly). A step that lowers the likelihood is
  replaced by a SQUAREM iteration, so the likelihood never decreases; the next step is
  Newton's again (EM's multiplicative steps cannot bring back a class held at 0, Newton's
  can).
- SQUAREM (Varadhan and Roland 2008, scheme S3) otherwise: it extrapolates two EM steps,
  ``q - 2 a r + a^2 v`` with ``r`` the first step, ``v`` the change between the two and
  ``a = -|r| / |v|`` (at most -1), halves the extrapolation towards the second EM step
  (``a = -1``) while it leaves the simplex, and keeps whichever of the extrapolated point
  and the second EM step has the higher likelihood.

Every evaluation of ``g`` and ``l`` is one pass over the rows, each read from memory once
(:func:`~sklearn_calib.metrics._fused._mixture.mixture_sums`: numba's kernel reads each
row once, numpy each cache-sized block twice, the second time from the cache). Several
weightings of the rows (bootstrap replicates) are fitted together, one prior per
replicate.
"""

import numpy as np
import torch
from scipy.linalg import solve_triangular
from scipy.optimize import nnls

from .._validation import CACHE_BLOCK_ELEMENTS
from ..metrics._fused._mixture import DENSITY_FLOOR, mixture_sums

#: Largest number of halvings of a SQUAREM extrapolation that leaves the simplex.
_HALVINGS = 30
#: Elements of the per-row temporaries of one block of rows (for many replicates).
_BLOCK_ELEMENTS = 1 << 22
#: Ridge added to the curvature, relative to its largest diagonal element (a class no row
#: supports has no curvature).
_RIDGE = 1e-10
#: Decrease of the mean log-likelihood a Newton step may show and still be kept: rounding
#: of the sums over rows, relative to ``max(1, |l|)``.
_ROUNDING = 1e-13
#: Largest factor by which a Newton step of a sampled curvature divides a prior: the
#: quadratic model extrapolates the log-likelihood's barrier at ``q_k = 0`` linearly and
#: sets to 0 classes that the likelihood keeps small; a class whose maximum is 0 falls
#: towards it by this factor a step.
SHRINK = 10.0
#: Distance (the sum of the priors' absolute changes) the priors may move from those at
#: which a curvature's correlations were computed before they are computed again; closer,
#: the correlations are rescaled to the exact diagonal (fewer products of the sample with
#: itself near the maximum, where they barely change; kept further, while classes vanish,
#: they can stall the Newton steps for hundreds of passes).
CORRELATION_DRIFT = 0.03
#: Passes whose curvature diagonals a :class:`RowSums` keeps (a SQUAREM iteration makes 3).
_KEPT_DIAGONALS = 4
#: Share of a reference mixed into a start taken from another fit (a subsample's optimum,
#: the full sample's for a bootstrap replicate): a class it gives (nearly) no prior, but
#: the rows at hand more, starts away from 0, where EM's multiplicative steps barely move.
START_MIX = 0.1


def away_from_zero(prior, reference):
    """EM's start from the priors of another fit: ``prior`` moved towards ``reference``."""
    return (1.0 - START_MIX) * prior + START_MIX * reference


class RowSums:
    """``g`` and ``l`` of several priors over in-memory rows, and the curvature.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Calibrated source posteriors of the target rows, float64.
    source_prior : ndarray of shape (n_classes,)
        The priors of the source, all positive.
    counts : ndarray of shape (n_replicates, n_samples) or None
        The weight of each row in each replicate; None: every row once, one replicate.
    keep_diagonal : bool, default=False
        Whether each pass (every row once) also keeps the curvature's diagonal at its
        prior, for :meth:`diagonal` (those of the latest passes: a SQUAREM iteration may
        keep a point before the last it evaluated).
    path_values : int or None, default=None
        The number of values on which the path of the passes (numba's or numpy's) is
        chosen: those of all rows for a subsample of them; None: ``proba.size``.
    """

    def __init__(self, proba, source_prior, counts=None, *, keep_diagonal=False, path_values=None):
        self.proba = proba
        self.source_prior = source_prior
        self.counts = counts
        self.keep_diagonal = keep_diagonal
        self.path_values = path_values
        self.diagonals = {}
        n_samples, n_classes = proba.shape
        self.totals = np.full(1, float(n_samples)) if counts is None else counts.sum(axis=1)
        self.block = max(1, CACHE_BLOCK_ELEMENTS // max(1, n_classes))

    def __call__(self, prior, replicates, loglik=True, norms=None):
        """The gradient ``g`` (shape (m, n_classes)) and mean log-likelihood ``l`` (shape
        (m,), None without ``loglik``) of the priors ``prior`` of the replicates
        ``replicates``; with ``norms`` (shape (n_samples,), every row weighted once, one
        prior), each row's ``|a_i|^2`` is written there in the same pass."""
        if self.counts is None:
            return self._every_row_once(prior[0], loglik, norms, self.keep_diagonal)
        ratio = prior / self.source_prior
        step = min(self.block, max(1, _BLOCK_ELEMENTS // max(1, len(replicates))))
        gradient = np.zeros_like(prior)
        total = np.zeros(len(replicates))
        for start in range(0, self.proba.shape[0], step):
            rows = self.proba[start : start + step]
            density = ratio @ rows.T  # (replicates, rows)
            np.maximum(density, DENSITY_FLOOR, out=density)
            counts = self.counts[replicates, start : start + step]
            weight = counts / density
            if loglik:
                total += np.einsum("ij,ij->i", counts, _log(density))
            gradient += weight @ rows
        totals = self.totals[replicates]
        gradient /= self.source_prior * totals[:, None]
        return gradient, (total / totals if loglik else None)

    def _every_row_once(self, prior, loglik, norms, keep_diagonal):
        """:meth:`__call__` of one prior (shape (n_classes,)) with every row weighted
        once, in one pass of :func:`mixture_sums`, which keeps the curvature's diagonal at
        ``prior`` with ``keep_diagonal``."""
        inverse_square = self.source_prior**-2.0
        log_total, gradient, squares = mixture_sums(
            self.proba,
            prior / self.source_prior,
            diagonal=keep_diagonal,
            norms=norms,
            scale=inverse_square,
            path_values=self.path_values,
        )
        n_samples = self.totals[0]
        if squares is not None:
            if len(self.diagonals) == _KEPT_DIAGONALS:
                del self.diagonals[next(iter(self.diagonals))]
            self.diagonals[prior.tobytes()] = squares * inverse_square / n_samples
        gradient = gradient[None, :] / (self.source_prior * n_samples)
        return gradient, (np.array([log_total / n_samples]) if loglik else None)

    def diagonal(self, prior):
        """The diagonal ``mean_i a_ik^2`` of the curvature at the priors ``prior`` (shape
        (n_classes,), every row weighted once): kept from a pass at ``prior`` among the
        latest (``keep_diagonal``), else computed in a pass of its own.

        Returns
        -------
        ndarray of shape (n_classes,)
        """
        key = prior.tobytes()
        if key not in self.diagonals:
            self._every_row_once(prior, False, None, True)
        return self.diagonals[key]

    def curvature(self, prior):
        """``C = mean_i a_i a_i^T`` at the priors ``prior`` (shape (n_classes,)), every
        row weighted once.

        Returns
        -------
        ndarray of shape (n_classes, n_classes)
        """
        return SampledCurvature(self.proba, None, self.source_prior)(prior)

    def rescaled_curvature(self):
        """The curvature of every row as a :class:`SampledCurvature` whose correlations
        are kept within :data:`CORRELATION_DRIFT` of the priors they were computed at,
        rescaled to the exact diagonal (``keep_diagonal`` keeps it from the passes).

        Returns
        -------
        SampledCurvature
        """
        return SampledCurvature(
            self.proba,
            None,
            self.source_prior,
            diagonal=self.diagonal,
            drift=CORRELATION_DRIFT,
        )

    def length_squared_sample(self, prior, size, rng):
        """``g`` and ``l`` at the priors ``prior`` (shape (n_classes,), every row once) and
        a :class:`SampledCurvature` of ``size`` rows drawn with probabilities proportional
        to ``|a_i|^2`` there, in one pass: length-squared sampling (Frieze, Kannan and
        Vempala 2004), which draws the rows that carry the curvature, such as those of a
        class rare in the target, more often. The curvature takes its diagonal from all
        rows (:meth:`diagonal`), its correlations from the sample.

        Returns
        -------
        curvature : SampledCurvature
        gradient : ndarray of shape (1, n_classes)
        loglik : ndarray of shape (1,)
        """
        n_samples = self.proba.shape[0]
        norms = np.empty(n_samples)
        gradient, loglik = self(prior[None, :], np.arange(1), norms=norms)
        # inverse-CDF sampling (what ``rng.choice(p=...)`` does, less its checks of ``p``);
        # every row's norm is positive (its probabilities sum to 1)
        cumulative = np.cumsum(norms)
        total = cumulative[-1]
        drawn = np.searchsorted(cumulative[:-1], total * rng.random(size), side="right")
        weights = total / (size * n_samples * norms[drawn])
        curvature = SampledCurvature(
            self.proba[drawn],
            weights,
            self.source_prior,
            diagonal=self.diagonal,
            drift=CORRELATION_DRIFT,
        )
        return curvature, gradient, loglik


class SampledCurvature:
    """``C = mean_i a_i a_i^T`` estimated from weighted rows.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_classes)
        Calibrated source posteriors of target rows.
    weights : ndarray of shape (n_rows,) or None
        Each row's weight in the mean (they sum to 1 in expectation); None: ``1 / n_rows``.
    source_prior : ndarray of shape (n_classes,)
    diagonal : callable or None, default=None
        ``diagonal(prior)``: the exact diagonal of the curvature at ``prior``, to which
        the estimate is rescaled (its correlations kept: a class the sample holds few
        rows of has a poor estimate of its own curvature, on which a Newton step's length
        along that class depends); None: the sample's own.
    drift : float or None, default=None
        With ``diagonal``: the sample's correlations are computed again only where the
        priors lie further than ``drift`` (the sum of their absolute changes) from those
        of the last computation; nearer, those correlations are rescaled to the exact
        diagonal at the priors (near the maximum the correlations barely change, the
        diagonal does). None: at every call.
    """

    def __init__(self, rows, weights, source_prior, diagonal=None, drift=None):
        self.rows = rows
        if weights is None:
            weights = np.full(rows.shape[0], 1.0 / rows.shape[0])
        self.root_weights = np.sqrt(weights)
        self.source_prior = source_prior
        self.diagonal = diagonal
        self.drift = drift
        self.block = max(1, CACHE_BLOCK_ELEMENTS // max(1, rows.shape[1]))
        self.correlation = None
        self.correlation_prior = None

    def __call__(self, prior):
        """The curvature at the priors ``prior`` (shape (n_classes,)).

        Returns
        -------
        ndarray of shape (n_classes, n_classes)
        """
        if self.diagonal is None:
            return self.sampled(prior)
        if (
            self.drift is None
            or self.correlation_prior is None
            or np.abs(prior - self.correlation_prior).sum() > self.drift
        ):
            self.correlation_prior = prior.copy()
            sampled = self.sampled(prior)
            root = np.sqrt(np.diag(sampled))
            supported = root > 0
            self.correlation = np.divide(
                sampled,
                np.outer(root, root),
                out=np.zeros_like(sampled),
                where=np.outer(supported, supported),
            )
            np.fill_diagonal(self.correlation, 1.0)
        root = np.sqrt(self.diagonal(prior))
        return self.correlation * np.outer(root, root)

    def sampled(self, prior):
        """The sample's estimate of the curvature at the priors ``prior``.

        Returns
        -------
        ndarray of shape (n_classes, n_classes)
        """
        ratio = prior / self.source_prior
        n_rows, n_classes = self.rows.shape
        result = np.zeros((n_classes, n_classes))
        for start in range(0, n_rows, self.block):
            rows = self.rows[start : start + self.block]
            root = self.root_weights[start : start + self.block]
            scaled = rows * (root / np.maximum(rows @ ratio, DENSITY_FLOOR))[:, None]
            result += scaled.T @ scaled  # one operand twice: BLAS's symmetric product
        result /= np.outer(self.source_prior, self.source_prior)
        return result


def _log(values):
    """``log(values)`` in place: torch's vectorised log is several times numpy's."""
    torch.from_numpy(values).log_()
    return values


def _em_step(prior, gradient):
    step = prior * gradient
    return step / step.sum(axis=1, keepdims=True)


def _extrapolate(prior, first, second):
    """SQUAREM's extrapolation of two EM steps, kept inside the simplex (rows)."""
    r = first - prior
    v = second - first - r
    r_norm = np.linalg.norm(r, axis=1)
    v_norm = np.linalg.norm(v, axis=1)
    alpha = -np.divide(r_norm, v_norm, out=np.ones_like(r_norm), where=v_norm > 0)
    alpha = np.minimum(alpha, -1.0)
    for _ in range(_HALVINGS):
        point = prior - 2.0 * alpha[:, None] * r + alpha[:, None] ** 2 * v
        outside = (point <= 0).any(axis=1) & (alpha < -1.0)
        if not outside.any():
            break
        alpha[outside] = (alpha[outside] - 1.0) / 2.0
    point = np.where((point > 0).all(axis=1, keepdims=True), point, second)
    return point / point.sum(axis=1, keepdims=True)


def _newton_point(prior, gradient, curvature, shrink=None):
    """The maximum over ``q >= 0`` of the quadratic model of ``l(q) - sum_k q_k`` around
    ``prior`` (one replicate), each prior divided by at most ``shrink`` (None: no limit);
    None when it is 0.

    With ``C = L L^T``, the model's maximum over ``q >= 0`` is the non-negative least
    squares solution of ``L^T q = L^{-1} (g - 1 + C prior)`` (Lawson and Hanson's active
    set, :func:`scipy.optimize.nnls`): a class is held at 0 exactly when the model's
    gradient there is not positive, so a class at 0 that the rows call for comes back.
    """
    n_classes = prior.shape[0]
    ridged = curvature + _RIDGE * np.max(np.diag(curvature)) * np.eye(n_classes)
    lower = np.linalg.cholesky(ridged)
    target = solve_triangular(lower, gradient - 1.0 + ridged @ prior, lower=True)
    point, _ = nnls(lower.T, target)
    if shrink is not None:
        point = np.maximum(point, prior / shrink)
    total = point.sum()
    return point / total if total > 0 else None


def _squarem_iteration(sums, prior, gradient, active):
    """Two EM steps and their extrapolation; the better point, its gradient and
    likelihood (three passes)."""
    first = _em_step(prior, gradient)
    second = _em_step(first, sums(first, active, loglik=False)[0])
    extrapolated = _extrapolate(prior, first, second)
    gradient_second, loglik_second = sums(second, active)
    gradient_extra, loglik_extra = sums(extrapolated, active)
    better = loglik_extra >= loglik_second
    return (
        np.where(better[:, None], extrapolated, second),
        np.where(better[:, None], gradient_extra, gradient_second),
        np.where(better, loglik_extra, loglik_second),
        3,
    )


def _newton_iteration(sums, prior, gradient, current, active, curvature, shrink):
    """A Newton step for every replicate; a SQUAREM iteration instead where it lowers the
    likelihood. Returns the points, their gradients and likelihoods, and the passes made."""
    matrix = curvature(prior.mean(axis=0))
    point = _em_step(prior, gradient)
    for row in range(prior.shape[0]):
        newton = _newton_point(prior[row], gradient[row], matrix, shrink)
        if newton is not None:
            point[row] = newton
    new_gradient, new_loglik = sums(point, active)
    worse = new_loglik < current - _ROUNDING * np.maximum(1.0, np.abs(current))
    if not worse.any():
        return point, new_gradient, new_loglik, 1
    redo = _squarem_iteration(sums, prior[worse], gradient[worse], active[worse])
    point[worse], new_gradient[worse], new_loglik[worse] = redo[:3]
    return point, new_gradient, new_loglik, 1 + redo[3]


def maximise_likelihood(sums, start, *, max_iter, tol, curvature=None, first=None, shrink=None):
    """The priors of maximum likelihood of every replicate.

    Parameters
    ----------
    sums : callable
        ``sums(prior, replicates, loglik=True)`` gives the gradient and mean
        log-likelihood (None without ``loglik``) of the priors of some replicates
        (:class:`RowSums`, or the Dask passes).
    start : ndarray of shape (n_replicates, n_classes)
        Positive starting priors (rows sum to 1).
    max_iter : int
        Largest number of passes over the rows (evaluations of ``sums``).
    tol : float
        A replicate stops when its gap ``max_k g_k - 1`` is at most ``tol``.
    curvature : callable or None, default=None
        Newton steps with the curvature ``curvature(prior)`` (an ndarray of shape
        (n_classes, n_classes)) at the replicates' mean prior, computed at each step;
        None: SQUAREM.
    first : tuple of ndarray or None, default=None
        The gradient and mean log-likelihood at ``start``, when a pass made them already
        (it counts as the first pass); None: the first pass computes them.
    shrink : float or None, default=None
        The largest factor by which a Newton step divides a prior (:data:`SHRINK` for a
        sampled curvature); None: no limit.

    Returns
    -------
    prior : ndarray of shape (n_replicates, n_classes)
    n_iter : int
        Passes over the rows.
    gap : ndarray of shape (n_replicates,)
        Each replicate's final gap (at most ``tol`` when it converged).
    loglik : ndarray of shape (n_replicates,)
        Each replicate's mean log-likelihood ratio to the source priors.
    """
    prior = np.array(start, dtype=np.float64)
    n_replicates = prior.shape[0]
    gap = np.full(n_replicates, np.inf)
    loglik = np.zeros(n_replicates)
    active = np.arange(n_replicates)
    gradient, current = sums(prior, active) if first is None else first
    n_iter = 1
    while True:
        gap[active] = gradient.max(axis=1) - 1.0
        loglik[active] = current
        keep = gap[active] > tol
        active, gradient, current = active[keep], gradient[keep], current[keep]
        if active.size == 0 or n_iter + (3 if curvature is None else 4) > max_iter:
            return prior, n_iter, gap, loglik
        if curvature is None:
            point, gradient, current, passes = _squarem_iteration(
                sums, prior[active], gradient, active
            )
        else:
            point, gradient, current, passes = _newton_iteration(
                sums, prior[active], gradient, current, active, curvature, shrink
            )
        prior[active] = point
        n_iter += passes
