"""Corrections of p-values for testing several hypotheses at once (Holm 1979, Benjamini
and Hochberg 1995)."""

import numpy as np

from ..._validation import check_option, check_pvalues

CORRECTIONS = ("holm", "fdr_bh")


def adjust_pvalues(pvalues, method="holm"):
    """P-values adjusted for testing several hypotheses at once.

    With the ``m`` p-values sorted, ``p_(1) <= ... <= p_(m)``:

    - ``"holm"`` (Holm 1979, step-down; controls the family-wise error rate):
      ``p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``;
    - ``"fdr_bh"`` (Benjamini and Hochberg 1995, step-up; controls the false discovery
      rate for independent or positively dependent tests):
      ``p~_(i) = min_{j >= i} min(1, m p_(j) / j)``.

    A hypothesis is rejected at level ``alpha`` when its adjusted p-value is at most
    ``alpha``; these are the adjusted p-values of statsmodels' ``multipletests``.

    Parameters
    ----------
    pvalues : array-like of shape (m,)
        Raw p-values in [0, 1] (NaN is refused: a test without a p-value cannot be
        counted in ``m``).
    method : {"holm", "fdr_bh"}, default="holm"
        The correction.

    Returns
    -------
    adjusted : ndarray of shape (m,)
        In the order of ``pvalues``.

    References
    ----------
    .. [1] S. Holm, "A Simple Sequentially Rejective Multiple Test Procedure",
       Scandinavian Journal of Statistics 6(2), 1979.
    .. [2] Y. Benjamini and Y. Hochberg, "Controlling the False Discovery Rate: A
       Practical and Powerful Approach to Multiple Testing", Journal of the Royal
       Statistical Society B 57(1), 1995.
    """
    check_option(method, "correction", CORRECTIONS)
    pvalues = check_pvalues(pvalues)
    m = pvalues.shape[0]
    order = np.argsort(pvalues, kind="stable")
    ranked = pvalues[order]
    rank = np.arange(1, m + 1)
    if method == "holm":
        adjusted = np.maximum.accumulate(np.minimum(1.0, (m - rank + 1) * ranked))
    else:
        adjusted = np.minimum.accumulate(np.minimum(1.0, m * ranked / rank)[::-1])[::-1]
    result = np.empty(m)
    result[order] = adjusted
    return result
