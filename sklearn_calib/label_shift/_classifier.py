"""``LabelShiftClassifier``: a classifier and a label-shift adapter of its scores."""

import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, _fit_context, clone
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import train_test_split
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import HasMethods, Interval
from sklearn.utils.validation import check_is_fitted

from .._dask_chunks import uses_dask
from ..calibrators import classifier_scores
from ._adapter import LabelShiftAdapter


class LabelShiftClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """A classifier whose probabilities follow the class priors of a target.

    ``fit(X, y)`` on labelled source data fits the classifier and the label-shift adapter
    of its scores (:class:`LabelShiftAdapter`: a calibrator and the source's priors);
    ``adapt(X_target)`` estimates the target priors from unlabelled target features (or
    takes known ones); ``predict_proba`` and ``predict`` then answer for the target.
    Before ``adapt`` they are the calibrated classifier's.

    The classifier is fitted on a stratified share ``1 - cv`` of ``X`` and the adapter on
    the rest (the scores of data the classifier has not seen). A classifier fitted already
    is passed as :class:`sklearn.frozen.FrozenEstimator`: it is not refitted, and all of
    ``X`` fits the adapter. Model selection (``GridSearchCV``, ``cross_validate``) fits
    clones on the source data, and a clone keeps a ``FrozenEstimator`` fitted.

    Parameters
    ----------
    estimator : classifier
        Any scikit-learn classifier with ``decision_function`` or ``predict_proba`` (a
        ``NetClassifier``, a ``Pipeline``), whose scores the adapter takes (see
        :func:`sklearn_calib.calibrators.classifier_scores`).
    adapter : LabelShiftAdapter, default=None
        The adapter (cloned; its ``input`` is set from the classifier's scores); None
        means ``LabelShiftAdapter()``. Its parameters are ``adapter__*`` in a grid search.
    cv : float, default=0.1
        The share of ``X`` held out (stratified) to fit the adapter; ignored for a
        ``FrozenEstimator``.
    random_state : int, RandomState instance or None, default=None
        Seeds the split.

    Attributes
    ----------
    estimator_ : classifier
        The fitted classifier.
    adapter_ : LabelShiftAdapter
        The fitted adapter: its ``target_prior_``, ``target_prior_intervals_`` and
        ``shift_test_`` describe the target after :meth:`adapt`.
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
    >>> X, y = make_classification(4000, n_classes=3, n_informative=4, random_state=0)
    >>> target = np.flatnonzero((y == 0) | (np.arange(4000) % 5 == 0))[2000:]
    >>> clf = LabelShiftClassifier(
    ...     LogisticRegression(), adapter=LabelShiftAdapter(n_resamples=0), cv=0.3,
    ...     random_state=0,
    ... ).fit(X[:2000], y[:2000])
    >>> prior = clf.adapt(X[target]).adapter_.target_prior_
    >>> bool(prior[0] > 0.6)
    True
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit"])],
        "adapter": [None, HasMethods(["fit", "adapt", "predict_proba"])],
        "cv": [Interval(numbers.Real, 0, 1, closed="neither")],
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
            Passed to the classifier's ``fit`` (its part) and to the adapter (its part).

        Returns
        -------
        self : object
        """
        y = np.asarray(y)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
        if isinstance(self.estimator, FrozenEstimator):
            self.estimator_ = self.estimator
            held_out = np.arange(y.shape[0])
        else:
            train, held_out = train_test_split(
                np.arange(y.shape[0]), test_size=self.cv, stratify=y, random_state=self.random_state
            )
            weight = {} if sample_weight is None else {"sample_weight": sample_weight[train]}
            self.estimator_ = clone(self.estimator).fit(
                _safe_indexing(X, train), y[train], **weight
            )
        scores, kind = classifier_scores(self.estimator_, _safe_indexing(X, held_out))
        adapter = LabelShiftAdapter() if self.adapter is None else self.adapter
        self.adapter_ = clone(adapter).set_params(input=kind)
        self.adapter_.fit(
            scores,
            y[held_out],
            sample_weight=None if sample_weight is None else sample_weight[held_out],
            classes=self.estimator_.classes_,
        )
        self.classes_ = self.adapter_.classes_
        if hasattr(self.estimator_, "n_features_in_"):
            self.n_features_in_ = self.estimator_.n_features_in_
        return self

    def adapt(self, X_target=None, y=None, *, target_prior=None):
        """Estimate the target priors from unlabelled target features, or take known ones.

        Parameters
        ----------
        X_target : array-like or Dask array of shape (n_samples, n_features), default=None
            Unlabelled target features (a Dask array is scored chunk by chunk).
        y : None
            Not used: given labels raise a ValueError.
        target_prior : array-like of shape (n_classes,), default=None
            Known target priors, instead of features.

        Returns
        -------
        self : object
        """
        check_is_fitted(self)
        scores = None if X_target is None else self._scores(X_target)
        self.adapter_.adapt(scores, y, target_prior=target_prior)
        return self

    def _scores(self, X):
        """The classifier's scores of ``X`` (lazily, chunk by chunk, for a Dask array)."""
        if not uses_dask(X):
            return classifier_scores(self.estimator_, X)[0]
        if X.ndim != 2:
            raise ValueError(f"Expected a 2-D Dask array of features, got shape {X.shape}.")
        X = X.rechunk({1: -1})
        if self.adapter_._scores_ndim == 1:
            return X.map_blocks(self._block_scores, dtype=np.float64, drop_axis=1)
        chunks = (X.chunks[0], (len(self.classes_),))
        return X.map_blocks(self._block_scores, dtype=np.float64, chunks=chunks)

    def _block_scores(self, block):
        return classifier_scores(self.estimator_, block)[0]

    def predict_proba(self, X):
        """Return the probabilities under the target priors (the calibrated ones before
        :meth:`adapt`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        return self.adapter_.predict_proba(self._scores(X))

    def predict(self, X):
        """Return the most probable class under the target priors.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
