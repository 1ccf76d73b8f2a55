"""smECE and SECE from sums linearly binned on a fixed grid of [0, 1], with error bounds.

A fixed-memory summary of many samples keeps, on ``n`` equally spaced points of [0, 1],
the linearly binned sums of the weights, weighted scores and weighted outcomes (the
samples themselves are gone). From those:

- :func:`grid_smooth_ece`: smECE at any bandwidth. smECE bins the samples linearly on its
  own grid of ``m`` points; when ``m - 1`` divides ``n - 1`` its grid is a subset of the
  fine one, and binning the fine grid's sums onto it gives smECE's own grid sums exactly
  (a hat function of the coarse grid is linear between fine points), so the value is
  that of :func:`~sklearn_calib.metrics.smooth_ece` up to rounding. Otherwise the mass
  of the samples that lie in a fine cell around a coarse point is moved by at most
  ``d_fine / (2 d_coarse)`` of itself, and the bound follows through smECE's (linear,
  non-negative) smoothing.
- :func:`grid_sece`: SECE at any bandwidth, with the kernel sums of the grid (as the
  binned SECE) and the mean over samples replaced by the mean over grid points; the
  bound adds, cell by cell, the linear interpolation error of ``|SACC(r) - r|``, from
  bounds on the first two derivatives of SACC that kernel-derivative sums give.
"""

import math

import numpy as np
from scipy.signal import fftconvolve

from .._functions._sece import _TRUNCATION, SECE_EPS, fft_rounding, kernel_grid_sums
from .._functions._smece import (
    _SMECE_DENSITY_EPS,
    _smece_from_grid,
    _smece_grid_size,
    _smece_mesh,
    fixed_point_bandwidth,
    interpolate_on_mesh,
    reflected_smoothing,
)


def rebin_grid(sums, n_points):
    """Linearly bin sums on ``n_fine`` points of [0, 1] onto ``n_points`` points.

    Parameters
    ----------
    sums : ndarray of shape (n_rows, n_fine)
        Linearly binned sums on a fine grid.
    n_points : int
        Points of the coarse grid.

    Returns
    -------
    coarse : ndarray of shape (n_rows, n_points)
        Exactly the linearly binned sums of the same samples when ``n_points - 1``
        divides ``n_fine - 1`` (up to rounding).
    """
    n_fine = sums.shape[-1]
    scaled = np.arange(n_fine, dtype=np.int64) * (n_points - 1)
    index = np.minimum(scaled // (n_fine - 1), n_points - 2)
    frac = (scaled - index * (n_fine - 1)) / (n_fine - 1)
    coarse = np.empty(sums.shape[:-1] + (n_points,))
    for row in np.ndindex(sums.shape[:-1]):
        coarse[row] = np.bincount(index, sums[row] * (1.0 - frac), minlength=n_points)
        coarse[row] += np.bincount(index + 1, sums[row] * frac, minlength=n_points)
    return coarse


def _rebinning_moves(weight_sums, n_points):
    """Bound on the change of each coarse point's sum by :func:`rebin_grid`, per unit |value|.

    A coarse point strictly inside a fine cell is a kink of three hat functions; the
    samples of that cell (weight at most the sum of the cell's two fine points) see each
    of those hats off by at most the slope change times ``d_fine / 4``.
    """
    n_fine = weight_sums.shape[0]
    knots = np.arange(n_points, dtype=np.int64) * (n_fine - 1)
    cell, remainder = np.divmod(knots, n_points - 1)
    inside = remainder != 0
    mass = np.zeros(n_points)
    mass[inside] = weight_sums[cell[inside]] + weight_sums[np.minimum(cell[inside] + 1, n_fine - 1)]
    # slope change 2 / d_coarse at a hat's peak, 1 / d_coarse at its feet; d_fine / 4 each
    ratio = (n_points - 1) / (n_fine - 1) / 4.0
    moves = 2.0 * ratio * mass
    moves[1:] += ratio * mass[:-1]
    moves[:-1] += ratio * mass[1:]
    return moves


def grid_smooth_ece(grid, n_positive, bandwidth="auto"):
    """smECE from fine-grid sums of weight, weighted score and weighted outcome.

    Parameters
    ----------
    grid : ndarray of shape (3, n_fine)
        Linearly binned sums of ``w``, ``w s`` and ``w y`` on ``n_fine`` points of [0, 1].
    n_positive : int
        Number of samples of positive weight (the density's epsilon follows their mean
        weight).
    bandwidth : "auto" or float, default="auto"
        As :func:`~sklearn_calib.metrics.smooth_ece`.

    Returns
    -------
    error : float
    bandwidth : float
    bound : float
        Largest difference from smECE of the samples themselves (0 up to rounding when
        the grids nest).
    """
    weight = grid[0]
    sums = np.stack([weight, grid[1] - grid[2]])
    eps = _SMECE_DENSITY_EPS * float(weight.sum()) / n_positive
    coarse = {}

    def coarse_sums(h):
        n_points = _smece_grid_size(h)
        if n_points not in coarse:
            coarse[n_points] = rebin_grid(sums, n_points)
        return coarse[n_points]

    def smece_at(h):
        return float(_smece_from_grid(coarse_sums(h), h, eps))

    if bandwidth == "auto":
        bandwidth = fixed_point_bandwidth(smece_at)
    error = smece_at(bandwidth)
    n_points = _smece_grid_size(bandwidth)
    if (weight.shape[0] - 1) % (n_points - 1) == 0:
        return error, bandwidth, 0.0
    moves = _rebinning_moves(weight, n_points)
    mesh = _smece_mesh(bandwidth)
    spread = float(interpolate_on_mesh(reflected_smoothing(moves, bandwidth), mesh).sum())
    density = interpolate_on_mesh(reflected_smoothing(coarse_sums(bandwidth)[0], bandwidth), mesh)
    denominator = float((density + eps).sum())
    if spread >= denominator:
        return error, bandwidth, math.inf
    return error, bandwidth, (spread + error * spread) / (denominator - spread)


def _majorant_sums(weight, step, bandwidth, n_taps):
    """Grid sums of the kernel's extreme values over offsets within two grid steps.

    Returns the lower bound of the kernel sum and upper bounds of the sums of ``|K'|`` and
    ``|K''|`` over every point of a cell, ``K(d) = exp(-d^2 / (2 h^2))``.
    """
    distance = np.abs(np.arange(-n_taps, n_taps + 1)) * step
    window = 2.0 * step
    low = np.maximum(distance - window, 0.0) / bandwidth
    high = (distance + window) / bandwidth

    def first(a):  # |K'| h at a = |d| / h
        return a * np.exp(-(a**2) / 2.0)

    def second(a):  # |K''| h^2
        return np.abs(a**2 - 1.0) * np.exp(-(a**2) / 2.0)

    kernel_low = np.exp(-(high**2) / 2.0)
    first_high = first(np.clip(1.0, low, high))
    second_high = np.maximum(second(low), second(high))
    root3 = math.sqrt(3.0)
    second_high = np.where(
        (low <= root3) & (root3 <= high), np.maximum(second_high, second(root3)), second_high
    )
    total = float(weight.sum())
    beyond = max(_TRUNCATION - 2.0 * step / bandwidth, 1.0)
    result = []
    for taps, tail in (
        (kernel_low, 0.0),
        (first_high / bandwidth, first(beyond) / bandwidth),
        (second_high / bandwidth**2, second(max(beyond, root3)) / bandwidth**2),
    ):
        rounding = fft_rounding(weight.shape[0] + taps.shape[0], taps) * total
        summed = fftconvolve(weight, taps, mode="same")
        result.append(summed - rounding if tail == 0.0 else summed + rounding + tail * total)
    return result


def grid_sece(grid, n_positive, bandwidth):
    """SECE (include_self) from fine-grid sums, and a bound on its distance to the exact one.

    Parameters
    ----------
    grid : ndarray of shape (3, n_fine)
        Linearly binned sums of ``w``, ``w s`` and ``w y`` on ``n_fine`` points of [0, 1].
    n_positive : int
        Number of samples of positive weight (SECE's epsilon follows their mean weight).
    bandwidth : float
        Kernel bandwidth ``h``.

    Returns
    -------
    error : float
    bound : float
        Largest difference from ``smooth_calibration_error(..., method="exact")``.
    """
    weight, outcome = grid[0], grid[2]
    n_fine = weight.shape[0]
    step = 1.0 / (n_fine - 1)
    points = np.arange(n_fine) * step
    total = float(weight.sum())
    eps = SECE_EPS * total / n_positive
    smoothed, rho, absolute = kernel_grid_sums(np.stack([outcome, weight]), bandwidth, step)
    numerator, denominator = smoothed
    absolute *= total
    numerator_error = (rho * np.abs(numerator) + absolute) / (1.0 - rho)
    denominator_error = (rho * np.abs(denominator) + absolute) / (1.0 - rho)
    denominator = denominator + eps
    gap = numerator / denominator - points
    error = float(weight @ np.abs(gap)) / total
    with np.errstate(divide="ignore", invalid="ignore"):
        value_error = np.where(
            denominator > denominator_error,
            (numerator_error + denominator_error) / (denominator - denominator_error),
            np.inf,
        )
    # the interpolation of |SACC(r) - r| between two grid points, cell by cell
    n_taps = min(int(math.ceil(_TRUNCATION * bandwidth / step)) + 2, n_fine)
    lowest, first, second = _majorant_sums(weight, step, bandwidth, n_taps)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = first / np.maximum(lowest + eps, eps)
        curvature = second / np.maximum(lowest + eps, eps) + 2.0 * slope**2
    smooth_part = step**2 / 8.0 * curvature[:-1]
    margin = np.minimum(np.abs(gap[:-1]) - value_error[:-1], np.abs(gap[1:]) - value_error[1:])
    same_sign = (np.sign(gap[:-1]) == np.sign(gap[1:])) & (margin > smooth_part)
    cell_error = np.where(same_sign, smooth_part, (1.0 + slope[:-1]) * step / 2.0)
    point_error = np.zeros(n_fine)
    point_error[:-1] = cell_error
    point_error[1:] = np.maximum(point_error[1:], cell_error)
    held = weight > 0
    bound = float(weight[held] @ (value_error[held] + point_error[held])) / total
    return error, bound
