"""Temperature scaling (Guo et al. 2017) and ensemble temperature scaling (Zhang et al. 2020)."""

import numbers

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from sklearn.utils._param_validation import Interval, StrOptions

from .._deprecation import keyword_only
from ._base import BaseCalibrator, normalised_weights, softmax
from ._dask_fit import fit_temperature
from ._temperature_grid import grid_ece
from ._temperature_solver import fit_inverse_temperature

__all__ = ["EnsembleTemperatureScaling", "TemperatureScaling"]

#: Wang et al.'s (2021) pool of temperatures for the ECE objective: 0.01, 0.02, ..., 10.
DEFAULT_ECE_GRID = np.round(np.arange(1, 1001) * 0.01, 2)


def _check_grid(grid):
    """Return the temperature grid as a 1-D float64 array of positive finite values."""
    if grid is None:
        return DEFAULT_ECE_GRID
    values = np.asarray(grid, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(
            f"Expected `grid` to be a non-empty 1-D sequence of temperatures, got shape "
            f"{values.shape}."
        )
    if not (np.isfinite(values).all() and (values > 0).all()):
        raise ValueError(f"Expected `grid` to hold positive finite temperatures, got {grid!r}.")
    return values


class TemperatureScaling(BaseCalibrator):
    """Temperature scaling: ``p = softmax(z / T)`` with one learned temperature ``T``.

    Dividing all logits by one ``T > 0`` keeps the predicted class and changes only the
    confidence.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are; probabilities become ``log(max(p, 1e-12))``. 1-D scores are
        the positive-class log-odds (or probability) of a binary problem, see
        :mod:`sklearn_calib.calibrators`.
    objective : {"nll", "ece"}, default="nll"
        ``"nll"``: the temperature minimising the (weighted) negative log-likelihood,
        found exactly: the NLL is convex in ``beta = 1/T``, minimised by safeguarded Newton
        steps in float64 (float32 logits are summed in float32 within a row) on
        ``T`` in [1e-4, 1e4], to a relative tolerance of 1e-10 in ``beta`` (1e-6 for
        float32 logits). If the NLL still decreases at a bound (scores that separate the
        classes) the bound is used and a ``ConvergenceWarning`` is raised; if the NLL does
        not depend on ``T`` (the scores tie within every row, so every ``T`` is optimal)
        ``T = 1`` with a ``UserWarning``; a search that does not converge raises
        ``RuntimeError``. ``"ece"``: the grid search of Wang et al. and Mukhoti et al., the
        temperature of ``grid`` with the lowest expected calibration error (top-label,
        equal-width bins, :func:`sklearn_calib.scoring.expected_calibration_error`) on the
        fit data; the first one on ties.
    grid : array-like of shape (n_temperatures,), default=None
        Temperatures searched by ``objective="ece"``; None means Wang et al.'s pool
        0.01, 0.02, ..., 10 (1000 values). Ignored by ``objective="nll"``.
    n_bins : int, default=15
        Number of bins of the ECE objective.

    Attributes
    ----------
    temperature_ : float
        The fitted temperature.
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).
    n_iter_ : int
        Passes over the fit data: Newton evaluations for ``"nll"``, grid size for ``"ece"``.

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On Calibration of Modern Neural
    Networks", ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import TemperatureScaling
    >>> logits = np.array([[4.0, 0.0], [0.0, 4.0], [3.0, 0.0], [0.0, 2.0]])
    >>> ts = TemperatureScaling().fit(logits, [0, 1, 1, 1])
    >>> ts.predict_proba(logits).argmax(axis=1)
    array([0, 1, 0, 1])
    """

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "objective": [StrOptions({"nll", "ece"})],
        "grid": ["array-like", None],
        "n_bins": [Interval(numbers.Integral, 1, None, closed="left")],
    }

    @keyword_only("input", "objective", "grid", "n_bins")
    def __init__(self, *, input="logits", objective="nll", grid=None, n_bins=15):
        self.input = input
        self.objective = objective
        self.grid = grid
        self.n_bins = n_bins

    def _fit(self, scores, y_index, sample_weight):
        logits = self._logits(scores)
        if self.objective == "nll":
            beta, self.n_iter_ = fit_inverse_temperature(logits, y_index, sample_weight)
            self.temperature_ = 1.0 / beta
            return
        grid = _check_grid(self.grid)
        errors = grid_ece(logits, y_index, grid, n_bins=self.n_bins, sample_weight=sample_weight)
        self.temperature_ = float(grid[int(np.argmin(errors))])
        self.n_iter_ = len(grid)

    def _predict_proba(self, scores):
        return softmax(self._logits(scores), 1.0 / self.temperature_)

    def _fit_dask(self, scores, y, sample_weight, classes):
        fit_temperature(self, scores, y, sample_weight, classes)


def _brier(proba, y_index, sample_weight):
    """Weighted mean over samples of ``sum_k (p_k - 1[y = k])^2``."""
    rows = np.arange(proba.shape[0])
    per_sample = np.einsum("ij,ij->i", proba, proba) - 2 * proba[rows, y_index] + 1
    return np.average(per_sample, weights=sample_weight)


def _simplex_quadratic_minimum(gram, linear):
    """Minimise ``w' G w - 2 c' w`` over the probability simplex exactly.

    Every face of the simplex is tried: on a face the minimiser solves the KKT system of
    the equality-constrained problem; the best feasible candidate is returned.
    """
    n = len(linear)
    best, best_value = None, np.inf
    for mask in range(1, 1 << n):
        face = [j for j in range(n) if mask >> j & 1]
        size = len(face)
        system = np.zeros((size + 1, size + 1))
        system[:size, :size] = 2 * gram[np.ix_(face, face)]
        system[:size, size] = 1.0
        system[size, :size] = 1.0
        rhs = np.concatenate([2 * linear[face], [1.0]])
        solution = np.linalg.lstsq(system, rhs, rcond=None)[0][:size]
        if (solution < -1e-12).any() or abs(solution.sum() - 1) > 1e-9:
            continue
        weights = np.zeros(n)
        weights[face] = np.clip(solution, 0, None)
        weights /= weights.sum()
        value = weights @ gram @ weights - 2 * linear @ weights
        if value < best_value - 1e-15:
            best, best_value = weights, value
    return best


class EnsembleTemperatureScaling(BaseCalibrator):
    """Ensemble temperature scaling (ETS, Zhang, Kailkhura and Han 2020).

    The calibrated probabilities are a convex combination of three components:
    ``p = w_0 softmax(z / T) + w_1 softmax(z) + w_2 / K``: temperature scaling, the
    uncalibrated model (T = 1) and the uniform distribution (T = infinity), with
    ``w >= 0``, ``sum(w) = 1``.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are, see :class:`TemperatureScaling`.
    loss : {"mse", "nll"}, default="mse"
        Loss minimised for both the temperature and the weights. ``"mse"`` (the authors'
        reference code): the Brier score; the temperature is a bounded scalar minimum on
        ``T`` in [0.05, 5] (the reference code's bounds), the weights the exact
        minimiser of the (quadratic) Brier score over the simplex. ``"nll"``: the exact
        NLL temperature of :class:`TemperatureScaling`, then the weights minimising the
        NLL of the mixture over the simplex (SLSQP from ``(0.8, 0.1, 0.1)``).

    Attributes
    ----------
    temperature_ : float
        Temperature of the first component.
    weights_ : ndarray of shape (3,)
        Weights of the temperature-scaled, uncalibrated and uniform components.
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).

    References
    ----------
    J. Zhang, B. Kailkhura and T. Y.-J. Han, "Mix-n-Match: Ensemble and Compositional
    Methods for Uncertainty Calibration in Deep Learning", ICML 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import EnsembleTemperatureScaling
    >>> logits = np.array([[4.0, 0.0], [0.0, 4.0], [3.0, 0.0], [0.0, 2.0]])
    >>> ets = EnsembleTemperatureScaling().fit(logits, [0, 1, 1, 1])
    >>> float(ets.weights_.sum())
    1.0
    """

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "loss": [StrOptions({"mse", "nll"})],
    }

    @keyword_only("input", "loss")
    def __init__(self, *, input="logits", loss="mse"):
        self.input = input
        self.loss = loss

    def _components(self, logits, temperature):
        uniform = np.full(logits.shape, 1.0 / logits.shape[1])
        return softmax(logits, 1.0 / temperature), softmax(logits), uniform

    def _fit(self, scores, y_index, sample_weight):
        logits = self._logits(scores).astype(np.float64)
        if self.loss == "nll":
            beta, _ = fit_inverse_temperature(logits, y_index, sample_weight)
            temperature = 1.0 / beta
        else:
            result = minimize_scalar(
                lambda log_t: _brier(softmax(logits, np.exp(-log_t)), y_index, sample_weight),
                bounds=(np.log(0.05), np.log(5.0)),
                method="bounded",
                options={"xatol": 1e-10},
            )
            temperature = float(np.exp(result.x))
        components = self._components(logits, temperature)
        if self.loss == "mse":
            weights = self._mse_weights(components, y_index, sample_weight)
        else:
            weights = self._nll_weights(components, y_index, sample_weight)
        self.temperature_ = temperature
        self.weights_ = weights

    @staticmethod
    def _mse_weights(components, y_index, sample_weight):
        rows = np.arange(len(y_index))
        n = len(components)
        gram = np.empty((n, n))
        for j in range(n):
            for k in range(j, n):
                inner = np.einsum("ij,ij->i", components[j], components[k])
                gram[j, k] = gram[k, j] = np.average(inner, weights=sample_weight)
        linear = np.array([np.average(c[rows, y_index], weights=sample_weight) for c in components])
        return _simplex_quadratic_minimum(gram, linear)

    @staticmethod
    def _nll_weights(components, y_index, sample_weight):
        rows = np.arange(len(y_index))
        true_proba = np.column_stack([c[rows, y_index] for c in components])
        weight = normalised_weights(len(y_index), sample_weight)

        def nll(w):
            mixture = np.maximum(true_proba @ w, np.finfo(np.float64).tiny)
            return -weight @ np.log(mixture), -(weight / mixture) @ true_proba

        result = minimize(
            nll,
            np.array([0.8, 0.1, 0.1]),
            jac=True,
            method="SLSQP",
            bounds=[(0.0, 1.0)] * 3,
            constraints={"type": "eq", "fun": lambda w: w.sum() - 1.0},
            options={"ftol": 1e-14, "maxiter": 1000},
        )
        weights = np.clip(result.x, 0.0, None)
        return weights / weights.sum()

    def _predict_proba(self, scores):
        logits = self._logits(scores).astype(np.float64)
        components = self._components(logits, self.temperature_)
        return sum(w * c for w, c in zip(self.weights_, components, strict=True))
