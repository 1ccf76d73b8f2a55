"""The smooth expected calibration error, SECE (Wang and Golebiowski 2024).

SECE smooths the outcomes with a Gaussian kernel centred on each sample's score; its sums
run over all pairs, exactly (blocks of sorted scores) or, for large inputs, through
linear binning on a fine grid and an FFT convolution whose error is bounded per call.
"""

import math

import numpy as np
from scipy.signal import fftconvolve

from ..._validation import check_number, check_option
from .._core._dispatch import dask_aware
from .._core._group_rows import overall_or_by_group
from .._core._weights import mean_weight
from ._predictions import check_predictions
from ._scores import _weighted_mean

#: Added to the kernel sums of SECE (times the mean sample weight), so that a sample
#: without any neighbour (possible with ``include_self=False``) gets a smoothed accuracy
#: of 0.
SECE_EPS = 1e-12
#: Smallest ``x`` for which ``exp(-x)`` is exactly 0 in float64 (rounded up): a Gaussian
#: kernel term vanishes exactly once ``|u - v| > sqrt(2 * 746) * h``, about 38.6 h.
_EXP_UNDERFLOW = 746.0


#: Number of elements of one block of the exact kernel sums.
_BLOCK_ELEMENTS = 1 << 20


#: ``method="auto"`` sums exactly when at most this many pairs lie within the kernel's reach.
_EXACT_PAIRS = 1 << 25


#: Grid step of the binned SECE, as a fraction of the bandwidth.
_GRID_STEP = 1.0 / 8192


#: Most points of the binned SECE's grid (a coarser step then loosens the bound).
_MAX_GRID = 1 << 22


#: The binned kernel is cut at this many bandwidths (terms beyond are below 3e-18).
_TRUNCATION = 9.0


#: Guaranteed largest difference between the binned and the exact SECE.
SECE_BINNED_TOLERANCE = 1e-6


_SECE_METHODS = ("auto", "exact", "binned")


def _exact_kernel_sums(score, outcome, weight, bandwidth, include_self, rows):
    """Return ``sum_j w_j K(r_i, r_j) c_j`` and ``sum_j w_j K(r_i, r_j)`` for i in ``rows``.

    ``score`` and ``rows`` are sorted, so each block of rows only meets the columns within
    the distance beyond which the float64 kernel is exactly 0; blocks hold about
    ``_BLOCK_ELEMENTS`` kernel entries (one row at least), which bounds the memory.
    """
    reach = bandwidth * np.sqrt(2.0 * _EXP_UNDERFLOW)
    first = np.searchsorted(score, score[rows] - reach, side="left")
    stop = np.searchsorted(score, score[rows] + reach, side="right")
    # dividing (not multiplying by 1 / (2 h^2)) keeps a tiny bandwidth from making 0 * inf
    width = np.sqrt(2.0) * bandwidth
    n_rows = rows.shape[0]
    numerator = np.empty(n_rows)
    denominator = np.empty(n_rows)
    start = 0
    while start < n_rows:
        # Rows [start, end) meet columns [first[start], stop[end - 1]); grow the block
        # while rows * columns stays within the budget (both factors grow with end).
        most_rows = _BLOCK_ELEMENTS // (stop[start] - first[start]) + 1
        candidates = np.arange(start, min(n_rows, start + most_rows))
        size = (candidates - start + 1) * (stop[candidates] - first[start])
        end = start + max(1, int(np.searchsorted(size, _BLOCK_ELEMENTS, side="right")))
        lo, hi = first[start], stop[end - 1]
        block_rows = rows[start:end]
        kernel = score[block_rows, None] - score[None, lo:hi]
        kernel /= width
        with np.errstate(over="ignore"):  # an infinite square is a kernel value of 0
            np.square(kernel, out=kernel)
        np.negative(kernel, out=kernel)
        np.exp(kernel, out=kernel)
        if not include_self:
            kernel[np.arange(end - start), block_rows - lo] = 0.0
        if weight is not None:
            kernel *= weight[lo:hi]
        numerator[start:end] = kernel @ outcome[lo:hi]
        denominator[start:end] = kernel.sum(axis=1)
        start = end
    return numerator, denominator


def _pairs_within_reach(score, bandwidth):
    """Number of (i, j) pairs whose float64 kernel value is not exactly 0."""
    reach = bandwidth * np.sqrt(2.0 * _EXP_UNDERFLOW)
    first = np.searchsorted(score, score - reach, side="left")
    stop = np.searchsorted(score, score + reach, side="right")
    return int(np.sum(stop - first, dtype=np.int64))


def kernel_grid_sums(grid, bandwidth, step):
    """Gaussian kernel sums at the points of a grid of linearly binned sums.

    ``grid`` holds, per row, sums linearly binned on points ``step`` apart; the result
    at each point is the sum over points of ``exp(-d^2 / (2 h^2))`` times the grid value,
    by FFT, the kernel cut at ``_TRUNCATION`` bandwidths. Against the exact sums over the
    samples binned into the grid, each point's sum (and each bilinear interpolation of
    them) is off by at most ``rho`` times itself plus ``absolute`` times the total
    weight (see :func:`_binned_kernel_sums`).

    Parameters
    ----------
    grid : ndarray of shape (n_rows, n_grid)
        Linearly binned sums.
    bandwidth : float
        Kernel bandwidth ``h``.
    step : float
        Distance between grid points.

    Returns
    -------
    smoothed : ndarray of shape (n_rows, n_grid)
    rho : float
        Relative error bound.
    absolute : float
        Absolute error bound per unit of total weight.
    """
    n_grid = grid.shape[1]
    n_taps = min(int(math.ceil(_TRUNCATION * bandwidth / step)), n_grid)
    offsets = np.arange(-n_taps, n_taps + 1) * (step / (np.sqrt(2.0) * bandwidth))
    taps = np.exp(-(offsets**2))
    smoothed = fftconvolve(grid, taps[None, :], mode="same", axes=1)
    q = step / bandwidth
    rho = q * q / 4.0 * (1.0 + (_TRUNCATION + 2.0 * q) ** 2) * math.exp(2.0 * _TRUNCATION * q)
    absolute = math.exp(-((max(_TRUNCATION - 2.0 * q, 0.0)) ** 2) / 2.0) + fft_rounding(
        n_grid + taps.shape[0], taps
    )
    return smoothed, rho, absolute


def fft_rounding(size, taps):
    """Bound on the rounding of an FFT convolution with ``taps``, per unit of input."""
    return 16.0 * 2.0**-53 * math.log2(size) * float(np.linalg.norm(taps))


def _binned_kernel_sums(score, outcome, weight, bandwidth, include_self):
    """Kernel sums by linear binning, FFT convolution and linear interpolation.

    Each pair's kernel value is replaced by the bilinear interpolation of the kernel
    between the grid points around both scores. With grid step ``d`` and ``q = d / h``,
    that changes a term by at most ``(d^2 / 4) max |K''|`` over offsets within ``2 d``,
    which for offsets up to ``T h`` (``T = _TRUNCATION``) is at most
    ``rho = q^2 / 4 (1 + (T + 2q)^2) exp(2 T q)`` times the term itself; terms beyond
    ``T h`` change by at most ``exp(-(T - 2q)^2 / 2)`` per unit weight, and the FFT adds
    a rounding of ``16 u log2(size) ||kernel||_2`` per unit weight.

    Returns
    -------
    numerator, denominator : ndarray of shape (n_samples,)
        The sums of :func:`_exact_kernel_sums` (self term removed without
        ``include_self``).
    numerator_error, denominator_error : ndarray of shape (n_samples,)
        Bounds on their absolute errors.
    """
    low, high = float(score[0]), float(score[-1])
    step = max(bandwidth * _GRID_STEP, (high - low) / (_MAX_GRID - 2))
    n_grid = int(math.ceil((high - low) / step)) + 2
    position = (score - low) / step
    index = np.minimum(position.astype(np.intp), n_grid - 2)
    frac = position - index
    weight = np.ones_like(score) if weight is None else weight
    grid = np.empty((2, n_grid))
    for row, values in enumerate((weight * outcome, weight)):
        grid[row] = np.bincount(index, values * (1.0 - frac), minlength=n_grid)
        grid[row] += np.bincount(index + 1, values * frac, minlength=n_grid)
    smoothed, rho, absolute = kernel_grid_sums(grid, bandwidth, step)
    numerator = smoothed[0, index] * (1.0 - frac) + smoothed[0, index + 1] * frac
    denominator = smoothed[1, index] * (1.0 - frac) + smoothed[1, index + 1] * frac
    absolute *= float(weight.sum())
    numerator_error = (rho * np.abs(numerator) + absolute) / (1.0 - rho)
    denominator_error = (rho * np.abs(denominator) + absolute) / (1.0 - rho)
    if not include_self:
        # the self pair is binned like any other: (1-f)^2 K(0) + f^2 K(0) + 2 f (1-f) K(d)
        q = step / bandwidth
        self_kernel = (1.0 - frac) ** 2 + frac**2 + 2.0 * frac * (1.0 - frac) * np.exp(-q * q / 2)
        numerator = numerator - weight * outcome * self_kernel
        denominator = denominator - weight * self_kernel
    return numerator, denominator, numerator_error, denominator_error


def _smoothed_accuracy(score, outcome, weight, bandwidth, include_self, method):
    """SACC of each sorted sample, exactly or binned with exact fallback rows."""
    eps = SECE_EPS * mean_weight(weight)
    n = score.shape[0]
    if method == "auto":
        cheap = _pairs_within_reach(score, bandwidth) <= _EXACT_PAIRS
        method = "exact" if cheap else "binned"
    if method == "exact":
        numerator, denominator = _exact_kernel_sums(
            score, outcome, weight, bandwidth, include_self, np.arange(n)
        )
        return numerator / (denominator + eps)
    numerator, denominator, numerator_error, denominator_error = _binned_kernel_sums(
        score, outcome, weight, bandwidth, include_self
    )
    denominator = denominator + eps
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.where(
            denominator > denominator_error,
            (numerator_error + denominator_error) / denominator,
            np.inf,
        )
    share = np.full(n, 1.0 / n) if weight is None else weight / weight.sum()
    contribution = share * bound
    order = np.argsort(-contribution, kind="stable")
    # the rows left binned must keep the total bound within the tolerance
    remaining = np.cumsum(contribution[order][::-1])[::-1]
    n_exact = int(np.searchsorted(-remaining, -SECE_BINNED_TOLERANCE, side="left"))
    accuracy = numerator / denominator
    if n_exact:
        rows = np.sort(order[:n_exact])
        exact_numerator, exact_denominator = _exact_kernel_sums(
            score, outcome, weight, bandwidth, include_self, rows
        )
        accuracy[rows] = exact_numerator / (exact_denominator + eps)
    return accuracy


@dask_aware
def smooth_calibration_error(
    y_true,
    y_prob,
    *,
    bandwidth=0.01,
    include_self=True,
    method="auto",
    convention="auto",
    labels=None,
    sample_weight=None,
    groups=None,
):
    """Smooth expected calibration error (SECE, Wang and Golebiowski 2024).

    A Gaussian kernel ``K(u, v) = exp(-(u - v)^2 / (2 h^2))`` on the top-label
    confidences ``r`` estimates the accuracy at each sample's confidence,
    ``SACC_i = sum_j w_j K(r_i, r_j) c_j / (sum_j w_j K(r_i, r_j) + 1e-12 w_bar)``, and
    ``SECE = mean_i |SACC_i - r_i|`` (weighted by ``w``; ``w_bar`` is the mean of the
    positive weights, so the result depends neither on the weights' scale nor on rows of
    weight 0).

    ``method="exact"`` sums over all pairs in float64, over blocks of sorted confidences
    (pairs farther apart than about 38.6 h are skipped: their kernel value is exactly 0 in
    float64); time O(n^2) at worst. ``method="binned"`` spreads the samples linearly on a
    grid of step ``h / 8192``, convolves with the kernel by FFT and interpolates back:
    O(n + grid log grid). The error of each sample's sums is bounded in every call
    (bilinear interpolation of the kernel changes a term by at most
    ``(step^2 / 4) max |K''|``); samples whose bound is too loose (isolated ones) are
    summed exactly, so that the result is within ``1e-6`` of the exact one.
    ``method="auto"`` (default) is exact when at most 2^25 pairs lie within the kernel's
    reach (about 6,000 spread-out samples) and binned above.

    ``include_self=True`` (default) keeps ``j = i`` in the sums, as the kernel estimate of
    the paper's eq. (12) does: every sample then has a positive kernel mass, the result
    is a continuous function of the inputs, a vanishing bandwidth gives
    ``mean |c_i - r_i|`` as the paper states, and integer sample weights equal repeated
    rows. ``include_self=False`` is the leave-one-out estimate: less biased towards each
    sample's own outcome, but a sample with no neighbour within the kernel's reach gets
    ``SACC_i = 0``.

    The accuracy smoothed is the 0/1 correctness ``c_j``, as in the KDE estimate of
    calibration error that the paper starts from (its eq. (12)): as a measure, SECE
    estimates how far the accuracy at each confidence is from that confidence. The paper
    trains with the all-pairs soft accuracy instead (the torch
    :func:`sklearn_calib.losses.smooth_calibration_error` with ``accuracy="soft"``), a
    differentiable surrogate that depends on a ranking temperature and differs from the
    correctness of every sample whose true class's probability is close to another class's;
    it serves the gradient, not the measurement.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    bandwidth : float, default=0.01
        Kernel bandwidth ``h`` (the paper's choice).
    include_self : bool, default=True
        Whether a sample counts in its own accuracy estimate.
    method : {"auto", "exact", "binned"}, default="auto"
        How the kernel sums are computed (see above).
    convention : {"auto", "top_label", "positive_class"}, default="auto"
        What is smoothed; see :func:`expected_calibration_error`.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, applied to the neighbours in the kernel sums and to the mean.
    groups : array-like of shape (n_samples,) or (n_samples, n_columns), default=None
        Group of each sample, or columns whose distinct rows are the groups: when given,
        the error of each group's rows, as a dict from group label to value (see
        :func:`calibration_audit`).

    Returns
    -------
    error : float
        The SECE, in [0, 1].

    See Also
    --------
    smooth_ece : Błasiok & Nakkiran's smooth ECE with an automatic bandwidth.

    References
    ----------
    .. [1] C. Wang and J. Golebiowski, "Towards Unbiased Calibration using
       Meta-Regularization", Transactions on Machine Learning Research, 2024.
    .. [2] M. P. Wand, "Fast Computation of Multivariate Kernel Estimators", Journal of
       Computational and Graphical Statistics 3(4), 1994 (linear binning).

    Examples
    --------
    >>> from sklearn_calib.scoring import smooth_calibration_error
    >>> y_true = [0, 1, 1, 0, 2]
    >>> y_prob = [[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1],
    ...           [0.5, 0.2, 0.3], [0.1, 0.1, 0.8]]
    >>> round(smooth_calibration_error(y_true, y_prob), 4)
    0.34
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return overall_or_by_group(
        _smooth_calibration_error,
        data,
        groups,
        bandwidth=bandwidth,
        include_self=include_self,
        method=method,
        convention=convention,
    )


def _smooth_calibration_error(
    data, *, bandwidth=0.01, include_self=True, method="auto", convention="top_label"
):
    """:func:`smooth_calibration_error` of checked predictions."""
    bandwidth = check_number("bandwidth", bandwidth, low=0, low_open=True)
    if not isinstance(include_self, (bool, np.bool_)):
        raise ValueError(f"Expected `include_self` to be a bool, got {include_self!r}.")
    check_option(method, "method", _SECE_METHODS)
    sample_weight = data.sample_weight
    score, outcome = data.scores(convention)
    order = np.argsort(score, kind="stable")
    score = score[order].astype(np.float64)
    outcome = outcome[order].astype(np.float64)
    weight = None if sample_weight is None else sample_weight[order]
    accuracy = _smoothed_accuracy(score, outcome, weight, bandwidth, bool(include_self), method)
    return _weighted_mean(np.abs(accuracy - score), weight)
