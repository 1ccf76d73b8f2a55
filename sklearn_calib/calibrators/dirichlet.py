"""Dirichlet calibration with ODIR penalties chosen by cross-validation (Kull et al. 2019)."""

import numpy as np
from scipy.special import log_softmax
from sklearn.model_selection import check_cv
from sklearn.utils._param_validation import Hidden, StrOptions

from .._deprecation import DEPRECATED, keyword_only, parameter, renamed_attribute
from ._affine_solver import MatrixMap, fit_affine
from ._base import PROBABILITY_FLOOR, softmax
from ._repeated_fits import check_fold_weights, rank_scores
from .linear import MatrixScalingBase, odir_penalty

__all__ = ["DirichletCalibration"]

#: Default grid of both penalty weights.
DEFAULT_GRID = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5)


def _check_grid(values, name):
    """Return a grid of penalty weights as a 1-D float array, largest first."""
    grid = np.asarray(values, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or not (np.isfinite(grid).all() and (grid >= 0).all()):
        raise ValueError(
            f"Expected `{name}` to be a non-empty 1-D sequence of finite numbers >= 0, got "
            f"{values!r}."
        )
    return np.sort(grid)[::-1]


def _weighted_nll(proba, y_index, weight):
    """Weighted mean negative log-likelihood of the true classes (weights of positive sum)."""
    true = np.maximum(proba[np.arange(len(y_index)), y_index], np.finfo(np.float64).tiny)
    if weight is None:
        return float(-np.log(true).mean())
    return float(-(weight @ np.log(true)) / weight.sum())


class DirichletCalibration(MatrixScalingBase):
    """Dirichlet calibration: ``p = softmax(W log q + b)`` with ODIR penalties tuned by CV.

    ``q`` are the probabilities under the scores (``softmax`` of logits), floored at 1e-12
    before the log. The fit minimises the weighted mean NLL plus the ODIR penalties of Kull
    et al.: ``lambda`` times the mean square of the off-diagonal entries of ``W`` plus
    ``mu`` times the mean square of ``b`` (as :class:`MatrixScaling` on ``log q``). Every
    pair ``(lambda, mu)`` of the grids is scored by its held-out NLL over the folds of
    ``cv`` (the mean of the folds' weighted mean NLL, weighted by the folds' total sample
    weight; fitted with the solver of :class:`MatrixScaling`, warm-started along the grid);
    the best pair (the larger penalties on ties) is refitted on all the data.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are. See :mod:`sklearn_calib.calibrators` for 1-D binary scores.
    l2_regularization_off_diagonal_grid : array-like of shape (n_lambdas,), \
default=(1e-1, ..., 1e-5)
        Candidate weights ``lambda`` of the mean square of the off-diagonal entries.
    l2_regularization_intercept_grid : array-like of shape (n_mus,), \
default=(1e-1, ..., 1e-5)
        Candidate weights ``mu`` of the mean square of the bias.
    cv : int, cross-validation generator or iterable, default=5
        Folds of the internal cross-validation; an int means ``StratifiedKFold(cv)``.
    max_iter : int, default=1000
        Largest number of solver steps of each fit.
    tol : float, default=1e-9
        Each fit stops when the decrease of its objective predicted by the next step is at
        most ``tol`` (nats per sample).
    off_diagonal_l2_grid : array-like
        Deprecated name of ``l2_regularization_off_diagonal_grid``.

        .. deprecated:: 0.2
           Renamed ``l2_regularization_off_diagonal_grid``; removed in 0.3.
    intercept_l2_grid : array-like
        Deprecated name of ``l2_regularization_intercept_grid``.

        .. deprecated:: 0.2
           Renamed ``l2_regularization_intercept_grid``; removed in 0.3.

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, n_classes)
        The matrix ``W``.
    intercept_ : ndarray of shape (n_classes,)
        The bias ``b``.
    l2_regularization_off_diagonal_ : float
        The chosen ``lambda``.
    l2_regularization_intercept_ : float
        The chosen ``mu``.
    cv_results_ : dict of ndarrays
        One entry per pair: ``l2_regularization_off_diagonal``,
        ``l2_regularization_intercept``, ``split<i>_test_nll``
        (the weighted mean NLL of held-out fold ``i``), ``mean_test_nll``,
        ``std_test_nll`` and ``rank_test_nll`` (1 is the lowest NLL; tied pairs share a
        rank, as in scikit-learn's ``GridSearchCV``); ``pandas.DataFrame(cv_results_)``
        shows it.
    n_iter_ : int
        Solver steps of the final fit.
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).

    See Also
    --------
    MatrixScaling : The same map on logits with fixed penalties.
    StructuredMatrixScaling : The same map after temperature scaling, published penalties.

    References
    ----------
    M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song and P. Flach, "Beyond
    temperature scaling: Obtaining well-calibrated multiclass probabilities with Dirichlet
    calibration", NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import DirichletCalibration
    >>> rng = np.random.default_rng(0)
    >>> logits = 3 * rng.normal(size=(300, 3))
    >>> y = np.where(rng.random(300) < 0.7, logits.argmax(axis=1), rng.integers(0, 3, 300))
    >>> dirichlet = DirichletCalibration(cv=3).fit(logits, y)
    >>> len(dirichlet.cv_results_["mean_test_nll"])
    25
    >>> dirichlet.coef_.shape
    (3, 3)
    """

    _parameter_constraints: dict = {
        **MatrixScalingBase._parameter_constraints,
        "l2_regularization_off_diagonal_grid": ["array-like"],
        "l2_regularization_intercept_grid": ["array-like"],
        "off_diagonal_l2_grid": [Hidden(StrOptions({DEPRECATED})), "array-like"],
        "intercept_l2_grid": [Hidden(StrOptions({DEPRECATED})), "array-like"],
        "cv": ["cv_object"],
    }
    _renamed_parameters: dict = {
        "off_diagonal_l2_grid": "l2_regularization_off_diagonal_grid",
        "intercept_l2_grid": "l2_regularization_intercept_grid",
    }
    _renamed_attributes: dict = {
        "off_diagonal_l2_": "l2_regularization_off_diagonal_",
        "intercept_l2_": "l2_regularization_intercept_",
    }
    off_diagonal_l2_ = renamed_attribute("off_diagonal_l2_", "l2_regularization_off_diagonal_")
    intercept_l2_ = renamed_attribute("intercept_l2_", "l2_regularization_intercept_")

    @keyword_only("input", "off_diagonal_l2_grid", "intercept_l2_grid", "cv", "max_iter", "tol")
    def __init__(
        self,
        *,
        input="logits",
        l2_regularization_off_diagonal_grid=DEFAULT_GRID,
        l2_regularization_intercept_grid=DEFAULT_GRID,
        cv=5,
        max_iter=1000,
        tol=1e-9,
        off_diagonal_l2_grid=DEPRECATED,
        intercept_l2_grid=DEPRECATED,
    ):
        self.input = input
        self.l2_regularization_off_diagonal_grid = l2_regularization_off_diagonal_grid
        self.l2_regularization_intercept_grid = l2_regularization_intercept_grid
        self.cv = cv
        self.max_iter = max_iter
        self.tol = tol
        self.off_diagonal_l2_grid = off_diagonal_l2_grid
        self.intercept_l2_grid = intercept_l2_grid

    def _features(self, scores):
        if self.input == "probabilities":
            return super()._features(scores)
        return np.maximum(log_softmax(scores.astype(np.float64), axis=1), np.log(PROBABILITY_FLOOR))

    def _fit_features(self, scores, y_index, sample_weight):
        features = self._features(scores)
        grids = [
            _check_grid(parameter(self, name), name)
            for name in ("l2_regularization_off_diagonal_grid", "l2_regularization_intercept_grid")
        ]
        pairs = [(lam, mu) for lam in grids[0] for mu in grids[1]]
        folds = list(check_cv(self.cv, y_index, classifier=True).split(features, y_index))
        check_fold_weights(folds, sample_weight)
        scores_by_fold = np.array(
            [self._fold_scores(features, y_index, sample_weight, fold, pairs) for fold in folds]
        )
        fold_weight = np.array(
            [len(test) if sample_weight is None else sample_weight[test].sum() for _, test in folds]
        )
        mean = np.average(scores_by_fold, axis=0, weights=fold_weight)
        spread = np.sqrt(np.average((scores_by_fold - mean) ** 2, axis=0, weights=fold_weight))
        best = int(np.argmin(mean))
        self.l2_regularization_off_diagonal_, self.l2_regularization_intercept_ = pairs[best]
        self.cv_results_ = {
            "l2_regularization_off_diagonal": np.array([lam for lam, _ in pairs]),
            "l2_regularization_intercept": np.array([mu for _, mu in pairs]),
            **{f"split{i}_test_nll": row for i, row in enumerate(scores_by_fold)},
            "mean_test_nll": mean,
            "std_test_nll": spread,
            "rank_test_nll": rank_scores(-mean),
        }
        return features

    def _fold_scores(self, features, y_index, sample_weight, fold, pairs):
        """Held-out NLL of every pair on one fold, warm-starting each fit from the last."""
        train, test = fold
        n_classes = features.shape[1]
        train_weight = None if sample_weight is None else sample_weight[train]
        test_weight = None if sample_weight is None else sample_weight[test]
        theta = MatrixMap.identity(n_classes)
        scores = []
        for lam, mu in pairs:
            theta, _ = fit_affine(
                MatrixMap,
                features[train],
                y_index[train],
                train_weight,
                penalty=odir_penalty(n_classes, lam, mu),
                reference=MatrixMap.identity(n_classes),
                start=theta,
                max_iter=self.max_iter,
                tol=self.tol,
                name=type(self).__name__,
            )
            proba = softmax(MatrixMap.forward(features[test].T, theta).T)
            scores.append(_weighted_nll(proba, y_index[test], test_weight))
        return scores

    def _penalty(self, n_classes, total_weight):
        return odir_penalty(
            n_classes, self.l2_regularization_off_diagonal_, self.l2_regularization_intercept_
        )
