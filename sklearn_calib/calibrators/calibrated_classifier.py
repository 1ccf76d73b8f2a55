"""A classifier and a post-hoc calibrator fitted together as one scikit-learn classifier."""

import inspect
import math
import numbers
import warnings

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    MetaEstimatorMixin,
    _fit_context,
    clone,
)
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import check_cv, train_test_split
from sklearn.utils import _safe_indexing, check_random_state, get_tags, indexable
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import (
    check_is_fitted,
    column_or_1d,
    has_fit_parameter,
)

from .._validation import check_class_labels, check_sample_weight, encode_labels, select_columns
from ._base import takes_groups
from .temperature import TemperatureScaling


def _scores(estimator, X):
    """Return the scores fed to the calibrator and the method that gave them."""
    if hasattr(estimator, "decision_function"):
        return estimator.decision_function(X), "decision_function"
    return estimator.predict_proba(X), "predict_proba"


def _fit_on_part(estimator, X, y, train, sample_weight, classes, part):
    """Fit a clone of ``estimator`` on the rows ``train``; check that it saw every class."""
    estimator = clone(estimator)
    fit_params = {} if sample_weight is None else {"sample_weight": sample_weight[train]}
    estimator.fit(_safe_indexing(X, train), y[train], **fit_params)
    if not np.array_equal(np.asarray(estimator.classes_), classes):
        raise ValueError(
            f"The estimator was fitted on {part}, which holds only the classes "
            f"{np.asarray(estimator.classes_).tolist()} of {classes.tolist()}; use a smaller "
            "`calibration_size`, fewer or stratified `cv` folds."
        )
    return estimator


def _fit_fold(estimator, X, y, train, test, sample_weight, classes, part):
    """Fit a clone on a fold's training rows and score its held-out rows."""
    fitted = _fit_on_part(estimator, X, y, train, sample_weight, classes, part)
    scores, method = _scores(fitted, _safe_indexing(X, test))
    return fitted, scores, method


def _fit_calibrator(
    calibrator, estimator, scores, score_method, y, sample_weight, part, groups=None
):
    """Fit a clone of ``calibrator`` on the estimator's scores of ``part`` (and on their
    group features, ``groups``, when given).

    A calibrator that fails on a part lacking a class (a held-out fold may hold a single
    class, which the calibrator is told is one of several) raises a ValueError naming the
    part and the fix; other errors (such as scores out of range) pass unchanged.
    """
    fitted = clone(calibrator)
    if "input" in fitted.get_params():
        fitted.set_params(
            input="logits" if score_method == "decision_function" else "probabilities"
        )
    try:
        if groups is not None:
            fitted.fit(
                scores, y, sample_weight=sample_weight, classes=estimator.classes_, groups=groups
            )
        elif "classes" in inspect.signature(fitted.fit).parameters:
            fitted.fit(scores, y, sample_weight=sample_weight, classes=estimator.classes_)
        else:
            y_index = encode_labels(y, estimator.classes_)
            fitted.fit(scores, y_index, sample_weight=sample_weight)
    except ValueError as exc:
        present = np.unique(y).tolist()
        if len(present) == len(estimator.classes_):
            raise
        raise ValueError(
            f"The calibrator could not be fitted on {part} ({len(y)} samples, classes "
            f"{present}): {exc} Use stratified `cv` folds (an int `cv` gives "
            "StratifiedKFold), fewer folds, or ensemble=False (one calibrator on the "
            "held-out scores of all folds)."
        ) from exc
    return fitted


def _one_of_each_class(train, calibration, y, classes, random_state):
    """Move one random training row of each class the calibration part lacks into it."""
    missing = np.setdiff1d(classes, y[calibration])
    if not missing.size:
        return train, calibration
    moved = [random_state.choice(train[y[train] == label]) for label in missing]
    return train[~np.isin(train, moved)], np.concatenate([calibration, moved])


class CalibratedClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """Fit a classifier and a post-hoc calibrator of its scores, predict calibrated.

    The calibrator is fed the classifier's ``decision_function`` as logits when the
    classifier has one (a 1-D binary decision function is the positive-class log-odds),
    otherwise its ``predict_proba`` as probabilities (the calibrator takes
    ``log(max(p, 1e-12))`` where it needs logits). A clone of ``calibrator`` gets its
    ``input`` parameter set accordingly; ``score_method_`` records which method was used.
    Both models are tuned together by nested parameters, for example
    ``GridSearchCV(CalibratedClassifier(LogisticRegression()), {"estimator__C": [0.1, 1],
    "calibrator": [TemperatureScaling(), HistogramBinning()]})``.

    Parameters
    ----------
    estimator : classifier
        The classifier to calibrate; it needs ``fit``, ``classes_`` and
        ``decision_function`` or ``predict_proba``.
    calibrator : calibrator, default=None
        A calibrator of :mod:`sklearn_calib.calibrators` (or any estimator with
        ``fit(scores, y, sample_weight)`` and ``predict_proba(scores)``); None means
        ``TemperatureScaling()``. Set it explicitly to tune its parameters as
        ``calibrator__<name>``.
    method : {"holdout", "cv", "prefit"}, default="holdout"
        ``"holdout"``: a stratified split; the estimator is fitted on one part and the
        calibrator on the other (``calibration_size``). ``"cv"``: for each fold of ``cv``
        a clone of the estimator is fitted on the training folds and scores the held-out
        fold; with ``ensemble=True`` a calibrator is fitted on each held-out fold and
        ``predict_proba`` averages the calibrated probabilities of the folds, with
        ``ensemble=False`` one calibrator is fitted on the held-out scores of all folds and
        paired with the estimator fitted on all of ``X`` (scikit-learn's
        ``CalibratedClassifierCV`` semantics). ``"prefit"``: the
        estimator is already fitted; it is wrapped in
        :class:`~sklearn.frozen.FrozenEstimator` and all of ``X`` calibrates. An
        estimator that is a ``FrozenEstimator`` is treated as ``"prefit"`` whatever
        ``method`` says, since it cannot learn from a training part.
    calibration_size : float or int, default=0.1
        For ``"holdout"``: the fraction (float in (0, 1)) or number (int) of samples that
        calibrate, raised where needed to one per class: after the stratified split, one
        random training sample of each class the calibration part lacks moves into it.
    cv : int, cross-validation generator or iterable, default=5
        Folds for ``"cv"``; an int means ``StratifiedKFold(cv)``. Every fold's training
        part must hold every class. A held-out fold may hold a single class: the
        calibrator is told all the classes (temperature scaling, for one, is defined
        there); a calibrator that cannot fit such a fold raises an error naming the fold.
        ``ensemble=False`` needs folds that partition the samples.
    ensemble : bool, default=True
        For ``"cv"``: one calibrated estimator per fold, averaged (True), or one
        calibrator on all the held-out scores with the estimator refitted on all the data
        (False). Ignored by the other methods.
    n_jobs : int, default=None
        Folds of ``"cv"`` fitted in parallel (joblib); None means 1.
    random_state : int, RandomState instance or None, default=None
        Seed of the ``"holdout"`` split.
    group_features : int, str, array-like, slice, callable or None, default=None
        The columns of ``X`` passed to the calibrator as its group features (``groups=``)
        in ``fit`` and ``predict_proba``, read as scikit-learn's ``ColumnTransformer``
        reads a column selector: indices, DataFrame column names, a boolean mask, a
        slice, or a callable of ``X``. The calibrator must take ``groups``, such as
        :class:`MulticalibrationBoosting`; the fitted model then needs nothing but ``X``.

    Attributes
    ----------
    estimators_ : list of classifiers
        The fitted estimator of each calibration (one, or one per fold for ``"cv"`` with
        ``ensemble=True``).
    calibrators_ : list of calibrators
        The fitted calibrator paired with each of ``estimators_``.
    score_method_ : {"decision_function", "predict_proba"}
        The estimator method that fed the calibrator.
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_features_in_ : int
        Number of features seen by the estimator, when it records it.

    See Also
    --------
    sklearn.calibration.CalibratedClassifierCV : scikit-learn's sigmoid, isotonic and
        temperature calibration.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_calib.calibrators import CalibratedClassifier
    >>> X, y = make_classification(300, n_informative=4, n_classes=3, random_state=0)
    >>> clf = CalibratedClassifier(LogisticRegression(), calibration_size=0.3, random_state=0)
    >>> clf.fit(X, y).predict_proba(X[:2]).shape
    (2, 3)
    >>> clf.score_method_
    'decision_function'
    """

    _parameter_constraints: dict = {
        "estimator": [
            HasMethods(["fit", "decision_function"]),
            HasMethods(["fit", "predict_proba"]),
        ],
        "calibrator": [HasMethods(["fit", "predict_proba"]), None],
        "method": [StrOptions({"holdout", "cv", "prefit"})],
        "calibration_size": [
            Interval(numbers.Real, 0, 1, closed="neither"),
            Interval(numbers.Integral, 1, None, closed="left"),
        ],
        "cv": ["cv_object"],
        "ensemble": ["boolean"],
        "n_jobs": [Interval(numbers.Integral, None, None, closed="neither"), None],
        "random_state": ["random_state"],
        "group_features": "no_validation",
    }

    def __init__(
        self,
        estimator,
        calibrator=None,
        method="holdout",
        calibration_size=0.1,
        cv=5,
        ensemble=True,
        n_jobs=None,
        random_state=None,
        group_features=None,
    ):
        self.estimator = estimator
        self.calibrator = calibrator
        self.method = method
        self.calibration_size = calibration_size
        self.cv = cv
        self.ensemble = ensemble
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.group_features = group_features

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None):
        """Fit the estimator (unless prefit) and the calibrator.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data, in whatever form the estimator takes.
        y : array-like of shape (n_samples,)
            Labels of any type.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, passed to the calibrator and, when its ``fit`` takes
            them, to the estimator.

        Returns
        -------
        self : object
            Fitted classifier.
        """
        X, y = indexable(X, y)
        y = column_or_1d(y, warn=True)
        if len(y) == 0:
            raise ValueError("Expected at least one sample to fit, got 0.")
        check_class_labels(y)
        sample_weight = check_sample_weight(sample_weight, len(y))
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(
                f"Expected `y` to hold at least 2 classes, got 1 class ({classes[0]!r})."
            )
        if self.method == "prefit" or isinstance(self.estimator, FrozenEstimator):
            parts = self._prefit_parts(X, y)
        elif self.method == "holdout":
            parts = self._holdout_parts(X, y, classes, sample_weight)
        else:
            parts = self._cv_parts(X, y, classes, sample_weight)
        calibrator = TemperatureScaling() if self.calibrator is None else self.calibrator
        features = self._group_features(X, calibrator)
        estimators, calibrators = [], []
        for estimator, scores, score_method, rows, part in parts:
            weight = None if sample_weight is None else sample_weight[rows]
            groups = None if features is None else _safe_indexing(features, rows)
            calibrators.append(
                _fit_calibrator(
                    calibrator, estimator, scores, score_method, y[rows], weight, part, groups
                )
            )
            estimators.append(estimator)
        self.estimators_ = estimators
        self.calibrators_ = calibrators
        self.score_method_ = parts[0][2]
        self.classes_ = np.asarray(estimators[0].classes_)
        for name in ("n_features_in_", "feature_names_in_"):
            # copied from the estimator, or dropped when a refit's estimator lacks them
            if hasattr(estimators[0], name):
                setattr(self, name, getattr(estimators[0], name))
            elif name in vars(self):
                delattr(self, name)
        return self

    def _group_features(self, X, calibrator):
        """The columns of ``X`` named by ``group_features`` (None without them)."""
        if self.group_features is None:
            return None
        if not takes_groups(calibrator):
            raise ValueError(
                f"`group_features` needs a calibrator that takes group features (`groups=`), "
                f"such as MulticalibrationBoosting; {type(calibrator).__name__} does not."
            )
        return select_columns(X, self.group_features)

    def _prefit_parts(self, X, y):
        """The frozen fitted estimator, scoring all rows for calibration."""
        estimator = self.estimator
        if not isinstance(estimator, FrozenEstimator):
            check_is_fitted(estimator)
            estimator = FrozenEstimator(estimator)
        unknown = np.setdiff1d(np.unique(y), estimator.classes_)
        if unknown.size:
            raise ValueError(
                f"`y` holds labels the prefit estimator does not know: {unknown.tolist()}; "
                f"its classes are {list(estimator.classes_)}."
            )
        scores, method = _scores(estimator, X)
        return [(estimator, scores, method, np.arange(len(y)), "all the data")]

    def _estimator_weights(self, sample_weight):
        """The weights the estimator is fitted with (None when its fit does not take any)."""
        supports_weight = has_fit_parameter(self.estimator, "sample_weight")
        if sample_weight is not None and not supports_weight:
            warnings.warn(
                f"{type(self.estimator).__name__}.fit does not take sample_weight; the "
                "weights are used by the calibrator only.",
                UserWarning,
                stacklevel=4,
            )
        return sample_weight if supports_weight else None

    def _holdout_parts(self, X, y, classes, sample_weight):
        """The estimator fitted on a stratified training part, scoring the rest."""
        n_samples = len(y)
        size = self.calibration_size
        if isinstance(size, numbers.Integral):
            n_calibration = int(size)
        else:
            n_calibration = math.ceil(float(size) * n_samples)
        n_calibration = max(n_calibration, len(classes))
        random_state = check_random_state(self.random_state)
        train, calibration = train_test_split(
            np.arange(n_samples), test_size=n_calibration, stratify=y, random_state=random_state
        )
        train, calibration = _one_of_each_class(train, calibration, y, classes, random_state)
        weight = self._estimator_weights(sample_weight)
        fitted, scores, method = _fit_fold(
            self.estimator, X, y, train, calibration, weight, classes, "the training part"
        )
        return [(fitted, scores, method, calibration, "the calibration part")]

    def _cv_parts(self, X, y, classes, sample_weight):
        """Estimators fitted on the training folds, with their held-out scores.

        With ``ensemble=False`` the held-out scores of all folds go to one calibrator,
        paired with the estimator fitted on all the data.
        """
        folds = list(check_cv(self.cv, y, classifier=True).split(X, y))
        weight = self._estimator_weights(sample_weight)
        jobs = [
            delayed(_fit_fold)(
                self.estimator,
                X,
                y,
                train,
                test,
                weight,
                classes,
                f"the training part of fold {i} of {len(folds)}",
            )
            for i, (train, test) in enumerate(folds, 1)
        ]
        if not self.ensemble:
            every = np.arange(len(y))
            jobs.append(
                delayed(_fit_on_part)(self.estimator, X, y, every, weight, classes, "all the data")
            )
        fitted = Parallel(n_jobs=self.n_jobs)(jobs)
        if self.ensemble:
            return [
                (estimator, scores, method, test, f"held-out fold {i} of {len(folds)}")
                for i, ((estimator, scores, method), (_, test)) in enumerate(
                    zip(fitted, folds, strict=True), 1
                )
            ]
        held_out = np.concatenate([test for _, test in folds])
        if not np.array_equal(np.sort(held_out), np.arange(len(y))):
            raise ValueError(
                "ensemble=False calibrates on the held-out scores of every sample once, so it "
                "needs `cv` folds that partition the samples (each sample held out exactly "
                "once), such as KFold or StratifiedKFold."
            )
        order = np.argsort(held_out, kind="stable")
        scores = np.concatenate([scores for _, scores, _ in fitted[:-1]])[order]
        return [(fitted[-1], scores, fitted[0][2], np.arange(len(y)), "the held-out scores")]

    def predict_proba(self, X):
        """Return calibrated class probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data, in whatever form the estimator takes.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Mean over ``estimators_`` of the calibrated probabilities; columns follow
            ``classes_``.
        """
        check_is_fitted(self)
        options = {}
        if self.group_features is not None:
            options["groups"] = select_columns(X, self.group_features)
        proba = None
        for estimator, calibrator in zip(self.estimators_, self.calibrators_, strict=True):
            calibrated = calibrator.predict_proba(_scores(estimator, X)[0], **options)
            proba = calibrated if proba is None else proba + calibrated
        return proba / len(self.estimators_)

    def predict(self, X):
        """Return the most probable class after calibration.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data, in whatever form the estimator takes.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        estimator_tags = get_tags(self.estimator)
        tags.input_tags.sparse = estimator_tags.input_tags.sparse
        tags.input_tags.allow_nan = estimator_tags.input_tags.allow_nan
        return tags
