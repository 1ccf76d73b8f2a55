"""numba kernels of the fused passes; imported only when numba is installed.

Each kernel adds in the same order as its numpy twin (beside it in ``_fused``), so the two
give the same float64 sums bit for bit (no fast-math contraction or reassociation of the
sums). Three agree with the numpy path to rounding only: the isotonic fits
(``column_keys``, ``isotonic_score_sum``) add one term per block of the fit, and
``tempered_moments`` sums each row's exponentials in column order (neither runs in
parallel: ``calibration_report`` calls them from a second thread while the main thread's
kernels use numba's threads); ``mixture_rows`` sums each row's density with eight partial
sums and takes one logarithm of a block's densities.
"""

import math

import numba
import numpy as np
from numba import njit, prange

from .._core._poisson import _MIX1, _MIX2, GAMMA

#: numba's threading layers that run parallel kernels called from several threads at
#: once (its workqueue layer aborts the process instead).
_THREADSAFE_LAYERS = ("tbb", "omp")
#: Rows whose maxima are found together, column by column (the loop over rows vectorises).
_TILE = 512
#: Rows between renormalisations of a product of fractions in [0.5, 1) (at least 2^-16).
_FRACTION_ROWS = 16
_LOG_2 = math.log(2.0)
_MASK32 = np.uint64(0xFFFFFFFF)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)


@njit(inline="always")
def _bin_of(value, edges, n_bins):
    """Bin of ``value`` under ``(lower, upper]``, ``edges`` the inner edges between -inf and
    +inf (each bound is then one comparison, whose outcome the branch predictor learns)."""
    guess = int(value * n_bins) if 0.0 <= value <= 1.0 else 0
    bin_index = min(max(guess, 0), n_bins - 1)
    while value <= edges[bin_index]:
        bin_index -= 1
    while value > edges[bin_index + 1]:
        bin_index += 1
    return bin_index


@njit(inline="always")
def _combined_ranges(partial):
    """The check's ranges over all blocks from each block's (rows of ``partial``): the
    smallest and largest row sum, the smallest and largest entry, whether all are finite."""
    ranges = np.empty(5)
    ranges[0] = partial[:, 0].min()
    ranges[1] = partial[:, 1].max()
    ranges[2] = partial[:, 2].min()
    ranges[3] = partial[:, 3].max()
    ranges[4] = partial[:, 4].min()
    return ranges


@njit(parallel=True, nogil=True, cache=True)
def probability_rows(proba, y_index, block):
    """Each row's maximum and whether its first column (``argmax``) is the true class, and
    what the probability checks need, in one read of the rows.

    Returns
    -------
    confidence : ndarray of shape (n_rows,)
        Row maxima, in the input's precision.
    correct : ndarray of shape (n_rows,), dtype bool
        Whether the first column holding each row's maximum is ``y_index``.
    ranges : ndarray of shape (5,)
        The smallest and largest float64 row sum, the smallest and largest entry, and 1.0
        when every row sum is finite (so every entry is), else 0.0.
    """
    n_rows, n_classes = proba.shape
    n_blocks = (n_rows + block - 1) // block
    confidence = np.empty(n_rows, proba.dtype)
    correct = np.empty(n_rows, np.bool_)
    partial = np.empty((n_blocks, 5))
    for b in prange(n_blocks):
        best = np.empty(_TILE, proba.dtype)
        low = np.empty(_TILE, proba.dtype)
        arg = np.empty(_TILE, np.int64)
        total = np.empty(_TILE)
        lowest_sum, highest_sum, smallest, largest = np.inf, -np.inf, np.inf, -np.inf
        finite = 1.0
        stop = min(n_rows, (b + 1) * block)
        for start in range(b * block, stop, _TILE):
            size = min(_TILE, stop - start)
            for i in range(size):
                value = proba[start + i, 0]
                best[i] = value
                low[i] = value
                arg[i] = 0
                total[i] = np.float64(value)
            for j in range(1, n_classes):
                for i in range(size):
                    value = proba[start + i, j]
                    greater = value > best[i]
                    best[i] = value if greater else best[i]
                    arg[i] = j if greater else arg[i]
                    low[i] = value if value < low[i] else low[i]
                    total[i] += np.float64(value)
            for i in range(size):
                row_sum = total[i]
                # a non-finite entry makes its float64 row sum non-finite (NaN fails too)
                finite = finite if abs(row_sum) < np.inf else 0.0
                lowest_sum = min(lowest_sum, row_sum)
                highest_sum = max(highest_sum, row_sum)
                smallest = min(smallest, np.float64(low[i]))
                largest = max(largest, np.float64(best[i]))
                confidence[start + i] = best[i]
                correct[start + i] = arg[i] == y_index[start + i]
        partial[b, 0] = lowest_sum
        partial[b, 1] = highest_sum
        partial[b, 2] = smallest
        partial[b, 3] = largest
        partial[b, 4] = finite
    return confidence, correct, _combined_ranges(partial)


@njit(parallel=True, nogil=True, cache=True)
def probability_ranges(proba, block):
    """What the probability checks need, in one read of the rows: the ``ranges`` of
    :func:`probability_rows` (smallest and largest float64 row sum, smallest and largest
    entry, 1.0 when every row sum is finite), each row's entries taken with four
    partial sums, minima and maxima.

    Returns
    -------
    ranges : ndarray of shape (5,)
    """
    n_rows, n_classes = proba.shape
    n_blocks = (n_rows + block - 1) // block
    partial = np.empty((n_blocks, 5))
    whole = n_classes - n_classes % 4
    for b in prange(n_blocks):
        lowest_sum, highest_sum, smallest, largest = np.inf, -np.inf, np.inf, -np.inf
        finite = 1.0
        for i in range(b * block, min(n_rows, (b + 1) * block)):
            s0 = s1 = s2 = s3 = 0.0
            low = high = np.float64(proba[i, 0])
            for k in range(0, whole, 4):
                x0, x1 = np.float64(proba[i, k]), np.float64(proba[i, k + 1])
                x2, x3 = np.float64(proba[i, k + 2]), np.float64(proba[i, k + 3])
                s0 += x0
                s1 += x1
                s2 += x2
                s3 += x3
                low = min(low, min(min(x0, x1), min(x2, x3)))
                high = max(high, max(max(x0, x1), max(x2, x3)))
            for k in range(whole, n_classes):
                x0 = np.float64(proba[i, k])
                s0 += x0
                low = min(low, x0)
                high = max(high, x0)
            row_sum = (s0 + s1) + (s2 + s3)
            # a non-finite entry makes its float64 row sum non-finite (NaN fails too)
            finite = finite if abs(row_sum) < np.inf else 0.0
            lowest_sum = min(lowest_sum, row_sum)
            highest_sum = max(highest_sum, row_sum)
            smallest = min(smallest, low)
            largest = max(largest, high)
        partial[b, 0] = lowest_sum
        partial[b, 1] = highest_sum
        partial[b, 2] = smallest
        partial[b, 3] = largest
        partial[b, 4] = finite
    return _combined_ranges(partial)


@njit(nogil=True, cache=True)
def tempered_moments(expo, gap, share, true_gap, totals):
    """The NLL's derivatives in ``beta`` over a block of rows, from ``exp(beta * gap)``.

    Each row's totals of ``e``, ``e * gap`` and ``e * gap**2`` give the mean and variance
    of its gap under the scaled softmax; ``totals`` receives the first.

    Returns
    -------
    first, second : float
        ``sum share * (mean - true_gap)`` and ``sum share * variance``.
    """
    first = 0.0
    second = 0.0
    for i in range(expo.shape[0]):
        total = 0.0
        moment = 0.0
        square = 0.0
        for j in range(expo.shape[1]):
            value = expo[i, j]
            g = gap[i, j]
            total += value
            moment += value * g
            square += value * g * g
        totals[i] = total
        mean = moment / total
        first += share[i] * (mean - true_gap[i])
        second += share[i] * (square / total - mean * mean)
    return first, second


@njit(inline="always")
def _weighted_sum(proba, i, weights, square):
    """``sum_k weights_k proba_ik`` (``proba_ik^2`` with ``square``) with eight partial
    sums, which the processor adds side by side (one sum waits on each addition)."""
    n = proba.shape[1]
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    whole = n - n % 8
    for k in range(0, whole, 8):
        x0, x1, x2, x3 = proba[i, k], proba[i, k + 1], proba[i, k + 2], proba[i, k + 3]
        x4, x5, x6, x7 = proba[i, k + 4], proba[i, k + 5], proba[i, k + 6], proba[i, k + 7]
        if square:
            x0, x1, x2, x3 = x0 * x0, x1 * x1, x2 * x2, x3 * x3
            x4, x5, x6, x7 = x4 * x4, x5 * x5, x6 * x6, x7 * x7
        a0 += weights[k] * x0
        a1 += weights[k + 1] * x1
        a2 += weights[k + 2] * x2
        a3 += weights[k + 3] * x3
        a4 += weights[k + 4] * x4
        a5 += weights[k + 5] * x5
        a6 += weights[k + 6] * x6
        a7 += weights[k + 7] * x7
    for k in range(whole, n):
        x = proba[i, k] * proba[i, k] if square else proba[i, k]
        a0 += weights[k] * x
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


@njit(parallel=True, nogil=True, cache=True)
def mixture_rows(proba, ratio, scale, norms, with_norms, with_squares, floor, block):
    """A mixture's sums over rows of probabilities, each row read once: ``sum_i log d_i``,
    ``sum_i p_i / d_i`` and, with ``with_squares``, ``sum_i p_i^2 / d_i^2``, where
    ``d_i = max(ratio . p_i, floor)``; with ``with_norms``, ``norms[i]`` receives
    ``sum_k scale_k p_ik^2 / d_i^2``. Blocks of ``block`` rows are summed apart and added
    in block order; a block's ``log d_i`` are summed as the logarithm of their product,
    kept as a fraction and a power of 2 (``math.frexp``). The loops index the arrays,
    never slice them: a slice inside the parallel loop counts references to its array
    atomically, which threads contend for.

    Returns
    -------
    log_total : float
    gradient, squares : ndarray of shape (n_classes,)
    """
    n_rows, n_classes = proba.shape
    n_blocks = (n_rows + block - 1) // block
    gradients = np.zeros((n_blocks, n_classes))
    squares = np.zeros((n_blocks, n_classes))
    logs = np.zeros(n_blocks)
    for b in prange(n_blocks):
        # the block's sums in arrays of its own, added to in one loop over the row
        block_gradient = np.zeros(n_classes)
        block_square = np.zeros(n_classes)
        # the product of the densities as a fraction and a power of 2, whose logarithm is
        # taken once per block (a logarithm per row costs a tenth of the pass)
        fraction, exponent = 1.0, 0
        for i in range(b * block, min(n_rows, (b + 1) * block)):
            density = max(_weighted_sum(proba, i, ratio, False), floor)
            weight = 1.0 / density
            row_fraction, row_exponent = math.frexp(density)
            fraction *= row_fraction
            exponent += row_exponent
            if i % _FRACTION_ROWS == 0:  # fractions lie in [0.5, 1): renormalise in time
                fraction, carried = math.frexp(fraction)
                exponent += carried
            weight_square = weight * weight
            if with_norms:
                norms[i] = _weighted_sum(proba, i, scale, True) * weight_square
            if with_squares:
                for k in range(n_classes):
                    value = proba[i, k]
                    block_gradient[k] += weight * value
                    block_square[k] += weight_square * (value * value)
            else:
                for k in range(n_classes):
                    block_gradient[k] += weight * proba[i, k]
        for k in range(n_classes):
            gradients[b, k] = block_gradient[k]
            squares[b, k] = block_square[k]
        logs[b] = math.log(fraction) + exponent * _LOG_2
    log_total = 0.0
    gradient = np.zeros(n_classes)
    square = np.zeros(n_classes)
    for b in range(n_blocks):
        log_total += logs[b]
        for k in range(n_classes):
            gradient[k] += gradients[b, k]
            square[k] += squares[b, k]
    return log_total, gradient, square


@njit(parallel=True, nogil=True, cache=True)
def score_bins(score, outcome, weight, weighted, edges, n_bins, block):
    """Per-bin weight, score and outcome sums of scores over bins with ``edges`` (the
    inner edges between -inf and +inf).

    Blocks of ``block`` rows are summed in parallel, each row after row, and the block
    sums are added in block order (as ``blocked_bin_sums`` adds its ``np.bincount`` blocks).

    Returns
    -------
    sums : ndarray of shape (3, n_bins)
    """
    n_rows = score.shape[0]
    n_blocks = (n_rows + block - 1) // block
    # flat per-bin sums: indexing a 2-D array here costs three times the whole pass
    partial = np.zeros((n_blocks, 3 * n_bins))
    for b in prange(n_blocks):
        sums = np.zeros(3 * n_bins)
        for row in range(b * block, min(n_rows, (b + 1) * block)):
            value = score[row]
            g = _bin_of(value, edges, n_bins)
            hit = 1.0 if outcome[row] else 0.0
            if weighted:
                w = weight[row]
                sums[g] += w
                sums[n_bins + g] += np.float64(value) * w
                sums[2 * n_bins + g] += hit * w
            else:
                sums[g] += 1.0
                sums[n_bins + g] += np.float64(value)
                sums[2 * n_bins + g] += hit
        partial[b] = sums
    total_sums = np.zeros(3 * n_bins)
    for b in range(n_blocks):
        total_sums += partial[b]
    return total_sums.reshape(3, n_bins)


@njit(nogil=True, cache=True)
def column_keys(bits, y_index, column):
    """The sort keys of one column from the probabilities' bits (``_indicator_keys``):
    each bit pattern shifted left by one in its width, with the indicator of the column's
    class in the freed bit."""
    keys = np.empty(bits.shape[0], bits.dtype)
    for i in range(bits.shape[0]):
        keys[i] = (bits[i, column] << _ONE) | (_ONE if y_index[i] == column else _ZERO)
    return keys


@njit(nogil=True, cache=True)
def isotonic_score_sum(key, weight, weighted, log_loss, low, high):
    """The summed score of an indicator against its isotonic (PAV) fit on one column.

    ``key`` holds the column's sorted keys (the value's bits above the indicator bit),
    ``weight`` the sample weights sorted alongside when ``weighted``. One pass pools tied
    values (their weight and the weight of their indicators), leaves out values of zero
    total weight, and pools adjacent blocks on a stack while the block below has a mean
    at least that of the top one (the weighted least-squares non-decreasing fit, Ayer
    et al. 1955); the fit of a block is its mean ``g = P / M``.

    Returns
    -------
    total : float
        For the Brier score ``sum_blocks P (1 - g)``, which is ``sum m g^2 - 2 p g + p``
        over the values of each block; for the log loss (``log_loss``)
        ``sum_blocks -P log clip(g) - (M - P) log clip(1 - g)``, ``clip`` to
        ``[low, high]``.
    """
    n_rows = key.shape[0]
    # pages of the stack are mapped only once reached, and it stays far below n_rows
    # on most columns
    mass = np.empty(n_rows)
    positive = np.empty(n_rows)
    top = -1
    # the top block is kept in registers too: the pooling test then waits on no load
    block_mass = block_positive = 0.0
    start = 0
    while start < n_rows:
        value = key[start] >> _ONE
        stop = start + 1
        while stop < n_rows and key[stop] >> _ONE == value:
            stop += 1
        if weighted:
            m = 0.0
            p = 0.0
            for i in range(start, stop):
                m += weight[i]
                p += weight[i] * np.float64(key[i] & _ONE)
        else:
            hits = _ZERO
            for i in range(start, stop):
                hits += key[i] & _ONE
            m = np.float64(stop - start)
            p = np.float64(hits)
        start = stop
        if not m > 0.0:
            continue
        # the top block has a mean at least the new one's: pool them (means, not cross
        # products, which overflow or underflow for weights far from 1)
        while top >= 0 and block_positive / block_mass >= p / m:
            m += block_mass
            p += block_positive
            top -= 1
            if top >= 0:
                block_mass = mass[top]
                block_positive = positive[top]
        top += 1
        mass[top] = block_mass = m
        positive[top] = block_positive = p
    total = 0.0
    for b in range(top + 1):
        fit = positive[b] / mass[b]
        if log_loss:
            hit = -np.log(min(max(fit, low), high))
            miss = -np.log(min(max(1.0 - fit, low), high))
            total += positive[b] * hit + (mass[b] - positive[b]) * miss
        else:
            total += positive[b] * (1.0 - fit)
    return total


@njit(inline="always")
def _mix64(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return z ^ (z >> np.uint64(31))


@njit(nogil=True, cache=True)
def _poisson_counts(key, steps, thresholds, uniform, counts):
    """Fill ``counts`` with the row's Poisson(1) counts of the replicates of ``steps``.

    The first eight thresholds are compared without branches; a count of 8 or more
    (probability 1e-5, so in about one row in a hundred of 1,000 replicates) is finished
    one by one. (Finishing the counts of 4 or more that way cost four times as much.)
    """
    for p in range(steps.shape[0]):
        bits = _mix64(key + steps[p])
        uniform[2 * p] = np.float64(bits >> np.uint64(32))
        uniform[2 * p + 1] = np.float64(bits & _MASK32)
    t0, t1, t2, t3 = thresholds[0], thresholds[1], thresholds[2], thresholds[3]
    t4, t5, t6, t7 = thresholds[4], thresholds[5], thresholds[6], thresholds[7]
    rare = 0  # an integer sum: a float one would not vectorise (no reassociation)
    for r in range(counts.shape[0]):
        u = uniform[r]
        counts[r] = (
            (1.0 if u >= t0 else 0.0)
            + (1.0 if u >= t1 else 0.0)
            + (1.0 if u >= t2 else 0.0)
            + (1.0 if u >= t3 else 0.0)
            + (1.0 if u >= t4 else 0.0)
            + (1.0 if u >= t5 else 0.0)
            + (1.0 if u >= t6 else 0.0)
            + (1.0 if u >= t7 else 0.0)
        )
        rare += 1 if u >= t7 else 0
    if rare > 0:
        for r in range(counts.shape[0]):
            if uniform[r] >= t7:
                count = 8
                while count < thresholds.shape[0] and uniform[r] >= thresholds[count]:
                    count += 1
                counts[r] = count


@njit(nogil=True, cache=True)
def _add_scaled(target, counts, value):
    for r in range(counts.shape[0]):
        target[r] += counts[r] * value


@njit(nogil=True, cache=True)
def _replicate_range(base, cells, values, thresholds, out, first_pair, last_pair):
    """The replicate sums of pairs ``[first_pair, last_pair)``, rows in order."""
    n_resamples = out.shape[2]
    first = 2 * first_pair
    stop = min(n_resamples, 2 * last_pair)
    steps = np.arange(first_pair + 1, last_pair + 1).astype(np.uint64) * np.uint64(GAMMA)
    uniform = np.empty(2 * (last_pair - first_pair))
    counts = np.empty(2 * (last_pair - first_pair))
    for i in range(cells.shape[0]):
        _poisson_counts(base[i], steps, thresholds, uniform, counts)
        for e in range(cells.shape[1]):
            cell = cells[i, e]
            for v in range(values.shape[2]):
                _add_scaled(out[cell, v, first:stop], counts[: stop - first], values[i, e, v])


@njit(parallel=True, nogil=True, cache=True)
def replicate_sums(base, cells, values, thresholds, out, n_threads):
    """Add each row's Poisson-weighted values into its cells, for every replicate.

    ``out[cells[i, e], :, r] += count(i, r) * values[i, e, :]`` over rows ``i`` in order
    and entries ``e``; each thread takes a range of replicates (in pairs, which share one
    64-bit draw) and vectorises over them.

    Parameters
    ----------
    base : ndarray of shape (n_rows,), uint64
        Row keys (:func:`sklearn_calib.metrics._core._poisson.row_keys`).
    cells : ndarray of shape (n_rows, n_entries), int64
    values : ndarray of shape (n_rows, n_entries, n_values), float64
    thresholds : ndarray of shape (n_thresholds,), float64
        The Poisson thresholds of a 32-bit uniform (at least eight).
    out : ndarray of shape (n_cells, n_values, n_resamples), float64
        Added to in place.
    n_threads : int
        numba's number of threads (each takes a range of replicates).
    """
    n_pairs = (out.shape[2] + 1) // 2
    per_thread = (n_pairs + n_threads - 1) // n_threads
    for t in prange(n_threads):
        first_pair = t * per_thread
        last_pair = min(n_pairs, first_pair + per_thread)
        if first_pair < last_pair:
            _replicate_range(base, cells, values, thresholds, out, first_pair, last_pair)


@njit(nogil=True, cache=True)
def group_order(group, n_groups):
    """The rows of each group, in row order (a counting sort of ``group``).

    Returns
    -------
    starts : ndarray of shape (n_groups + 1,), int64
        Group ``g``'s rows are ``order[starts[g]:starts[g + 1]]``.
    order : ndarray of shape (n_rows,), int64
    """
    starts = np.zeros(n_groups + 1, np.int64)
    for row in range(group.shape[0]):
        starts[group[row] + 1] += 1
    for g in range(n_groups):
        starts[g + 1] += starts[g]
    filled = starts[:-1].copy()
    order = np.empty(group.shape[0], np.int64)
    for row in range(group.shape[0]):
        g = group[row]
        order[filled[g]] = row
        filled[g] += 1
    return starts, order


@njit(inline="always")
def _add_classwise_row(proba, y_index, weight, weighted, edges, n_bins, row, sums):
    """Add one row's weight, probability and true-class indicator to its bins' sums."""
    n_classes = proba.shape[1]
    n_cells = n_classes * n_bins
    w = weight[row] if weighted else 1.0
    for c in range(n_classes):
        value = proba[row, c]
        cell = c * n_bins + _bin_of(value, edges, n_bins)
        sums[cell] += w
        sums[n_cells + cell] += np.float64(value) * w
    true_class = y_index[row]
    true_bin = _bin_of(proba[row, true_class], edges, n_bins)
    sums[2 * n_cells + true_class * n_bins + true_bin] += w


@njit(parallel=True, nogil=True, cache=True)
def classwise_bins(proba, y_index, weight, weighted, edges, n_bins, block):
    """Per (class, bin) sums of weight, probability and true-class indicator.

    Blocks of ``block`` rows are summed in parallel, each row after row, and the block
    sums are added in block order (as ``_numpy_classwise_sums`` adds its ``np.bincount``
    blocks).

    Returns
    -------
    sums : ndarray of shape (3 * n_classes * n_bins,)
        The weights' sums, then the probabilities', then the indicators'.
    """
    n_rows = proba.shape[0]
    size = 3 * proba.shape[1] * n_bins
    n_blocks = (n_rows + block - 1) // block
    partial = np.zeros((n_blocks, size))
    for b in prange(n_blocks):
        sums = np.zeros(size)
        for row in range(b * block, min(n_rows, (b + 1) * block)):
            _add_classwise_row(proba, y_index, weight, weighted, edges, n_bins, row, sums)
        partial[b] = sums
    total = np.zeros(size)
    for b in range(n_blocks):
        total += partial[b]
    return total


@njit(parallel=True, nogil=True, cache=True)
def grouped_classwise_bins(
    proba, y_index, weight, weighted, edges, n_bins, block, starts, order, out
):
    """Add :func:`classwise_bins` of each group's rows to ``out``.

    Groups (``starts``, ``order``: :func:`group_order`) are summed in parallel, each
    group's rows in row order, block by block of ``block`` rows, the block sums added in
    block order: the additions of ``_numpy_classwise_sums``. Each group's rows are first copied
    together (a loop of loads only, whose cache misses overlap; binning the rows where
    they lie waits for each row's misses in turn, 2.3 times as long).

    Parameters
    ----------
    out : ndarray of shape (n_groups, 3 * n_classes * n_bins), float64
        Zeros (numpy's: see :func:`grouped_grid_sums`).
    """
    size = out.shape[1]
    n_classes = proba.shape[1]
    for g in prange(starts.shape[0] - 1):
        first, stop = starts[g], starts[g + 1]
        values = np.empty((stop - first, n_classes), proba.dtype)
        true_class = np.empty(stop - first, np.int64)
        weights = np.ones(stop - first)
        for i in range(stop - first):
            row = order[first + i]
            for c in range(n_classes):
                values[i, c] = proba[row, c]
            true_class[i] = y_index[row]
            if weighted:
                weights[i] = weight[row]
        total = out[g]
        sums = np.zeros(size)
        current = -1
        for i in range(stop - first):
            if order[first + i] // block != current:
                if current >= 0:
                    total += sums
                    sums[:] = 0.0
                current = order[first + i] // block
            # unit weights leave every product as it is: the unweighted sums
            _add_classwise_row(values, true_class, weights, True, edges, n_bins, i, sums)
        if current >= 0:
            total += sums


@njit(parallel=True, nogil=True, cache=True)
def grouped_grid_sums(index, frac, columns, starts, order, out):
    """The linear-binning sums of each column on the grid, per group, into ``out``.

    Each row adds ``1 - frac`` of its value at grid point ``index`` and ``frac`` at
    ``index + 1``; each group's rows (``order[starts[g]:starts[g + 1]]``, from
    :func:`group_order`) add their lower shares in row order, then their upper shares:
    the additions of the ``np.bincount`` of numpy's ``grid_sums``. Groups are summed in
    parallel.

    Parameters
    ----------
    columns : ndarray of shape (n_rows, n_columns), float64
    starts : ndarray of shape (n_groups + 1,), int64
    out : ndarray of shape (n_columns, n_groups, n_points), float64
        Zeros, added to (numpy's, whose pages the threads fault in as they write: numba's
        ``np.zeros`` writes every page on one thread first).
    """
    n_columns = columns.shape[1]
    for g in prange(starts.shape[0] - 1):
        first, stop = starts[g], starts[g + 1]
        for position in range(first, stop):
            row = order[position]
            point, share = index[row], 1.0 - frac[row]
            for k in range(n_columns):
                out[k, g, point] += columns[row, k] * share
        for position in range(first, stop):
            row = order[position]
            point, share = index[row] + 1, frac[row]
            for k in range(n_columns):
                out[k, g, point] += columns[row, k] * share


def thread_count():
    """numba's number of threads (for reports)."""
    return numba.get_num_threads()


def threadsafe():
    """Whether numba's threading layer runs parallel kernels called from several threads at
    once: TBB or OpenMP, known once the first parallel kernel has started the layer."""
    try:
        return numba.threading_layer() in _THREADSAFE_LAYERS
    except ValueError:  # no parallel kernel has run: the layer is not chosen yet
        return False
