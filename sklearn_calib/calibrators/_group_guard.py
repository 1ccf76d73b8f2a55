"""The guard of MulticalibrationBoosting: groups whose held-out rows the corrections do
not help keep their scores.

A guard cell is every row, a value of a categorical feature the trees see (a group
category, the extra bin of unseen categories, or the predicted class in the top-label
mode), or one of ``NUMERIC_CELLS`` equal-mass runs of a numeric group feature's bins. A
cell is guarded when the weighted log loss of its held-out rows is not lower with the
corrections than with the scores as given; a row in any guarded cell keeps its scores,
which changes the loss of the other cells its rows share, so the choice is repeated until
no cell changes (cells are only added: it ends).
"""

import numpy as np

#: A numeric group feature's bins are merged into this many guard cells.
NUMERIC_CELLS = 4


def cell_codes(fixed, n_bins, categorical):
    """Guard cell of each row per column (the first column: every row) and each column's
    number of cells."""
    columns = [np.zeros(fixed.shape[0], dtype=np.intp)]
    sizes = [1]
    for j, (n_feature_bins, is_categorical) in enumerate(zip(n_bins, categorical, strict=True)):
        if is_categorical:
            columns.append(fixed[:, j])
            sizes.append(n_feature_bins)
        else:
            columns.append(fixed[:, j] * NUMERIC_CELLS // n_feature_bins)
            sizes.append(NUMERIC_CELLS)
    return np.column_stack(columns), sizes


def guarded_rows(cells, guarded):
    """Whether each row lies in a guarded cell."""
    rows = np.zeros(cells.shape[0], dtype=bool)
    for j, column_guarded in enumerate(guarded):
        rows |= column_guarded[cells[:, j]]
    return rows


def choose_guarded(cells, sizes, corrected_loss, given_loss, weight):
    """Per column of ``cells``, which cells keep their scores.

    Parameters
    ----------
    cells : ndarray of shape (n_held_out, n_columns)
        Guard cells of the held-out rows.
    sizes : list of int
        Number of cells of each column.
    corrected_loss, given_loss : ndarray of shape (n_held_out,)
        Each held-out row's log loss with the corrections and with the scores as given.
    weight : ndarray of shape (n_held_out,)
        Sample weights of the held-out rows.

    Returns
    -------
    guarded : list of ndarray of bool
        One array per column, of its number of cells; a cell without held-out rows is
        guarded (no evidence that the corrections help it).
    """
    guarded = [np.zeros(size, dtype=bool) for size in sizes]
    kept = np.zeros(cells.shape[0], dtype=bool)
    while True:
        gain = weight * (given_loss - np.where(kept, given_loss, corrected_loss))
        changed = False
        for j, size in enumerate(sizes):
            total = np.bincount(cells[:, j], gain, minlength=size)
            mass = np.bincount(cells[:, j], weight, minlength=size)
            new = ~guarded[j] & ((total <= 0) | (mass <= 0))
            if new.any():
                guarded[j] |= new
                changed = True
        if not changed:
            return guarded
        kept = guarded_rows(cells, guarded)
