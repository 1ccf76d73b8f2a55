"""Target priors of maximum likelihood: EM (Saerens et al. 2002) accelerated by SQUAREM.

Under label shift the target density of a row is ``sum_k p(x | k) q_k``, and a calibrated
source posterior ``p_k(x) = p(x | k) pi_k / p(x)`` gives it up to a factor of the row:
``d(x) = sum_k p_k(x) q_k / pi_k``. The mean log-likelihood ``l(q) = mean_i log d(x_i)``
is concave in ``q`` on the simplex, with gradient ``g_k = mean_i p_k(x_i) / (pi_k d(x_i))``
and ``sum_k q_k g_k = 1``. EM's step is ``q <- q * g`` (Saerens et al.'s E and M steps in
one). Its fixed points satisfy ``g_k = 1`` where ``q_k > 0``, and ``max_k g_k - 1`` (the
Frank-Wolfe gap) bounds ``l(q*) - l(q)`` from above, so the fit stops when this gap, in
nats per row, is at most ``tol``: unlike a small change of ``q``, which EM also shows far
from the maximum where the likelihood is flat.

EM is slow where the likelihood is flat; SQUAREM (Varadhan and Roland 2008, scheme S3)
extrapolates two EM steps, ``q - 2 a r + a^2 v`` with ``r`` the first step, ``v`` the
change between the two and ``a = -|r| / |v|`` (at most -1), halves the extrapolation
towards the second EM step (``a = -1``) while it leaves the simplex, and keeps whichever
of the extrapolated point and the second EM step has the higher likelihood, so the
likelihood never decreases. Every evaluation of ``g`` is one pass over the rows: two
products of the probabilities with a vector. Several weightings of the rows (bootstrap
replicates) are fitted together, one prior per replicate.
"""

import numpy as np
import torch

#: Largest number of halvings of a SQUAREM extrapolation that leaves the simplex.
_HALVINGS = 30
#: Elements of the per-row temporaries of one block of rows (for many replicates).
_BLOCK_ELEMENTS = 1 << 22
#: Floor of a row's density ratio (a row whose probability lies on classes of prior 0).
_TINY = 1e-300
#: Share of a reference mixed into a start taken from another fit (a subsample's optimum,
#: the full sample's for a bootstrap replicate): a class it gives (nearly) no prior, but
#: the rows at hand more, starts away from 0, where EM's multiplicative steps barely move.
START_MIX = 0.1


def away_from_zero(prior, reference):
    """EM's start from the priors of another fit: ``prior`` moved towards ``reference``."""
    return (1.0 - START_MIX) * prior + START_MIX * reference


class RowSums:
    """``g`` and ``l`` of several priors over in-memory rows.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Calibrated source posteriors of the target rows, float64.
    source_prior : ndarray of shape (n_classes,)
        The priors of the source, all positive.
    counts : ndarray of shape (n_replicates, n_samples) or None
        The weight of each row in each replicate; None: every row once, one replicate.
    """

    def __init__(self, proba, source_prior, counts=None):
        self.proba = proba
        self.source_prior = source_prior
        self.counts = counts
        n_samples = proba.shape[0]
        self.totals = np.full(1, float(n_samples)) if counts is None else counts.sum(axis=1)

    def __call__(self, prior, replicates, loglik=True):
        """The gradient ``g`` (shape (m, n_classes)) and mean log-likelihood ``l`` (shape
        (m,), None without ``loglik``) of the priors ``prior`` of the replicates
        ``replicates``."""
        ratio = prior / self.source_prior
        n_samples = self.proba.shape[0]
        step = max(1, _BLOCK_ELEMENTS // max(1, len(replicates)))
        gradient = np.zeros_like(prior)
        total = np.zeros(len(replicates))
        for start in range(0, n_samples, step):
            rows = self.proba[start : start + step]
            density = ratio @ rows.T  # (replicates, rows)
            np.maximum(density, _TINY, out=density)
            if self.counts is None:
                weight = np.reciprocal(density)
                if loglik:
                    total += _log(density).sum(axis=1)
            else:
                counts = self.counts[replicates, start : start + step]
                weight = counts / density
                if loglik:
                    total += np.einsum("ij,ij->i", counts, _log(density))
            gradient += weight @ rows
        totals = self.totals[replicates]
        gradient /= self.source_prior * totals[:, None]
        return gradient, (total / totals if loglik else None)


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


def maximise_likelihood(sums, start, *, max_iter, tol):
    """The priors of maximum likelihood of every replicate, by SQUAREM-accelerated EM.

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
    gradient, current = sums(prior, active)
    n_iter = 1
    while True:
        gap[active] = gradient.max(axis=1) - 1.0
        loglik[active] = current
        keep = gap[active] > tol
        active, gradient, current = active[keep], gradient[keep], current[keep]
        if active.size == 0 or n_iter + 3 > max_iter:
            return prior, n_iter, gap, loglik
        point = prior[active]
        first = _em_step(point, gradient)
        second = _em_step(first, sums(first, active, loglik=False)[0])
        extrapolated = _extrapolate(point, first, second)
        gradient_second, loglik_second = sums(second, active)
        gradient_extra, loglik_extra = sums(extrapolated, active)
        n_iter += 3
        better = loglik_extra >= loglik_second
        prior[active] = np.where(better[:, None], extrapolated, second)
        gradient = np.where(better[:, None], gradient_extra, gradient_second)
        current = np.where(better, loglik_extra, loglik_second)
