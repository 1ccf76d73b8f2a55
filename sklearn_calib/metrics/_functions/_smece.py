"""Kernel-smoothed calibration errors: SECE (Wang and Golebiowski) and smECE (Błasiok & Nakkiran).

SECE smooths the outcomes with a Gaussian kernel centred on each sample's score; its sums
run over all pairs, exactly (blocks of sorted scores) or, for large inputs, through
linear binning on a fine grid and an FFT convolution whose error is bounded per call.
smECE smooths the residuals with a Gaussian kernel reflected at 0 and 1 on a mesh, with
the discretisation of the authors' package, and chooses its bandwidth as a fixed point.
"""

import math

import numpy as np
from scipy.signal import fftconvolve

from ..._validation import check_number, check_option
from .._core._dispatch import dask_aware
from .._core._group_rows import overall_or_by_group
from .._core._resampling import ResamplingPlan
from .._core._weights import mean_weight
from .._fused._passes import grid_sums
from ._binned import SECE_EPS, _weighted_mean
from ._predictions import check_predictions

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

#: smECE's discretisation (that of the ``relplot`` package): the kernel sums live on
#: ``max(2000, round(20 / h)) // 2 + 1`` grid points and are read on a mesh of
#: ``max(200, round(10 / h))`` points; the density gets ``1e-4`` per unit of mean weight;
#: the automatic bandwidth is bisected 10 times on [0, 1] and is at least 1e-3.
_SMECE_MIN_GRID = 2000
_SMECE_MIN_MESH = 200
_SMECE_DENSITY_EPS = 1e-4
_SMECE_BISECTIONS = 10
_SMECE_MIN_BANDWIDTH = 1e-3
#: Smallest bandwidth accepted by :func:`smooth_ece` (its grid has 10^5 points).
SMECE_BANDWIDTH_FLOOR = 1e-4
#: Largest grid whose per-group sums a resampling plan carries to the mesh (bandwidths
#: down to about 0.01; 2,049 points by 4,096 groups are 67 MB).
_OPERATOR_GRID = 2049


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
    :func:`sklearn_calib.losses.smooth_ece` with ``accuracy="soft"``), a differentiable
    surrogate that depends on a ranking temperature and differs from the correctness of
    every sample whose true class's probability is close to another class's; it serves the
    gradient, not the measurement.

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


def _smece_grid_size(bandwidth):
    return max(_SMECE_MIN_GRID, round(20 / bandwidth)) // 2 + 1


def _smece_mesh(bandwidth):
    return np.linspace(0.0, 1.0, max(_SMECE_MIN_MESH, round(10 / bandwidth)))


def linear_binning(score, n_points):
    """Return the grid cell of each score in [0, 1] and its position within the cell.

    The grid has ``n_points`` equally spaced points from 0 to 1; a score at 1 lies at the
    end of the last cell.
    """
    position = score * (n_points - 1)
    index = np.clip(position.astype(np.intp), 0, n_points - 2)
    return index, position - index


def _grid_statistics(index, frac, column, n_points, group, n_groups):
    """Linear-binning sums of a column on the grid, per group.

    Each row adds ``1 - frac`` of its value at its cell's lower grid point and ``frac``
    at the upper one.

    Returns
    -------
    sums : ndarray of shape (n_groups, n_points)
    """
    key = group * n_points + index
    spread = np.concatenate([column * (1.0 - frac), column * frac])
    sums = np.bincount(np.concatenate([key, key + 1]), spread, minlength=n_groups * n_points)
    return sums.reshape(n_groups, n_points)


def _column_grids(index, frac, columns, n_points, group, n_groups):
    """:func:`_grid_statistics` of each column: one numba pass over all of them, or one
    ``np.bincount`` each (the same sums).

    Returns
    -------
    sums : ndarray of shape (len(columns), n_groups, n_points)
    """
    grids = grid_sums(index, frac, columns, n_points, group, n_groups)
    if grids is None:
        grids = np.stack(
            [_grid_statistics(index, frac, column, n_points, group, n_groups) for column in columns]
        )
    return grids


def reflected_smoothing(grid, bandwidth):
    """Smooth grid values with a Gaussian reflected at both ends of [0, 1].

    The kernel ``exp(-d^2 / (2 h^2)) / (sqrt(2 pi) h)`` is sampled at the ``n_points``
    offsets ``i / (n_points - 1) - 1/2``; values beyond either end are mirrored about the
    end point. For an even ``n_points`` these offsets miss 0 by half a grid step, so the
    kernel sits half a step off centre (as in the ``relplot`` package, whose values this
    reproduces); the shift is far below the bandwidth.

    Parameters
    ----------
    grid : ndarray of shape (..., n_points)
        Values on ``n_points`` equally spaced points of [0, 1].
    bandwidth : float
        Kernel bandwidth ``h``.

    Returns
    -------
    smoothed : ndarray of shape (..., n_points)
    """
    n_points = grid.shape[-1]
    offsets = np.arange(n_points) / (n_points - 1) - 0.5
    taps = np.exp(-(offsets**2) / (2.0 * bandwidth**2)) / (np.sqrt(2.0 * np.pi) * bandwidth)
    after = n_points // 2
    widths = [(0, 0)] * (grid.ndim - 1) + [(n_points - 1 - after, after)]
    padded = np.pad(grid, widths, mode="reflect")
    taps = taps.reshape((1,) * (grid.ndim - 1) + (-1,))
    return fftconvolve(padded, taps, mode="valid", axes=-1)


def interpolate_on_mesh(values, mesh):
    """Linear interpolation of grid values (last axis, on [0, 1]) at the mesh points."""
    n_points = values.shape[-1]
    step = 1.0 / (n_points - 1)
    index = np.clip((mesh * (n_points - 1)).astype(np.intp), 0, n_points - 2)
    fraction = (mesh - index * step) / step
    return values[..., index] * (1.0 - fraction) + values[..., index + 1] * fraction


def _smece_on_mesh(smoothed, density_eps):
    """smECE from the smoothed weight and residual ``(..., 2, n_mesh)`` on the mesh."""
    density, residual = smoothed[..., 0, :], smoothed[..., 1, :]
    return np.abs(residual).sum(axis=-1) / (density + density_eps).sum(axis=-1)


def _smece_from_grid(sums, bandwidth, density_eps):
    """smECE at ``bandwidth`` from grid sums ``(..., 2, n_points)`` of weight and residual."""
    smoothed = interpolate_on_mesh(reflected_smoothing(sums, bandwidth), _smece_mesh(bandwidth))
    return _smece_on_mesh(smoothed, density_eps)


def mesh_operator(n_points, bandwidth, mesh):
    """The matrix of :func:`reflected_smoothing` then :func:`interpolate_on_mesh`.

    Both are linear, so grid values ``(..., n_points)`` map to the mesh as ``values @
    operator``. The matrix is summed directly: the smoothed value at grid point ``j`` is
    ``sum_t taps[t] grid[reflect(j + n - 1 - t - before)]`` (the reflected padding of
    :func:`reflected_smoothing`, ``before`` points on the left), and only the grid points
    around each mesh point are needed.

    Returns
    -------
    operator : ndarray of shape (n_points, n_mesh) or None
        None when the mesh has more than half as many points as the grid (smECE's mesh
        below a bandwidth of about 0.02), where carrying each group's grid sums to the mesh
        would cost more than smoothing each replicate, or when the grid has more than
        ``_OPERATOR_GRID`` points, whose sums per group would take too much memory.
    """
    if 2 * mesh.shape[0] > n_points or n_points > _OPERATOR_GRID:
        return None
    n = n_points
    offsets = np.arange(n) / (n - 1) - 0.5
    taps = np.exp(-(offsets**2) / (2.0 * bandwidth**2)) / (np.sqrt(2.0 * np.pi) * bandwidth)
    before = n - 1 - n // 2
    lower = np.clip((mesh * (n - 1)).astype(np.intp), 0, n - 2)
    fraction = (mesh - lower / (n - 1)) * (n - 1)
    needed = np.unique(np.concatenate([lower, lower + 1]))
    source = needed[:, None] + (n - 1 - before) - np.arange(n)
    source = np.abs(source)
    source = np.where(source > n - 1, 2 * (n - 1) - source, source)
    key = source * needed.shape[0] + np.arange(needed.shape[0])[:, None]
    weight = np.broadcast_to(taps, key.shape)
    smoothing = np.bincount(key.ravel(), weight.ravel(), minlength=n * needed.shape[0])
    smoothing = smoothing.reshape(n, needed.shape[0])
    column = np.searchsorted(needed, lower)
    return smoothing[:, column] * (1.0 - fraction) + smoothing[:, column + 1] * fraction


def fixed_point_bandwidth(smece_at):
    """The automatic bandwidth of smECE: the fixed point ``h = smECE_h``, by bisection.

    Parameters
    ----------
    smece_at : callable
        ``smece_at(h)`` is smECE at bandwidth ``h``.

    Returns
    -------
    bandwidth : float
        The end of the last bisection bracket above the fixed point (at least 1e-3).
    """

    def below(h):  # h is still below the fixed point
        return h < _SMECE_MIN_BANDWIDTH or h < smece_at(h)

    if below(1.0):
        return 1.0
    high, low = 1.0, 0.0
    for _ in range(_SMECE_BISECTIONS):
        middle = (high + low) / 2
        if below(middle):
            low = middle
        else:
            high = middle
    return high


class _SmoothECE:
    """smECE of one set of scores and outcomes at any bandwidth (grid sums are cached)."""

    def __init__(self, score, outcome, weight):
        self.score = score.astype(np.float64)
        self.weight = np.ones_like(self.score) if weight is None else weight
        self.outcome = self.weight * outcome
        self.residual = self.weight * self.score - self.outcome
        self.density_eps = _SMECE_DENSITY_EPS * mean_weight(weight)
        self._binnings = {}
        self._grids = {}

    @classmethod
    def from_predictions(cls, data, convention):
        """Judge each sample's score of checked predictions against its outcome (made once
        per predictions and convention, so its cached grids serve every later call)."""
        return data.derived(
            ("smooth_ece", convention), lambda: cls(*data.scores(convention), data.sample_weight)
        )

    def binning(self, n_points):
        """:func:`linear_binning` of the scores on ``n_points`` (cached)."""
        if n_points not in self._binnings:
            self._binnings[n_points] = linear_binning(self.score, n_points)
        return self._binnings[n_points]

    def grid_sums(self, n_points):
        if n_points not in self._grids:
            index, frac = self.binning(n_points)
            group = np.zeros(self.score.shape[0], dtype=np.intp)
            columns = (self.weight, self.residual)
            self._grids[n_points] = _column_grids(index, frac, columns, n_points, group, 1)[:, 0]
        return self._grids[n_points]

    def __call__(self, bandwidth):
        sums = self.grid_sums(_smece_grid_size(bandwidth))
        return float(_smece_from_grid(sums, bandwidth, self.density_eps))

    def resolve(self, bandwidth):
        """The bandwidth itself, or for "auto" the fixed point ``h = smECE_h``."""
        return bandwidth if bandwidth != "auto" else fixed_point_bandwidth(self)

    def plan(self, bandwidth, columns, mesh, evaluate):
        """Resampling plan of ``evaluate`` on the smoothed ``columns`` (weight first).

        ``evaluate(smoothed, eps)`` gets the columns' kernel sums on the ``mesh`` as
        ``(..., len(columns), n_mesh)`` and the density's epsilon of each replicate (it
        follows the replicate's mean weight per drawn row, which is the mean positive
        weight when every row's weight is positive). Smoothing is linear, so each group's
        grid sums are carried to the mesh once (:func:`mesh_operator`) and the replicates
        resample mesh values; where the mesh is nearly as fine as the grid they resample
        grid sums and are smoothed one by one.
        """
        n_points = _smece_grid_size(bandwidth)
        index, frac = self.binning(n_points)
        n_rows, n_columns = self.score.shape[0], len(columns)
        operator = mesh_operator(n_points, bandwidth, mesh)
        width = n_points if operator is None else mesh.shape[0]

        def accumulate(group, n_groups):
            sums = np.empty((n_groups, n_columns * width + 1))
            grids = _column_grids(index, frac, columns, n_points, group, n_groups)
            for position, grid in enumerate(grids):
                if position == 0:
                    sums[:, -1] = grid.sum(axis=-1)
                if operator is not None:
                    grid = grid @ operator
                sums[:, position * width : (position + 1) * width] = grid
            return sums

        def value(sums):
            eps = _SMECE_DENSITY_EPS * sums[..., -1] / n_rows
            smoothed = sums[..., :-1].reshape(sums.shape[:-1] + (n_columns, width))
            if operator is None:
                smoothed = interpolate_on_mesh(reflected_smoothing(smoothed, bandwidth), mesh)
            return evaluate(smoothed, eps[..., None])

        return ResamplingPlan(n_rows, n_columns * width + 1, accumulate, value)


def _check_smece_bandwidth(bandwidth):
    if isinstance(bandwidth, str) and bandwidth == "auto":
        return bandwidth
    if isinstance(bandwidth, str):
        raise ValueError(f"Expected `bandwidth` to be 'auto' or a number, got {bandwidth!r}.")
    return check_number("bandwidth", bandwidth, low=SMECE_BANDWIDTH_FLOOR)


@dask_aware
def smooth_ece(
    y_true,
    y_prob,
    *,
    bandwidth="auto",
    return_bandwidth=False,
    convention="auto",
    labels=None,
    sample_weight=None,
    groups=None,
):
    """Smooth ECE (smECE, Błasiok & Nakkiran 2024) with its automatic bandwidth.

    The residuals ``s_i - y_i`` of the scores ``s`` (top-label confidences) against the
    outcomes ``y`` (correctness) are smoothed with a Gaussian kernel ``K_h`` of width
    ``h`` reflected at 0 and 1, on a uniform mesh ``t`` of [0, 1]: with
    ``R(t) = sum_i w_i K_h(t, s_i) (s_i - y_i)`` and ``D(t) = sum_i w_i K_h(t, s_i)``,
    ``smECE_h = sum_t |R(t)| / sum_t (D(t) + 1e-4 w_bar)``. ``bandwidth="auto"`` takes
    the fixed point ``h = smECE_h``, found by 10 bisections of [0, 1] (the returned ``h``
    satisfies ``h >= smECE_h``; at least 1e-3); smECE is then a consistent calibration
    measure, within a constant factor of the distance to calibration.

    The sums use the discretisation of the authors' ``relplot`` package (linear binning
    on ``max(2000, round(20 / h)) // 2 + 1`` grid points, a kernel sampled at offsets
    within 1/2, linear interpolation to ``max(200, round(10 / h))`` mesh points), so the
    value equals ``relplot.smECE`` on the same input to rounding. The samples are binned
    once per grid size, so the time is O(n + mesh) per bandwidth tried.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    bandwidth : "auto" or float, default="auto"
        The fixed-point bandwidth, or a given one (at least 1e-4).
    return_bandwidth : bool, default=False
        Whether to return the bandwidth used as well.
    convention : {"auto", "top_label", "positive_class"}, default="auto"
        What is smoothed; see :func:`expected_calibration_error`. ``relplot.smECE(p, y)``
        on binary data is ``convention="positive_class"``.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, multiplying each sample's kernel mass (``w_bar`` is the mean of
        the positive weights, so their scale and rows of weight 0 do not matter; integer
        weights equal repeated rows up to that epsilon).
    groups : array-like of shape (n_samples,) or (n_samples, n_columns), default=None
        Group of each sample, or columns whose distinct rows are the groups: when given,
        the error of each group's rows, as a dict from group label to value (see
        :func:`calibration_audit`).

    Returns
    -------
    error : float
        smECE, in [0, 1].
    bandwidth : float
        The bandwidth used; only when ``return_bandwidth=True``.

    See Also
    --------
    smooth_calibration_error : Wang et al.'s SECE with a fixed bandwidth.
    smooth_reliability_diagram : The smoothed curve, with a bootstrap band.

    References
    ----------
    .. [1] J. Błasiok and P. Nakkiran, "Smooth ECE: Principled Reliability Diagrams via
       Kernel Smoothing", International Conference on Learning Representations, 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.scoring import smooth_ece
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(2000)
    >>> y = rng.random(2000) < p ** 2  # overconfident in the positive class
    >>> error, h = smooth_ece(y, p, convention="positive_class", return_bandwidth=True)
    >>> round(error, 4), round(h, 4)
    (0.1682, 0.1689)
    """
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    return overall_or_by_group(
        _smooth_ece,
        data,
        groups,
        bandwidth=bandwidth,
        return_bandwidth=return_bandwidth,
        convention=convention,
    )


def _smooth_ece(data, *, bandwidth="auto", return_bandwidth=False, convention="top_label"):
    """:func:`smooth_ece` of checked predictions."""
    bandwidth = _check_smece_bandwidth(bandwidth)
    if not isinstance(return_bandwidth, (bool, np.bool_)):
        raise ValueError(f"Expected `return_bandwidth` to be a bool, got {return_bandwidth!r}.")
    smece = _SmoothECE.from_predictions(data, convention)
    bandwidth = smece.resolve(bandwidth)
    error = smece(bandwidth)
    return (error, bandwidth) if return_bandwidth else error


def smooth_ece_plan(data, *, bandwidth="auto", return_bandwidth=False, convention="top_label"):
    """Resampling plan of :func:`smooth_ece`: grid sums at the full sample's bandwidth.

    It resamples the error alone; ``return_bandwidth`` is accepted as the kernel's option.
    """
    smece = _SmoothECE.from_predictions(data, convention)
    bandwidth = smece.resolve(_check_smece_bandwidth(bandwidth))

    mesh = _smece_mesh(bandwidth)
    return smece.plan(bandwidth, [smece.weight, smece.residual], mesh, _smece_on_mesh)
