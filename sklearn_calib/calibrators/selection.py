"""Choosing a calibrator by cross-fitted held-out score."""

import numbers
import time
import warnings

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.model_selection import check_cv
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import HasMethods, Interval

from .._deprecation import keyword_only
from ..scoring import get_scorer
from ._base import BaseCalibrator, GroupsMixin, takes_groups
from ._repeated_fits import (
    call_recording_warnings,
    check_fold_weights,
    rank_scores,
    reissue_warnings,
)
from .binary import BetaCalibration, QuadraticScaling
from .calibrated_classifier import fit_calibrator
from .platt import PlattScaling
from .structured import StructuredMatrixScaling, StructuredVectorScaling
from .temperature import TemperatureScaling

__all__ = ["CalibratorSelector"]


def default_candidates():
    """The calibrators :class:`CalibratorSelector` compares by default."""
    return [
        TemperatureScaling(),
        StructuredVectorScaling(),
        StructuredMatrixScaling(),
        PlattScaling(),
        QuadraticScaling(),
        BetaCalibration(),
    ]


class _FittedCandidate(ClassifierMixin, BaseEstimator):
    """A fitted calibrator seen as a classifier of its scores, for scikit-learn's scorers.

    Its classes are the column indices, which the held-out labels are encoded as; a
    calibrator that takes group features gets ``groups``, those of the scored rows.
    """

    def __init__(self, calibrator, n_classes, groups=None):
        self.calibrator = calibrator
        self.n_classes = n_classes
        self.groups = groups

    def __sklearn_is_fitted__(self):
        return True

    @property
    def classes_(self):
        return np.arange(self.n_classes)

    def predict_proba(self, scores):
        return _calibrated(self.calibrator, scores, self.groups)

    def predict(self, scores):
        return np.argmax(self.predict_proba(scores), axis=1)


def _with_input(calibrator, kind):
    """A clone of ``calibrator`` told what its scores are (when it has an ``input``)."""
    candidate = clone(calibrator)
    if "input" in candidate.get_params(deep=False):
        candidate.set_params(input=kind)
    return candidate


def _rows(groups, rows):
    """The group features of ``rows`` (None stays None; a DataFrame stays one)."""
    return None if groups is None else _safe_indexing(groups, rows)


def _calibrated(calibrator, scores, groups):
    """``calibrator.predict_proba``, given ``groups`` when it takes group features."""
    if groups is not None and takes_groups(calibrator):
        return calibrator.predict_proba(scores, groups=groups)
    return calibrator.predict_proba(scores)


def _fit_candidate(calibrator, scores, y_index, sample_weight, n_classes, groups):
    """Fit a clone of a calibrator on scores whose labels are column indices (and on the
    group features when it takes them)."""
    return fit_calibrator(
        calibrator,
        scores,
        y_index,
        classes=np.arange(n_classes),
        sample_weight=sample_weight,
        groups=groups if takes_groups(calibrator) else None,
    )


def _score_on_fold(calibrator, scores, y_index, sample_weight, groups, fold, scorer, n_classes):
    """Fit on the training part of a fold; return the held-out score and the fit time."""
    train, test = fold
    train_weight = None if sample_weight is None else sample_weight[train]
    start = time.perf_counter()
    fitted = _fit_candidate(
        calibrator, scores[train], y_index[train], train_weight, n_classes, _rows(groups, train)
    )
    fit_time = time.perf_counter() - start
    kwargs = {} if sample_weight is None else {"sample_weight": sample_weight[test]}
    candidate = _FittedCandidate(fitted, n_classes, _rows(groups, test))
    score = scorer(candidate, scores[test], y_index[test], **kwargs)
    return float(score), fit_time


class CalibratorSelector(GroupsMixin, BaseCalibrator):
    """Pick the best of several calibrators by a cross-fitted held-out score, then refit it.

    For each fold of ``cv`` over the calibration scores, every candidate is fitted on the
    other folds and scored on the held-out one; the candidate with the best mean score
    (the first on ties; ranked as by scikit-learn's ``GridSearchCV``, tied scores sharing a
    rank) is refitted on all the scores and used by ``predict_proba``. Each
    candidate is a clone told the selector's ``input``; candidates fit on folds that may
    lack a class (they are told every class). The selector is a calibrator itself, so it
    can be the ``calibrator`` of :class:`CalibratedClassifier`. Group features given to
    ``fit`` and ``predict_proba`` (``groups=``) go to the candidates that take them, such
    as :class:`MulticalibrationBoosting`; the others calibrate the scores alone.

    Parameters
    ----------
    calibrators : list of calibrators, default=None
        The candidates (any estimator with ``fit(scores, y, sample_weight, classes)`` and
        ``predict_proba(scores)``); None means temperature scaling, structured vector and
        matrix scaling, Platt scaling, quadratic scaling and beta calibration, the leaders
        of Berta et al.'s comparison for multiclass and binary problems.
    scoring : str or callable, default=None
        A scorer (greater is better) or its name for :func:`sklearn_calib.scoring.get_scorer`
        (``"neg_ece"``, ``"neg_brier"``, scikit-learn's names, ...); None means
        ``"neg_nll"``, the negated log loss. scikit-learn's own searches know only its
        names: pass them ``get_scorer("neg_ece")``. A candidate whose mean score is NaN
        (a fold it could not be scored on) ranks last and is never chosen, with a
        warning.
    cv : int, cross-validation generator or iterable, default=5
        Folds of the calibration scores; an int means ``StratifiedKFold(cv)``.
    n_jobs : int, default=None
        Candidates and folds fitted in parallel (joblib); None means 1.
    input : {"logits", "probabilities"}, default="logits"
        What the scores are, passed to every candidate that takes it. See
        :mod:`sklearn_calib.calibrators` for 1-D binary scores.

    Attributes
    ----------
    cv_results_ : dict of ndarrays
        One entry per candidate, in the order given: ``calibrator`` (its repr),
        ``split<i>_test_score``, ``mean_test_score``, ``std_test_score``,
        ``rank_test_score`` (1 is the best) and ``mean_fit_time`` (seconds);
        ``pandas.DataFrame(cv_results_)`` shows the table.
    best_index_ : int
        Index of the chosen candidate.
    best_score_ : float
        Its mean held-out score.
    best_calibrator_ : calibrator
        The chosen candidate, refitted on all the scores.
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).

    See Also
    --------
    sklearn.model_selection.GridSearchCV : The same search for one estimator's parameters.

    References
    ----------
    E. Berta, D. Holzmüller, M. I. Jordan and F. Bach, "Structured Matrix Scaling for
    Multi-Class Calibration", AISTATS 2026.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import (
    ...     CalibratorSelector, IsotonicCalibration, TemperatureScaling)
    >>> rng = np.random.default_rng(0)
    >>> logits = 3 * rng.normal(size=(400, 3))
    >>> y = np.where(rng.random(400) < 0.6, logits.argmax(axis=1), rng.integers(0, 3, 400))
    >>> selector = CalibratorSelector([TemperatureScaling(), IsotonicCalibration()], cv=3)
    >>> selector.fit(logits, y).cv_results_["calibrator"].tolist()
    ['TemperatureScaling()', 'IsotonicCalibration()']
    >>> selector.best_calibrator_
    TemperatureScaling()
    >>> selector.predict_proba(logits[:2]).shape
    (2, 3)
    """

    _parameter_constraints: dict = {
        "calibrators": [list, None],
        "scoring": [str, callable, None],
        "cv": ["cv_object"],
        "n_jobs": [Interval(numbers.Integral, None, None, closed="neither"), None],
        **BaseCalibrator._parameter_constraints,
    }

    @keyword_only("calibrators", "scoring", "cv", "n_jobs", "input")
    def __init__(self, calibrators=None, *, scoring=None, cv=5, n_jobs=None, input="logits"):
        self.calibrators = calibrators
        self.scoring = scoring
        self.cv = cv
        self.n_jobs = n_jobs
        self.input = input

    def _candidates(self):
        candidates = default_candidates() if self.calibrators is None else self.calibrators
        if not candidates:
            raise ValueError("Expected `calibrators` to hold at least one calibrator, got [].")
        check = HasMethods(["fit", "predict_proba"])
        for candidate in candidates:
            if not check.is_satisfied_by(candidate):
                raise ValueError(
                    "Expected every entry of `calibrators` to have fit and predict_proba, "
                    f"got {candidate!r}."
                )
        return [_with_input(candidate, self.input) for candidate in candidates]

    def _fit(self, scores, y_index, sample_weight, groups=None):
        candidates = self._candidates()
        scorer = get_scorer("neg_nll" if self.scoring is None else self.scoring)
        n_classes = scores.shape[1]
        folds = list(check_cv(self.cv, y_index, classifier=True).split(scores, y_index))
        check_fold_weights(folds, sample_weight)
        results = Parallel(n_jobs=self.n_jobs)(
            delayed(call_recording_warnings)(
                _score_on_fold,
                candidate,
                scores,
                y_index,
                sample_weight,
                groups,
                fold,
                scorer,
                n_classes,
            )
            for candidate in candidates
            for fold in folds
        )
        reissue_warnings([record for _, records in results for record in records])
        table = np.array([result for result, _ in results]).reshape(len(candidates), len(folds), 2)
        split_scores, fit_times = table[:, :, 0], table[:, :, 1]
        mean = split_scores.mean(axis=1)
        rank = rank_scores(mean)
        self._check_scores(candidates, mean)
        self.best_index_ = int(np.argmin(rank))
        self.best_score_ = float(mean[self.best_index_])
        self.cv_results_ = {
            "calibrator": np.array([repr(candidate) for candidate in candidates]),
            **{f"split{i}_test_score": split_scores[:, i] for i in range(len(folds))},
            "mean_test_score": mean,
            "std_test_score": split_scores.std(axis=1),
            "rank_test_score": rank,
            "mean_fit_time": fit_times.mean(axis=1),
        }
        self.best_calibrator_ = _fit_candidate(
            candidates[self.best_index_], scores, y_index, sample_weight, n_classes, groups
        )

    @staticmethod
    def _check_scores(candidates, mean):
        """Raise when no candidate has a mean score; warn about those without one."""
        missing = [repr(candidates[i]) for i in np.flatnonzero(np.isnan(mean))]
        if len(missing) == len(candidates):
            raise ValueError(
                "Expected at least one candidate with a held-out score, got NaN for every "
                f"candidate ({', '.join(missing)}); check `scoring` on these scores."
            )
        if missing:
            warnings.warn(
                f"The held-out score of {', '.join(missing)} is NaN on some fold; "
                "it ranks last and is not chosen.",
                UserWarning,
                stacklevel=5,
            )

    def _predict_proba(self, scores, groups=None):
        return _calibrated(self.best_calibrator_, scores, groups)
