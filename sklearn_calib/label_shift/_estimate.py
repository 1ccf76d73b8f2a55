"""One entry to the three estimators of target priors, for one or several row weightings."""

from dataclasses import dataclass

import numpy as np

from ._confusion import (
    bbse_weights,
    predictions,
    priors_from_weights,
    rlls_penalty,
    rlls_weights,
)
from ._em import SHRINK, RowSums, away_from_zero, maximise_likelihood

#: Rows of the evenly spaced subsample on which EM over many rows starts.
SUBSAMPLE_ROWS = 1 << 14


@dataclass
class Estimation:
    """Estimated target priors, one row per row weighting (replicate).

    Parameters
    ----------
    prior : ndarray of shape (n_replicates, n_classes)
    n_iter : int
        Passes over the rows (EM) or solver steps (RLLS, the largest over replicates); 0
        for BBSE.
    gap : ndarray of shape (n_replicates,)
        EM's final gap ``max_k g_k - 1`` (zeros for the other methods).
    loglik : ndarray of shape (n_replicates,) or None
        EM's mean log-likelihood ratio of the priors to the source's.
    """

    prior: np.ndarray
    n_iter: int
    gap: np.ndarray
    loglik: np.ndarray | None = None


def evenly_spaced(n_samples, size):
    """Indices of ``size`` evenly spaced rows out of ``n_samples``."""
    return np.linspace(0, n_samples - 1, size).astype(np.intp)


def subsample_start(rows, source_prior, start, *, max_iter, tol, path_values=None):
    """EM's start over many rows: the optimum of ``rows`` (an evenly spaced subsample of
    them, whose passes take the path chosen on ``path_values``, see :class:`~._em.RowSums`),
    found with Newton steps of its own curvature
    (:meth:`~._em.RowSums.rescaled_curvature`), moved a little towards ``start``."""
    subsample = RowSums(rows, source_prior, keep_diagonal=True, path_values=path_values)
    optimum, *_ = maximise_likelihood(
        subsample, start, max_iter=max_iter, tol=tol, curvature=subsample.rescaled_curvature()
    )
    return away_from_zero(optimum, start)


def em_priors(sums, start, *, max_iter, tol, curvature=None, first=None, shrink=None):
    """EM from ``start`` (rows: replicates) with Newton steps of ``curvature``, from the
    gradient and likelihood ``first`` at ``start`` when known, no step dividing a prior by
    more than ``shrink`` (see :func:`~._em.maximise_likelihood`)."""
    prior, n_iter, gap, loglik = maximise_likelihood(
        sums, start, max_iter=max_iter, tol=tol, curvature=curvature, first=first, shrink=shrink
    )
    return Estimation(prior, n_iter, gap, loglik)


def mean_predictions(proba, counts, confusion):
    """The target's mean prediction (hard or soft) under each row weighting."""
    rows = predictions(proba, confusion)
    if counts is None:
        return rows.mean(axis=0)[None, :]
    return (counts @ rows) / counts.sum(axis=1, keepdims=True)


def confusion_priors(method, mean_prediction, source, *, regularization):
    """BBSE's or RLLS's priors from the target's mean predictions (rows)."""
    if method == "bbse":
        weights = bbse_weights(source.confusion, mean_prediction)
        n_iter = 0
    else:
        penalty = rlls_penalty(len(source.prior), source.n_samples, regularization)
        solved = [rlls_weights(source.confusion, mu, penalty) for mu in mean_prediction]
        weights = np.array([w for w, _ in solved])
        n_iter = max(n for _, n in solved)
    prior = priors_from_weights(weights, source.label_prior)
    return Estimation(prior, n_iter, np.zeros(len(prior)))


def estimate_priors(method, proba, source, *, counts=None, start=None, options):
    """Target priors of in-memory calibrated probabilities, for each row weighting.

    Parameters
    ----------
    method : {"em", "bbse", "rlls"}
    proba : ndarray of shape (n_samples, n_classes)
        Calibrated source posteriors of the target rows.
    source : SourceSummary
    counts : ndarray of shape (n_replicates, n_samples) or None, default=None
        Row weights of each replicate; None: every row once.
    start : ndarray of shape (n_replicates, n_classes) or None, default=None
        EM's starting priors; None: the source's.
    options : dict
        ``confusion``, ``regularization``, ``max_iter``, ``tol``.

    Returns
    -------
    Estimation
    """
    if method != "em":
        mean = mean_predictions(proba, counts, options["confusion"])
        return confusion_priors(method, mean, source, regularization=options["regularization"])
    n_replicates = 1 if counts is None else counts.shape[0]
    if start is None:
        start = np.repeat(source.prior[None, :], n_replicates, axis=0)
    options = {"max_iter": options["max_iter"], "tol": options["tol"]}
    n_samples = proba.shape[0]
    sampled = counts is None and n_samples > SUBSAMPLE_ROWS
    sums = RowSums(proba, source.prior, counts, keep_diagonal=sampled)
    if sampled:
        if n_samples > 4 * SUBSAMPLE_ROWS:
            rows = proba[evenly_spaced(n_samples, SUBSAMPLE_ROWS)]
            start = subsample_start(rows, source.prior, start, path_values=proba.size, **options)
        rng = np.random.default_rng(0)
        curvature, *first = sums.length_squared_sample(start[0], SUBSAMPLE_ROWS, rng)
        return em_priors(sums, start, curvature=curvature, first=first, shrink=SHRINK, **options)
    if counts is None:
        return em_priors(sums, start, curvature=sums.curvature, **options)
    return em_priors(sums, start, **options)
