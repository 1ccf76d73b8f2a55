"""A classifier and a post-hoc calibrator fitted together as one scikit-learn classifier.

The rule that connects them is shared with :mod:`sklearn_calib.evaluation`:
:func:`classifier_scores` takes a fitted classifier's scores (``decision_function`` as
logits, else ``predict_proba`` as probabilities) and :func:`fit_calibrator` fits a clone
of a calibrator on them, told what they are and the label of each column.
"""

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
from sklearn.utils._param_validation import HasMethods, Hidden, Interval, StrOptions
from sklearn.utils.validation import (
    check_is_fitted,
    column_or_1d,
    has_fit_parameter,
)

from .._deprecation import DEPRECATED, is_given, keyword_only
from .._validation import check_class_labels, check_sample_weight, encode_labels, select_columns
from ._base import check_takes_groups
from ._repeated_fits import (
    call_recording_warnings,
    check_part_weight,
    distinct_warnings,
    reissue_warnings,
)
from .temperature import TemperatureScaling

__all__ = ["CalibratedClassifier", "classifier_scores", "fit_calibrator"]

#: The estimator method that gives each kind of scores.
_SCORE_METHODS = {"logits": "decision_function", "probabilities": "predict_proba"}


def classifier_scores(estimator, X):
    """Return the scores a post-hoc calibrator takes from a fitted classifier, and their kind.

    ``decision_function(X)`` as logits when the estimator has it (a 1-D binary decision
    function is the positive-class log-odds), else ``predict_proba(X)`` as probabilities:
    the rule of :class:`CalibratedClassifier` and of :mod:`sklearn_calib.evaluation`.

    Parameters
    ----------
    estimator : fitted classifier
        With ``decision_function`` or ``predict_proba``.
    X : array-like
        Data, in whatever form the estimator takes.

    Returns
    -------
    scores : ndarray of shape (n_samples, n_classes) or (n_samples,)
        ``decision_function(X)`` when the estimator has it, else ``predict_proba(X)``.
    input : {"logits", "probabilities"}
        What the scores are: the value of a calibrator's ``input`` parameter.

    See Also
    --------
    fit_calibrator : Fit a calibrator on these scores.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_calib.calibrators import classifier_scores
    >>> X, y = load_iris(return_X_y=True)
    >>> scores, kind = classifier_scores(LogisticRegression(max_iter=1000).fit(X, y), X)
    >>> scores.shape, kind
    ((150, 3), 'logits')
    """
    if hasattr(estimator, "decision_function"):
        return estimator.decision_function(X), "logits"
    return estimator.predict_proba(X), "probabilities"


def fit_calibrator(
    calibrator, scores, y, *, input=None, classes=None, sample_weight=None, groups=None
):
    """Fit a clone of ``calibrator`` on a classifier's scores.

    The clone is told what the scores are (its ``input`` parameter, when it has one) and
    the label of each score column: ``classes`` goes to a ``fit`` that takes it; a
    calibrator whose ``fit`` does not (any estimator with ``fit(scores, y,
    sample_weight)`` and ``predict_proba``) is fitted on the column index of each label.
    Group features (``groups``) go to a calibrator whose ``fit`` takes them, such as
    :class:`MulticalibrationBoosting`.

    Parameters
    ----------
    calibrator : calibrator
        A calibrator of :mod:`sklearn_calib.calibrators`, or any estimator with
        ``fit(scores, y, sample_weight)`` and ``predict_proba(scores)``; never changed.
    scores : array-like of shape (n_samples, n_classes) or (n_samples,)
        Scores of a fitted classifier, as :func:`classifier_scores` returns them.
    y : array-like of shape (n_samples,)
        True labels.
    input : {"logits", "probabilities"}, default=None
        What the scores are; None keeps the calibrator's ``input``.
    classes : array-like of shape (n_classes,), default=None
        The label of each score column (the classifier's ``classes_``); None for the
        sorted labels of ``y`` or column indices, see :mod:`sklearn_calib.calibrators`.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights.
    groups : array-like of shape (n_samples,) or (n_samples, n_group_features), \
default=None
        Group features of each row, for a calibrator whose ``fit`` takes ``groups``
        (a ValueError for any other).

    Returns
    -------
    fitted : calibrator
        The fitted clone.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.naive_bayes import GaussianNB
    >>> from sklearn_calib.calibrators import (
    ...     TemperatureScaling, classifier_scores, fit_calibrator)
    >>> X, y = load_iris(return_X_y=True)
    >>> model = GaussianNB().fit(X[::2], y[::2])
    >>> scores, kind = classifier_scores(model, X[1::2])
    >>> fitted = fit_calibrator(TemperatureScaling(), scores, y[1::2], input=kind,
    ...                         classes=model.classes_)
    >>> fitted.input, fitted.predict_proba(scores).shape
    ('probabilities', (75, 3))
    """
    fitted = clone(calibrator)
    if input is not None and "input" in fitted.get_params(deep=False):
        fitted.set_params(input=input)
    options = {"sample_weight": sample_weight}
    if groups is not None:
        check_takes_groups(fitted, "groups")
        options["groups"] = groups
    if classes is None:
        fitted.fit(scores, y, **options)
    elif "classes" in inspect.signature(fitted.fit).parameters:
        fitted.fit(scores, y, classes=classes, **options)
    else:
        fitted.fit(scores, encode_labels(y, np.asarray(classes)), **options)
    return fitted


def _fit_on_part(estimator, X, y, train, sample_weight, classes, part):
    """Fit a clone of ``estimator`` on the rows ``train``; check that it saw every class."""
    estimator = clone(estimator)
    fit_params = {} if sample_weight is None else {"sample_weight": sample_weight[train]}
    estimator.fit(_safe_indexing(X, train), y[train], **fit_params)
    if not np.array_equal(np.asarray(estimator.classes_), classes):
        raise ValueError(
            f"The estimator was fitted on {part}, which holds only the classes "
            f"{np.asarray(estimator.classes_).tolist()} of {classes.tolist()}; hold out a "
            "smaller fraction (`cv`), or use fewer or stratified `cv` folds."
        )
    return estimator


def _fit_fold(estimator, X, y, train, test, sample_weight, classes, part):
    """Fit a clone on a fold's training rows and score its held-out rows."""
    fitted = _fit_on_part(estimator, X, y, train, sample_weight, classes, part)
    scores, kind = classifier_scores(fitted, _safe_indexing(X, test))
    return fitted, scores, kind


def _fit_calibrator(calibrator, estimator, scores, kind, y, sample_weight, part, groups=None):
    """Fit a clone of ``calibrator`` on the estimator's scores of ``part`` (and on their
    group features, ``groups``, when given).

    A calibrator that fails on a part lacking a class (a held-out fold may hold a single
    class, which the calibrator is told is one of several) raises a ValueError naming the
    part and the fix; other errors (such as scores out of range) pass unchanged.
    """
    try:
        return fit_calibrator(
            calibrator,
            scores,
            y,
            input=kind,
            classes=estimator.classes_,
            sample_weight=sample_weight,
            groups=groups,
        )
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


_UNFITTED_PREFIT = (
    "This %(name)s instance is not fitted yet, and method='prefit' (deprecated) calibrates a "
    "fitted estimator. scikit-learn's clone (used by GridSearchCV, cross_validate and the like) "
    "returns an unfitted copy of it: wrap the fitted estimator in "
    "sklearn.frozen.FrozenEstimator, which clone keeps fitted, as in "
    "CalibratedClassifier(FrozenEstimator(fitted_estimator), calibrator=calibrator)."
)

_UNFITTED_FROZEN = (
    "This %(name)s instance is not fitted yet, and CalibratedClassifier calibrates a "
    "FrozenEstimator as it is: fit the estimator before freezing it."
)


def _warn_split_deprecated(method, size):
    """Warn that ``method`` and ``calibration_size`` are deprecated, saying what to pass."""
    advice = {
        "holdout": "a float `cv` (the share held out)",
        "cv": "`cv` alone (folds)",
        "prefit": "the fitted estimator as sklearn.frozen.FrozenEstimator(estimator)",
    }
    if is_given(method):
        instead = advice[method]
    elif isinstance(size, numbers.Integral):
        instead = "cv=StratifiedShuffleSplit(1, test_size=n) to hold out n samples"
    else:
        instead = advice["holdout"]
    warnings.warn(
        "`method` and `calibration_size` of CalibratedClassifier are deprecated in 0.2 and "
        f"removed in 0.3: pass {instead}.",
        FutureWarning,
        stacklevel=6,
    )


def _split_state(state):
    """A saved state with the deprecated ``method`` turned into what it meant, where exact:
    ``"cv"`` keeps ``cv``, ``"holdout"`` with a share becomes that ``cv``, ``"prefit"`` a
    ``FrozenEstimator``. A holdout of a number of samples keeps the deprecated spelling."""
    method, size = state.get("method", DEPRECATED), state.get("calibration_size", DEPRECATED)
    if not is_given(method) or (method == "holdout" and isinstance(size, numbers.Integral)):
        return state
    state = {**state, "method": DEPRECATED, "calibration_size": DEPRECATED}
    if method == "holdout":
        state["cv"] = 0.1 if not is_given(size) else size
    elif method == "prefit" and not isinstance(state["estimator"], FrozenEstimator):
        state["estimator"] = FrozenEstimator(state["estimator"])
    elif method == "cv" and _is_share(state["cv"]):
        state["cv"] = 5
    return state


def _is_share(cv):
    """Whether ``cv`` is a share of the samples to hold out (a float), not folds."""
    return isinstance(cv, numbers.Real) and not isinstance(cv, numbers.Integral)


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
    cv : float, int, cross-validation generator or iterable, default=0.1
        How the data are split between the estimator and the calibrator, as
        scikit-learn's ``CalibratedClassifierCV`` splits them. A float in (0, 1): the
        share of the samples held out to calibrate (skorch's ``ValidSplit`` reads a float
        so), in a stratified split; where it lacks a class, one random training sample of
        each missing class moves into it. An int ``k >= 2`` (``StratifiedKFold(k)``), a
        splitter or an iterable of (train, test) pairs: for each fold a clone of the
        estimator is fitted on the training part and scores the held-out part (see
        ``ensemble``). Every fold's training part must hold every class. A held-out fold
        may hold a single class: the calibrator is told all the classes (temperature
        scaling, for one, is defined there); a calibrator that cannot fit such a fold
        raises an error naming the fold. To calibrate an estimator that is already
        fitted, pass it as :class:`~sklearn.frozen.FrozenEstimator`: all of ``X`` then
        calibrates and ``cv`` is ignored. Model selection (``GridSearchCV``,
        ``cross_validate``) fits clones, and clone keeps a ``FrozenEstimator`` fitted.
    ensemble : bool, default=True
        For folds: one calibrated estimator per fold, ``predict_proba`` averaging their
        calibrated probabilities (True), or one calibrator on the held-out scores of all
        the folds, paired with the estimator fitted on all the data (False; the folds must
        partition the samples), scikit-learn's ``CalibratedClassifierCV`` semantics.
        Ignored with a held-out share or a ``FrozenEstimator``.
    n_jobs : int, default=None
        Folds of ``"cv"`` fitted in parallel (joblib); None means 1.
    random_state : int, RandomState instance or None, default=None
        Seed of the split of a float ``cv``.
    group_features : int, str, array-like, slice, callable or None, default=None
        The columns of ``X`` passed to the calibrator as its group features (``groups=``)
        in ``fit`` and ``predict_proba``, read as scikit-learn's ``ColumnTransformer``
        reads a column selector: indices, DataFrame column names, a boolean mask, a
        slice, or a callable of ``X``. The calibrator must take ``groups``, such as
        :class:`MulticalibrationBoosting`; the fitted model then needs nothing but ``X``.
    method : {"holdout", "cv", "prefit"}
        Deprecated: ``"holdout"`` is a float ``cv``, ``"cv"`` folds of ``cv``,
        ``"prefit"`` a ``FrozenEstimator``.

        .. deprecated:: 0.2
           Removed in 0.3.
    calibration_size : float or int
        Deprecated: a float is the held-out share, now given as ``cv``; an int (a number of
        samples) is ``cv=StratifiedShuffleSplit(1, test_size=n)``.

        .. deprecated:: 0.2
           Removed in 0.3.

    Attributes
    ----------
    estimators_ : list of classifiers
        The fitted estimator of each calibration (one, or one per fold with
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
    sklearn.calibration.CalibratedClassifierCV : The sigmoid, isotonic and temperature
        calibration of scikit-learn.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_calib.calibrators import CalibratedClassifier
    >>> X, y = make_classification(300, n_informative=4, n_classes=3, random_state=0)
    >>> clf = CalibratedClassifier(LogisticRegression(), cv=0.3, random_state=0)
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
        "cv": [Interval(numbers.Real, 0, 1, closed="neither"), "cv_object"],
        "ensemble": ["boolean"],
        "n_jobs": [Interval(numbers.Integral, None, None, closed="neither"), None],
        "random_state": ["random_state"],
        "group_features": "no_validation",
        "method": [Hidden(StrOptions({DEPRECATED})), StrOptions({"holdout", "cv", "prefit"})],
        "calibration_size": [
            Hidden(StrOptions({DEPRECATED})),
            Interval(numbers.Real, 0, 1, closed="neither"),
            Interval(numbers.Integral, 1, None, closed="left"),
        ],
    }

    @keyword_only(
        "estimator",
        "calibrator",
        "method",
        "calibration_size",
        "cv",
        "ensemble",
        "n_jobs",
        "random_state",
        "group_features",
    )
    def __init__(
        self,
        estimator,
        *,
        calibrator=None,
        cv=0.1,
        ensemble=True,
        n_jobs=None,
        random_state=None,
        group_features=None,
        method=DEPRECATED,
        calibration_size=DEPRECATED,
    ):
        self.estimator = estimator
        self.calibrator = calibrator
        self.cv = cv
        self.ensemble = ensemble
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.group_features = group_features
        self.method = method
        self.calibration_size = calibration_size

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
        with distinct_warnings():
            estimators, calibrators, kind = self._fit_parts(X, y, classes, sample_weight)
        self.estimators_ = estimators
        self.calibrators_ = calibrators
        self.score_method_ = _SCORE_METHODS[kind]
        self.classes_ = np.asarray(estimators[0].classes_)
        for name in ("n_features_in_", "feature_names_in_"):
            # copied from the estimator, or dropped when a refit's estimator lacks them
            if hasattr(estimators[0], name):
                setattr(self, name, getattr(estimators[0], name))
            elif name in vars(self):
                delattr(self, name)
        return self

    def _fit_parts(self, X, y, classes, sample_weight):
        """The fitted estimators, their fitted calibrators and the kind of scores."""
        calibrator = TemperatureScaling() if self.calibrator is None else self.calibrator
        features = self._group_features(X, calibrator)
        split, rule = self._split()
        if split == "prefit":
            parts = self._prefit_parts(X, y)
        elif split == "holdout":
            parts = self._holdout_parts(X, y, classes, sample_weight, rule)
        else:
            parts = self._cv_parts(X, y, classes, sample_weight, rule)
        estimators, calibrators = [], []
        for estimator, scores, kind, rows, part in parts:
            weight = None if sample_weight is None else sample_weight[rows]
            groups = None if features is None else _safe_indexing(features, rows)
            calibrators.append(
                _fit_calibrator(calibrator, estimator, scores, kind, y[rows], weight, part, groups)
            )
            estimators.append(estimator)
        return estimators, calibrators, parts[0][2]

    def _split(self):
        """How the data are split: ``("prefit", None)``, ``("holdout", size)`` or
        ``("cv", folds)``, from ``cv`` or the deprecated ``method`` and
        ``calibration_size`` (which warn)."""
        method, size = self.method, self.calibration_size
        if is_given(method) or is_given(size):
            _warn_split_deprecated(method, size)
        if method == "prefit" or isinstance(self.estimator, FrozenEstimator):
            return "prefit", None
        if method == "cv":
            if _is_share(self.cv):
                if self.cv != 0.1:
                    raise ValueError(
                        f"Expected folds as `cv` with method='cv', got {self.cv!r}; pass "
                        "`cv` alone (a float holds out that share, folds cross-validate)."
                    )
                return "cv", 5
            return "cv", self.cv
        if is_given(method) or is_given(size):
            return "holdout", 0.1 if not is_given(size) else size
        return ("holdout" if _is_share(self.cv) else "cv"), self.cv

    def _group_features(self, X, calibrator):
        """The columns of ``X`` named by ``group_features`` (None without them)."""
        if self.group_features is None:
            return None
        check_takes_groups(calibrator, "group_features")
        return select_columns(X, self.group_features)

    def _prefit_parts(self, X, y):
        """The frozen fitted estimator, scoring all rows for calibration."""
        estimator = self.estimator
        if isinstance(estimator, FrozenEstimator):
            check_is_fitted(estimator.estimator, msg=_UNFITTED_FROZEN)
        else:
            check_is_fitted(estimator, msg=_UNFITTED_PREFIT)
            estimator = FrozenEstimator(estimator)
        unknown = np.setdiff1d(np.unique(y), estimator.classes_)
        if unknown.size:
            raise ValueError(
                f"`y` holds labels the prefit estimator does not know: {unknown.tolist()}; "
                f"its classes are {list(estimator.classes_)}."
            )
        scores, kind = classifier_scores(estimator, X)
        return [(estimator, scores, kind, np.arange(len(y)), "all the data")]

    def _estimator_weights(self, sample_weight):
        """The weights the estimator is fitted with (None when its fit does not take any)."""
        supports_weight = has_fit_parameter(self.estimator, "sample_weight")
        if sample_weight is not None and not supports_weight:
            warnings.warn(
                f"{type(self.estimator).__name__}.fit does not take sample_weight; the "
                "weights are used by the calibrator only.",
                UserWarning,
                stacklevel=6,
            )
        return sample_weight if supports_weight else None

    def _holdout_parts(self, X, y, classes, sample_weight, size):
        """The estimator fitted on a stratified training part, scoring the rest
        (``size``: the share, float, or number, int, of the rows held out)."""
        n_samples = len(y)
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
        check_part_weight(weight, train, "the training part")
        check_part_weight(sample_weight, calibration, "the calibration part")
        fitted, scores, kind = _fit_fold(
            self.estimator, X, y, train, calibration, weight, classes, "the training part"
        )
        return [(fitted, scores, kind, calibration, "the calibration part")]

    def _cv_parts(self, X, y, classes, sample_weight, cv):
        """Estimators fitted on the training folds of ``cv``, with their held-out scores.

        With ``ensemble=False`` the held-out scores of all folds go to one calibrator,
        paired with the estimator fitted on all the data.
        """
        folds = list(check_cv(cv, y, classifier=True).split(X, y))
        weight = self._estimator_weights(sample_weight)
        for i, (train, test) in enumerate(folds, 1):
            check_part_weight(weight, train, f"the training part of fold {i} of {len(folds)}")
            if self.ensemble:
                check_part_weight(sample_weight, test, f"held-out fold {i} of {len(folds)}")
        jobs = [
            delayed(call_recording_warnings)(
                _fit_fold,
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
                delayed(call_recording_warnings)(
                    _fit_on_part, self.estimator, X, y, every, weight, classes, "all the data"
                )
            )
        results = Parallel(n_jobs=self.n_jobs)(jobs)
        reissue_warnings([record for _, records in results for record in records])
        fitted = [result for result, _ in results]
        if self.ensemble:
            return [
                (estimator, scores, kind, test, f"held-out fold {i} of {len(folds)}")
                for i, ((estimator, scores, kind), (_, test)) in enumerate(
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
            calibrated = calibrator.predict_proba(classifier_scores(estimator, X)[0], **options)
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
            The class of highest calibrated probability of each sample.
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def __setstate__(self, state):
        """Restore a saved state; one saved before ``group_features`` existed gets None,
        one saved with ``method`` gets the ``cv`` (or ``FrozenEstimator``) it meant."""
        super().__setstate__(_split_state({"group_features": None, **state}))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        estimator_tags = get_tags(self.estimator)
        tags.input_tags.sparse = estimator_tags.input_tags.sparse
        tags.input_tags.allow_nan = estimator_tags.input_tags.allow_nan
        return tags
