"""A classifier and a post-hoc calibrator fitted together as one scikit-learn classifier."""

import inspect
import math
import numbers
import warnings

import numpy as np
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

from .._validation import check_class_labels, check_sample_weight, encode_labels
from .temperature import TemperatureScaling


def _scores(estimator, X):
    """Return the scores fed to the calibrator and the method that gave them."""
    if hasattr(estimator, "decision_function"):
        return estimator.decision_function(X), "decision_function"
    return estimator.predict_proba(X), "predict_proba"


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
        a clone of the estimator is fitted on the training folds and a calibrator on the
        held-out fold; ``predict_proba`` averages the calibrated probabilities of the
        folds (like ``CalibratedClassifierCV(ensemble=True)``). ``"prefit"``: the
        estimator is already fitted; it is wrapped in
        :class:`~sklearn.frozen.FrozenEstimator` and all of ``X`` calibrates. An
        estimator that is a ``FrozenEstimator`` is treated as ``"prefit"`` whatever
        ``method`` says, since it cannot learn from a training part.
    calibration_size : float or int, default=0.1
        For ``"holdout"``: the fraction (float in (0, 1)) or number (int) of samples that
        calibrate, raised where needed to one per class: after the stratified split, one
        random training sample of each class the calibration part lacks moves into it.
    cv : int, cross-validation generator or iterable, default=5
        Folds for ``"cv"``; an int means ``StratifiedKFold(cv)``.
    random_state : int, RandomState instance or None, default=None
        Seed of the ``"holdout"`` split.

    Attributes
    ----------
    estimators_ : list of classifiers
        The fitted estimator of each calibration (one, or one per fold for ``"cv"``).
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
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        estimator,
        calibrator=None,
        method="holdout",
        calibration_size=0.1,
        cv=5,
        random_state=None,
    ):
        self.estimator = estimator
        self.calibrator = calibrator
        self.method = method
        self.calibration_size = calibration_size
        self.cv = cv
        self.random_state = random_state

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
            pairs = self._prefit_pairs(y)
        else:
            pairs = self._split_pairs(X, y, classes, sample_weight)
        calibrator = TemperatureScaling() if self.calibrator is None else self.calibrator
        estimators, calibrators, score_method = [], [], None
        for estimator, rows in pairs:
            scores, score_method = _scores(estimator, _safe_indexing(X, rows))
            fitted = clone(calibrator)
            if "input" in fitted.get_params():
                kind = "logits" if score_method == "decision_function" else "probabilities"
                fitted.set_params(input=kind)
            weight = None if sample_weight is None else sample_weight[rows]
            if "classes" in inspect.signature(fitted.fit).parameters:
                fitted.fit(scores, y[rows], sample_weight=weight, classes=estimator.classes_)
            else:
                y_index = encode_labels(y[rows], estimator.classes_)
                fitted.fit(scores, y_index, sample_weight=weight)
            estimators.append(estimator)
            calibrators.append(fitted)
        self.estimators_ = estimators
        self.calibrators_ = calibrators
        self.score_method_ = score_method
        self.classes_ = np.asarray(estimators[0].classes_)
        for name in ("n_features_in_", "feature_names_in_"):
            # copied from the estimator, or dropped when a refit's estimator lacks them
            if hasattr(estimators[0], name):
                setattr(self, name, getattr(estimators[0], name))
            elif name in vars(self):
                delattr(self, name)
        return self

    def _prefit_pairs(self, y):
        """Return the frozen fitted estimator with all rows for calibration."""
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
        return [(estimator, np.arange(len(y)))]

    def _split_pairs(self, X, y, classes, sample_weight):
        """Fit estimator clones on training parts; return them with their calibration rows."""
        n_samples = len(y)
        if self.method == "holdout":
            size = self.calibration_size
            if isinstance(size, numbers.Integral):
                n_calibration = int(size)
            else:
                n_calibration = math.ceil(float(size) * n_samples)
            n_calibration = max(n_calibration, len(classes))
            random_state = check_random_state(self.random_state)
            train, calibration = train_test_split(
                np.arange(n_samples),
                test_size=n_calibration,
                stratify=y,
                random_state=random_state,
            )
            splits = [_one_of_each_class(train, calibration, y, classes, random_state)]
        else:
            splits = check_cv(self.cv, y, classifier=True).split(X, y)
        supports_weight = has_fit_parameter(self.estimator, "sample_weight")
        if sample_weight is not None and not supports_weight:
            warnings.warn(
                f"{type(self.estimator).__name__}.fit does not take sample_weight; the "
                "weights are used by the calibrator only.",
                UserWarning,
                stacklevel=3,
            )
        pairs = []
        for train, calibration in splits:
            estimator = clone(self.estimator)
            fit_params = {}
            if sample_weight is not None and supports_weight:
                fit_params["sample_weight"] = sample_weight[train]
            estimator.fit(_safe_indexing(X, train), y[train], **fit_params)
            if not np.array_equal(np.asarray(estimator.classes_), classes):
                raise ValueError(
                    f"The estimator was fitted on a part of the data that holds only the "
                    f"classes {list(estimator.classes_)} of {classes.tolist()}; use a smaller "
                    "`calibration_size` or fewer `cv` folds."
                )
            pairs.append((estimator, calibration))
        return pairs

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
        proba = None
        for estimator, calibrator in zip(self.estimators_, self.calibrators_, strict=True):
            calibrated = calibrator.predict_proba(_scores(estimator, X)[0])
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
