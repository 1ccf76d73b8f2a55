"""The smooth ECE, smECE (Błasiok & Nakkiran 2024), and its resampling plan.

smECE smooths the residuals with a Gaussian kernel reflected at 0 and 1 on a mesh, with
the discretisation of the authors' package, and chooses its bandwidth as a fixed point.
"""

import numpy as np
from scipy.signal import fftconvolve

from ..._validation import check_number
from .._core._binning import linear_binning
from .._core._dispatch import dask_aware
from .._core._group_rows import overall_or_by_group
from .._core._resampling import ResamplingPlan
from .._core._weights import mean_weight
from .._fused._bins import grid_sums
from ._predictions import check_predictions

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


def _smece_grid_size(bandwidth):
    return max(_SMECE_MIN_GRID, round(20 / bandwidth)) // 2 + 1


def _smece_mesh(bandwidth):
    return np.linspace(0.0, 1.0, max(_SMECE_MIN_MESH, round(10 / bandwidth)))


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
            self._grids[n_points] = grid_sums(index, frac, columns, n_points, group, 1)[:, 0]
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
            grids = grid_sums(index, frac, columns, n_points, group, n_groups)
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
        The smECE, in [0, 1].
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
