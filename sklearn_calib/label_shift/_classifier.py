"""``LabelShiftClassifier``: a classifier and label-shift adapters of its scores."""

import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, _fit_context
from sklearn.utils import get_tags
from sklearn.utils._param_validation import HasMethods, Interval
from sklearn.utils.validation import check_is_fitted

from .._dask_chunks import uses_dask
from .._rollback import restored_on_failure
from ..calibrators import CalibratedClassifier, classifier_scores
from ._adapter import LabelShiftAdapter


class LabelShiftClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """A classifier whose probabilities follow the class priors of a target.

    ``fit(X, y)`` on labelled source data fits the classifier and a label-shift adapter of
    its scores (:class:`LabelShiftAdapter`: a calibrator and the source's priors) as
    :class:`~sklearn_calib.calibrators.CalibratedClassifier` fits a classifier and its
    calibrator, on held-out scores; ``adapt(X_target)`` estimates the target priors from
    unlabelled target features (or takes known ones); ``predict_proba`` and ``predict``
    then answer for the target. Before ``adapt`` they are the calibrated classifier's.

    A float ``cv`` holds out that stratified share of ``X`` for the adapter and fits the
    classifier on the rest; folds fit one classifier and one adapter per fold (each
    adapter estimates the target priors; the probabilities are averaged). A
    classifier fitted already is passed as :class:`sklearn.frozen.FrozenEstimator`: it is
    not refitted, and all of ``X`` fits the adapter. Model selection (``GridSearchCV``,
    ``cross_validate``) fits clones on the source data, and a clone keeps a
    ``FrozenEstimator`` fitted.

    Parameters
    ----------
    estimator : classifier
        Any scikit-learn classifier with ``decision_function`` or ``predict_proba`` (a
        ``NetClassifier``, a ``Pipeline``), whose scores the adapter takes (see
        :func:`sklearn_calib.calibrators.classifier_scores`).
    adapter : LabelShiftAdapter or estimator, default=None
        The adapter (cloned; its ``input`` is set from the classifier's scores); None
        means ``LabelShiftAdapter()``. Any estimator with ``fit(scores, y,
        sample_weight)``, ``adapt`` (the signature of :meth:`LabelShiftAdapter.adapt`,
        setting ``target_prior_``) and ``predict_proba(scores)`` will do; with Dask
        features it takes Dask scores, and records ``n_features_in_`` when fitted on
        2-D scores (as scikit-learn's estimators do). Its parameters are ``adapter__*``
        in a grid search.
    cv : float, int, cross-validation generator or iterable, default=0.1
        The share of ``X`` held out (stratified) for the adapter, or folds (an int for
        stratified folds); ignored for a ``FrozenEstimator``.
    random_state : int, RandomState instance or None, default=None
        Seeds the split.

    Attributes
    ----------
    estimators_ : list of classifiers
        The fitted classifier (one per fold for an int ``cv``).
    adapters_ : list of LabelShiftAdapter
        The fitted adapter of each classifier; after :meth:`adapt`, each one's
        ``target_prior_``, ``target_prior_intervals_`` and ``shift_test_`` describe the
        target.
    target_prior_ : ndarray of shape (n_classes,)
        The mean of the adapters' target priors (set by :meth:`adapt`).
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    n_features_in_ : int
        Number of features (when the classifier records it).

    See Also
    --------
    LabelShiftAdapter : The adapter of scores.
    sklearn_calib.calibrators.CalibratedClassifier : A classifier and a calibrator.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_calib.label_shift import LabelShiftAdapter, LabelShiftClassifier
    >>> X, y = make_classification(6000, n_classes=3, n_informative=4, random_state=0)
    >>> target = np.flatnonzero((y == 0) | (np.arange(6000) % 4 == 0))[1500:]
    >>> clf = LabelShiftClassifier(
    ...     LogisticRegression(), adapter=LabelShiftAdapter(n_resamples=0), cv=0.3,
    ...     random_state=0,
    ... ).fit(X[:3000], y[:3000])
    >>> share = np.mean(y[target] == 0)  # a third of the source's rows are class 0
    >>> round(float(share), 2)
    0.67
    >>> bool(abs(clf.adapt(X[target]).target_prior_[0] - share) < 0.02)
    True
    """

    _parameter_constraints: dict = {
        "estimator": [
            HasMethods(["fit", "decision_function"]),
            HasMethods(["fit", "predict_proba"]),
        ],
        "adapter": [None, HasMethods(["fit", "adapt", "predict_proba"])],
        "cv": [Interval(numbers.Real, 0, 1, closed="neither"), "cv_object"],
        "random_state": ["random_state"],
    }

    def __init__(self, estimator, *, adapter=None, cv=0.1, random_state=None):
        self.estimator = estimator
        self.adapter = adapter
        self.cv = cv
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None):
        """Fit the classifier and the adapter on labelled source data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Source features, in whatever form the classifier takes.
        y : array-like of shape (n_samples,)
            Source labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the source rows, for the classifier and the adapter.

        Returns
        -------
        self : object
            The fitted classifier. A fit that raises leaves the classifier as it was.
        """
        with restored_on_failure(self):
            self._fit(X, y, sample_weight)
        return self

    def _fit(self, X, y, sample_weight):
        self.__dict__.pop("target_prior_", None)
        adapter = LabelShiftAdapter() if self.adapter is None else self.adapter
        calibrated = CalibratedClassifier(
            self.estimator,
            calibrator=adapter,
            cv=self.cv,
            ensemble=True,
            random_state=self.random_state,
        ).fit(X, y, sample_weight=sample_weight)
        self.estimators_ = calibrated.estimators_
        self.adapters_ = calibrated.calibrators_
        self._fitted_attributes = [tuple(vars(adapter)) for adapter in self.adapters_]
        self.classes_ = calibrated.classes_
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(calibrated, name):
                setattr(self, name, getattr(calibrated, name))
            elif name in vars(self):
                delattr(self, name)

    def adapt(self, X_target=None, y=None, *, target_prior=None):
        """Estimate the target priors from unlabelled target features, or take known ones.

        Parameters
        ----------
        X_target : array-like or Dask array of shape (n_samples, n_features), default=None
            Unlabelled target features (a 2-D Dask array is scored chunk by chunk).
        y : None
            Not used: given labels raise a ValueError.
        target_prior : array-like of shape (n_classes,), default=None
            Known target priors, instead of features.

        Returns
        -------
        self : object
            The classifier, adapted to the target priors. An adapt that raises leaves
            it unadapted (no priors of an earlier target), as the adapter's does: every
            adapter has the attributes of its ``fit`` back, none of an ``adapt``.
        """
        check_is_fitted(self)
        self.__dict__.pop("target_prior_", None)
        try:
            with restored_on_failure(*self.adapters_):
                for estimator, adapter in zip(self.estimators_, self.adapters_, strict=True):
                    scores = None if X_target is None else _scores(estimator, adapter, X_target)
                    adapter.adapt(scores, y, target_prior=target_prior)
        except BaseException:
            self._forget_target()
            raise
        self.target_prior_ = np.mean([adapter.target_prior_ for adapter in self.adapters_], axis=0)
        return self

    def _forget_target(self):
        """Drop from every adapter the attributes that an ``adapt`` added after ``fit``."""
        for adapter, fitted in zip(self.adapters_, self._fitted_attributes, strict=True):
            for name in set(vars(adapter)).difference(fitted):
                delattr(adapter, name)

    def predict_proba(self, X):
        """Return the probabilities under the target priors (the calibrated ones before
        :meth:`adapt`).

        Parameters
        ----------
        X : array-like or Dask array of shape (n_samples, n_features)
            Features, in whatever form the classifier takes.

        Returns
        -------
        proba : ndarray (a lazy Dask array for Dask input) of shape (n_samples, n_classes)
            The mean over the adapters.
        """
        check_is_fitted(self)
        pairs = zip(self.estimators_, self.adapters_, strict=True)
        proba = [adapter.predict_proba(_scores(est, adapter, X)) for est, adapter in pairs]
        return sum(proba[1:], proba[0]) / len(proba)

    def predict(self, X):
        """Return the most probable class under the target priors.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features, in whatever form the classifier takes.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        estimator_tags = get_tags(self.estimator)
        tags.input_tags.sparse = estimator_tags.input_tags.sparse
        tags.input_tags.allow_nan = estimator_tags.input_tags.allow_nan
        return tags


def _scores(estimator, adapter, X):
    """The classifier's scores of ``X`` (lazily, chunk by chunk, for a Dask array: 1-D
    unless the adapter was fitted on 2-D scores, of ``n_features_in_`` columns)."""
    if not uses_dask(X):
        return classifier_scores(estimator, X)[0]
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-D Dask array of features, got shape {X.shape}.")
    X = X.rechunk({1: -1})

    def block_scores(block):
        return classifier_scores(estimator, block)[0]

    columns = getattr(adapter, "n_features_in_", None)
    if columns is None:
        return X.map_blocks(block_scores, dtype=np.float64, drop_axis=1)
    return X.map_blocks(block_scores, dtype=np.float64, chunks=(X.chunks[0], (columns,)))
