"""Dask target scores: EM's passes and the mean predictions as map-reduces over row chunks.

Every estimator needs sums over the target rows only: EM's gradient and log-likelihood
(:mod:`~._em`) and BBSE's and RLLS's mean predictions. Each chunk is checked and
calibrated as in-memory scores are, its sums computed, and the sums added as a tree on
the active Dask scheduler (:meth:`~sklearn_calib._dask_chunks.ChunkedRows.reduce`). EM
starts from the optimum of an evenly spaced subsample of rows held in memory, as it does
in memory, so few passes over the chunks remain.
"""

import numpy as np

from .._dask_chunks import ChunkedRows
from ._em import RowSums
from ._estimate import (
    SUBSAMPLE_ROWS,
    confusion_priors,
    em_priors,
    evenly_spaced,
    subsample_start,
)
from ._uncertainty import likelihood_ratio_test, prediction_count_test

_NAMES = ("y", "target_scores", "sample_weight")


def _chunk_proba(adapter, scores):
    """The calibrated probabilities of one chunk, checked as in-memory scores are."""
    return adapter._calibrate(
        adapter._validate_scores(scores, "target_scores"), adapter.calibrator_
    )


def _em_sums(y, scores, weight, first_row, adapter, prior, loglik):
    """The chunk's gradient and log-likelihood times its rows (they add over chunks), and
    its rows."""
    proba = _chunk_proba(adapter, scores)
    gradient, value = RowSums(proba, adapter._source.prior)(prior, np.arange(1), loglik)
    n_rows = proba.shape[0]
    total = value[0] * n_rows if loglik else 0.0
    return np.concatenate([gradient[0] * n_rows, [total, n_rows]])


def _prediction_sums(y, scores, weight, first_row, adapter):
    """The chunk's counts of predicted classes, sums of probabilities and rows."""
    proba = _chunk_proba(adapter, scores)
    hard = np.bincount(proba.argmax(axis=1), minlength=proba.shape[1])
    return np.concatenate([hard, proba.sum(axis=0), [proba.shape[0]]])


class _DaskSums:
    """EM's sums over the chunks of Dask target scores (one replicate)."""

    def __init__(self, adapter, rows):
        self.adapter = adapter
        self.rows = rows

    def __call__(self, prior, replicates, loglik=True):
        total = self.rows.reduce(_em_sums, self.adapter, prior, loglik)
        n_classes = prior.shape[1]
        n_rows = total[-1]
        value = np.array([total[n_classes] / n_rows]) if loglik else None
        return total[None, :n_classes] / n_rows, value


def adapt_dask(adapter, scores):
    """The target priors and the test of "no shift" of Dask target scores.

    Parameters
    ----------
    adapter : LabelShiftAdapter
        Fitted.
    scores : Dask collection
        Target scores.

    Returns
    -------
    estimation : Estimation
    test : LabelShiftTestResult
    """
    rows = ChunkedRows(None, scores, names=_NAMES)
    if rows.n_samples == 0:
        raise ValueError("Expected `target_scores` with at least one row, got 0 rows.")
    source = adapter._source
    n_classes = adapter.n_classes_
    if adapter.method == "em":
        options = {"max_iter": adapter.max_iter, "tol": adapter.tol}
        start = source.prior[None, :]
        if rows.n_samples > 4 * SUBSAMPLE_ROWS:
            _, sample, _ = rows.rows(evenly_spaced(rows.n_samples, SUBSAMPLE_ROWS))
            start = subsample_start(_chunk_proba(adapter, sample), source.prior, start, **options)
        estimation = em_priors(_DaskSums(adapter, rows), start, **options)
        test = likelihood_ratio_test(estimation.loglik[0], rows.n_samples, n_classes)
        return estimation, test
    sums = rows.reduce(_prediction_sums, adapter)
    hard, soft = sums[:n_classes], sums[n_classes : 2 * n_classes]
    mean = (hard if adapter.confusion == "hard" else soft) / sums[-1]
    estimation = confusion_priors(
        adapter.method, mean[None, :], source, regularization=adapter.regularization
    )
    return estimation, prediction_count_test(source.prediction_counts, hard)


def predict_proba_dask(adapter, scores):
    """The adapted probabilities of Dask scores, as a lazy Dask array (chunk by chunk)."""
    rows = ChunkedRows(None, scores, names=_NAMES).scores
    chunks = (rows.chunks[0], (adapter.n_classes_,))
    extra = {"new_axis": 1} if rows.ndim == 1 else {}
    return rows.map_blocks(adapter.predict_proba, dtype=np.float64, chunks=chunks, **extra)
