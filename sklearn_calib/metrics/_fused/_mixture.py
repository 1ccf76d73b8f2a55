"""The sums of a mixture's log-likelihood over rows of probabilities: a numba kernel and
its numpy twin.

Each row's density is ``d_i = max(sum_k r_k p_ik, DENSITY_FLOOR)``; a pass sums ``log d_i``
and ``p_i / d_i``, and on request ``p_i^2 / d_i^2`` and each row's ``sum_k s_k p_ik^2 / d_i^2``
(label-shift EM's log-likelihood, gradient, curvature diagonal and row norms). numba reads
each row once, its density summed with eight partial sums and the logarithms of a block's
densities taken as one, of their product; numpy reads each block of rows
twice (the second time from the cache), its densities a BLAS product. The sums agree to
rounding (about 1e-15 relative).
"""

import numpy as np

from ..._validation import CACHE_BLOCK_ELEMENTS
from . import _switch

#: Floor of a row's density (a row whose probability lies on classes of weight 0).
DENSITY_FLOOR = 1e-300
#: Rows per parallel block of the numba kernel (its partial sums are added in block order,
#: whatever the number of threads).
_KERNEL_ROWS = 1 << 12


def mixture_sums(proba, ratio, *, diagonal=False, norms=None, scale=None, path_values=None):
    """``sum_i log d_i`` and ``sum_i p_i / d_i`` over the rows, in one pass.

    Parameters
    ----------
    proba : ndarray of shape (n_rows, n_classes)
        Probabilities, float64, C-ordered.
    ratio : ndarray of shape (n_classes,)
        The mixture's weights ``r``.
    diagonal : bool, default=False
        Whether to sum ``p_i^2 / d_i^2`` too.
    norms : ndarray of shape (n_rows,) or None, default=None
        Receives each row's ``sum_k scale_k p_ik^2 / d_i^2``.
    scale : ndarray of shape (n_classes,) or None, default=None
        The weights ``s`` of ``norms`` (required with ``norms``).
    path_values : int or None, default=None
        The number of values on which the path (numba's or numpy's) is chosen: those of
        the rows a pass belongs with (a subsample's passes take the path of the passes
        over all rows); None: ``proba.size``.

    Returns
    -------
    log_total : float
    gradient : ndarray of shape (n_classes,)
    squares : ndarray of shape (n_classes,) or None
        The sum of ``p_i^2 / d_i^2``; None without ``diagonal``.
    """
    kernels = _switch.numba_kernels("mixture", proba.size if path_values is None else path_values)
    if kernels is None:
        return _numpy_sums(proba, ratio, diagonal, norms, scale)
    with _switch.parallel_section(kernels):
        log_total, gradient, squares = kernels.mixture_rows(
            proba,
            ratio,
            np.zeros(proba.shape[1]) if scale is None else scale,
            np.empty(0) if norms is None else norms,
            norms is not None,
            diagonal,
            DENSITY_FLOOR,
            _KERNEL_ROWS,
        )
    return log_total, gradient, (squares if diagonal else None)


def _numpy_sums(proba, ratio, diagonal, norms, scale):
    """numpy's :func:`mixture_sums`, block by cache-sized block of rows."""
    n_rows, n_classes = proba.shape
    step = max(1, CACHE_BLOCK_ELEMENTS // max(1, n_classes))
    log_total = 0.0
    gradient = np.zeros(n_classes)
    squares = np.zeros(n_classes) if diagonal else None
    for start in range(0, n_rows, step):
        rows = proba[start : start + step]
        density = np.maximum(rows @ ratio, DENSITY_FLOOR)
        weight = np.reciprocal(density)
        log_total += np.log(density).sum()
        gradient += weight @ rows
        if diagonal or norms is not None:
            row_squares = rows * rows
            weight_square = weight * weight
            if norms is not None:
                norms[start : start + step] = (row_squares @ scale) * weight_square
            if diagonal:
                squares += weight_square @ row_squares
    return log_total, gradient, squares
