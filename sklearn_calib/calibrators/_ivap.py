"""Inductive Venn-Abers predictors of many binary problems at once (Vovk et al. 2015).

An inductive Venn-Abers predictor (IVAP) calibrates a score ``s`` on a set of scored
binary examples by two isotonic regressions: ``p0`` is the fit at ``s`` of the set with
``(s, 0)`` added, ``p1`` of the set with ``(s, 1)`` added. Both are computed here for every
possible test score at once, from the cumulative-sum diagram of the calibration set
(Vovk, Petej and Fedorova 2015): the distinct calibration scores ``c_1 < ... < c_k`` with
total weights ``w_j`` and label sums ``y_j`` give the points ``P_j = (W_j, Y_j)`` of their
prefix sums (``P_0 = (0, 0)``). The isotonic fit at block ``i`` of the set with one more
example of label ``t`` tied to block ``i`` is the max-min formula

    F_t(i) = max_{a <= i} min_{b >= i} (Y_b - Y_{a-1} + t) / (W_b - W_{a-1} + 1),

the slope from the left point ``Q_a = P_{a-1} - (1, t)`` to the right point ``P_b``, that
is the slope of the bridge between the lower convex hulls of ``{Q_a : a <= i}`` and
``{P_b : b >= i}``. The ranges ``[a, b]`` do not depend on ``i``, so ``F_t`` is
non-decreasing in ``i`` and both contacts of the bridge move right as ``i`` grows: one
pass with a stack for the left hull, successor pointers of the right hulls and two
pointers finds all ``k`` bridges in ``O(k)`` steps after the sort.

A test score between two calibration scores takes ``F_1`` of the block above it and
``F_0`` of the block below it (``1`` above every block, ``0`` below every block): an
added example of label 1 pools with the block above, one of label 0 with the block below.

The pass is a plain Python loop over arrays; with numba installed it is compiled where it
saves more time than numba's start costs, and always once compiled (the environment
variable ``SKLEARN_CALIB_NUMBA``, as for the metrics' fused passes: ``0`` never, ``1``
always, ``auto`` by size).
"""

import functools
import importlib.util
import os

import numpy as np

#: The environment variable that chooses the compiled pass (shared with the metrics).
_NUMBA_SWITCH = "SKLEARN_CALIB_NUMBA"
#: Blocks from which the compiled pass saves more than numba's start (about 0.7 s against
#: about 13 microseconds per block of the Python loop, on two loaded cores); once the
#: pass is compiled, it runs on any number of blocks.
_COMPILED_BLOCKS = 50_000


def _bridge_slopes(weights, sums, offsets, shift, out, x, y, successor, stack):
    """``F_shift(i)`` of every block of every problem (module docstring).

    Written for numba, and for Python lists: the Python loop indexes lists about ten
    times as fast as arrays.

    Parameters
    ----------
    weights, sums : ndarray of shape (n_blocks,)
        Positive total weight and label sum of each block; the problems' blocks are
        concatenated, each problem's in increasing order of score.
    offsets : ndarray of shape (n_problems + 1,)
        Start of each problem's blocks, and the total.
    shift : float
        The added label ``t`` (0.0 or 1.0).
    out : ndarray of shape (n_blocks,)
        Receives the values.
    x, y, successor, stack : ndarray of shape (n_blocks + 1,)
        Work space (float, float, int, int).
    """
    for p in range(len(offsets) - 1):
        start, stop = offsets[p], offsets[p + 1]
        k = stop - start
        if k == 0:
            continue
        # prefix sums: point j of the problem (j = 0..k) at x[j], y[j]
        x[0] = 0.0
        y[0] = 0.0
        for j in range(k):
            x[j + 1] = x[j] + weights[start + j]
            y[j + 1] = y[j] + sums[start + j]
        # successors on the lower hulls of the suffixes {P_b, ..., P_k}, right to left
        top = -1
        for b in range(k, 0, -1):
            while top >= 1:
                mid, far = stack[top], stack[top - 1]
                cross = (x[mid] - x[b]) * (y[far] - y[b]) - (y[mid] - y[b]) * (x[far] - x[b])
                if cross > 0.0:
                    break
                top -= 1
            successor[b] = stack[top] if top >= 0 else -1
            top += 1
            stack[top] = b
        # left hull of {Q_a : a <= i} on a stack of indices a - 1; bridge pointers
        top = -1
        left = 0
        right = 1
        for i in range(1, k + 1):
            qx, qy = x[i - 1] - 1.0, y[i - 1] - shift
            while top >= 1:
                low = stack[top - 1]
                lx, ly = x[low] - 1.0, y[low] - shift
                mx, my = x[stack[top]] - 1.0, y[stack[top]] - shift
                if (mx - lx) * (qy - ly) - (my - ly) * (qx - lx) > 0.0:
                    break
                top -= 1
            top += 1
            stack[top] = i - 1
            if left > top:
                left = top
            if right < i:
                right = i
            while True:
                lx, ly = x[stack[left]] - 1.0, y[stack[left]] - shift
                dx, dy = x[right] - lx, y[right] - ly
                following = successor[right]
                if following >= 0 and dx * (y[following] - ly) - dy * (x[following] - lx) <= 0.0:
                    right = following
                    continue
                if left < top:
                    nx = x[stack[left + 1]] - 1.0 - lx
                    ny = y[stack[left + 1]] - shift - ly
                    if dx * ny - dy * nx <= 0.0:
                        left += 1
                        continue
                break
            out[start + i - 1] = dy / dx


@functools.cache
def _compiled_bridge_slopes():
    import numba

    return numba.njit(cache=True, nogil=True)(_bridge_slopes)


def _uses_numba(n_blocks):
    """Whether the pass over ``n_blocks`` blocks is compiled by numba."""
    mode = os.environ.get(_NUMBA_SWITCH) or "auto"
    if mode not in ("0", "1", "auto"):
        raise ValueError(
            f"Expected the environment variable {_NUMBA_SWITCH} to be '0', '1' or 'auto', "
            f"got {mode!r}."
        )
    loaded = _compiled_bridge_slopes.cache_info().currsize > 0
    wanted = mode == "1" or (mode == "auto" and (loaded or n_blocks >= _COMPILED_BLOCKS))
    return wanted and importlib.util.find_spec("numba") is not None


def bridge_values(weights, sums, offsets):
    """``F_0`` and ``F_1`` of every block of every problem (module docstring).

    Parameters
    ----------
    weights, sums : ndarray of shape (n_blocks,)
        Positive total weight and label sum of each block, problems concatenated, each
        problem's blocks in increasing order of score.
    offsets : ndarray of shape (n_problems + 1,), dtype int64
        Start of each problem's blocks, and the total.

    Returns
    -------
    lower, upper : ndarray of shape (n_blocks,)
        ``F_0`` and ``F_1``.
    """
    n_blocks = weights.shape[0]
    if _uses_numba(n_blocks):
        kernel = _compiled_bridge_slopes()
        work = (np.empty(n_blocks + 1), np.empty(n_blocks + 1))
        work += (np.empty(n_blocks + 1, np.int64), np.empty(n_blocks + 1, np.int64))
        values = (np.empty(n_blocks), np.empty(n_blocks))
        for shift, out in zip((0.0, 1.0), values, strict=True):
            kernel(weights, sums, offsets, shift, out, *work)
        return values
    arguments = (weights.tolist(), sums.tolist(), offsets.tolist())
    values = ([0.0] * n_blocks, [0.0] * n_blocks)
    work = [[0.0] * (n_blocks + 1) for _ in range(4)]
    for shift, out in zip((0.0, 1.0), values, strict=True):
        _bridge_slopes(*arguments, shift, out, *work)
    return np.array(values[0]), np.array(values[1])


def fit_grid(problems):
    """Both isotonic fits of several binary calibration sets, at each distinct score.

    Parameters
    ----------
    problems : list of (scores, labels, weights)
        Each a calibration set: float64 scores, boolean labels and positive float64
        weights (or None), all of shape (n_rows,).

    Returns
    -------
    grid : tuple of ndarray
        ``(scores, lower, upper, offsets)``: the distinct calibration scores of each
        problem (increasing, problems concatenated), ``F_0`` and ``F_1`` at each, and
        the start of each problem's scores with the total, of shape (n_problems + 1,).
    """
    distinct, weights, sums, sizes = [], [], [], []
    for scores, labels, weight in problems:
        order = np.argsort(scores, kind="stable")
        ordered = scores[order]
        first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])[: len(order)]
        row_weight = np.ones(len(order)) if weight is None else weight[order]
        label_weight = row_weight * labels[order]
        distinct.append(ordered[first])
        weights.append(np.add.reduceat(row_weight, first) if first.size else row_weight)
        sums.append(np.add.reduceat(label_weight, first) if first.size else label_weight)
        sizes.append(first.size)
    offsets = np.zeros(len(problems) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    lower, upper = bridge_values(np.concatenate(weights), np.concatenate(sums), offsets)
    return np.concatenate(distinct), lower, upper, offsets


def grid_interval(grid, problem, scores):
    """The pair ``(p0, p1)`` of each test score under one problem's calibration set.

    Parameters
    ----------
    grid : tuple of ndarray
        A :func:`fit_grid`.
    problem : int
        Index of the problem.
    scores : ndarray of shape (n_samples,)
        Test scores.

    Returns
    -------
    p0, p1 : ndarray of shape (n_samples,)
    """
    distinct, lower, upper, offsets = grid
    start, stop = offsets[problem], offsets[problem + 1]
    # one search: the blocks at or below each score; a score equal to the last of them
    # takes F_1 of that block, any other F_1 of the next one
    below = np.searchsorted(distinct[start:stop], scores, side="right")
    above = below - (np.r_[-np.inf, distinct[start:stop]][below] == scores)
    return np.r_[0.0, lower[start:stop]][below], np.r_[upper[start:stop], 1.0][above]
