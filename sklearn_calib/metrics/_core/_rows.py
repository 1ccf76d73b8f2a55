"""Blocks of rows: the unit of work of the passes over predictions, which keeps their
temporaries at about a million elements whatever the number of rows; and the reductions
of the passes that start no BLAS threads.
"""

import numpy as np

#: Number of elements of one block when a computation runs over blocks of rows.
_BLOCK_ELEMENTS = 1 << 20


def block_rows(n_cols):
    """Rows of one block of :func:`row_blocks` (about ``_BLOCK_ELEMENTS`` elements)."""
    return max(1, _BLOCK_ELEMENTS // max(n_cols, 1))


def row_blocks(n_rows, n_cols):
    """Yield slices of consecutive rows holding about ``_BLOCK_ELEMENTS`` elements each."""
    step = block_rows(n_cols)
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def row_sums(block):
    """Row sums of a 2-D block (einsum's loop: faster than ``sum(axis=1)`` for few
    columns, and unlike a matrix-vector product it starts no BLAS threads)."""
    return np.einsum("ij->i", block)


def dot(a, b):
    """Dot product of two vectors, without starting BLAS threads (cheaper than BLAS's
    threads on a busy machine for many calls)."""
    return np.einsum("i,i->", a, b)
