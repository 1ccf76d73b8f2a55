"""Score handling shared by the post-hoc calibrators.

A calibrator maps the scores of a fitted classifier to calibrated probabilities. Its
``input`` parameter says what the scores are:

- ``"logits"``: unnormalised log-probabilities, shape (n_samples, n_classes), such as the
  ``decision_function`` of a multiclass linear model or a network's last layer. A 1-D
  array is the positive-class log-odds of a binary problem (``decision_function`` of a
  binary scikit-learn classifier) and is read as the two logits ``(0, d)``, so that
  ``softmax`` gives ``(1 - sigmoid(d), sigmoid(d))``.
- ``"probabilities"``: rows that sum to 1, shape (n_samples, n_classes), or a 1-D array of
  positive-class probabilities ``p`` read as ``(1 - p, p)``. Methods that need logits use
  ``log(max(p, PROBABILITY_FLOOR))``.

The kind of scores is never guessed from their values.
"""

import contextlib
import inspect
import warnings
from abc import ABCMeta, abstractmethod

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import ThreadpoolController

from .._dask_chunks import uses_dask
from .._deprecation import renamed_state, warn_renamed_parameters
from .._validation import (
    check_class_labels,
    check_probabilities,
    check_sample_weight,
    check_two_classes,
    encode_labels,
    resolve_classes,
)
from ._repeated_fits import distinct_warnings

#: Smallest probability used when probabilities are turned into log-probabilities.
PROBABILITY_FLOOR = 1e-12

_THREADPOOLS = []


def single_threaded_blas():
    """Context manager that limits BLAS to one thread (the controller is built once).

    The calibrators' fits call BLAS on small matrices (Hessians of a few hundred
    parameters, products with a few columns) many times; threads there cost more in
    synchronisation than they gain, by orders of magnitude on a loaded machine.
    """
    if not _THREADPOOLS:
        _THREADPOOLS.append(ThreadpoolController())
    return _THREADPOOLS[0].limit(limits=1, user_api="blas")


#: Largest accepted absolute value of a logit. Squares of the scores and their products
#: with the calibrators' parameters, summed over many rows, stay finite in float64; every
#: float32 value is within it.
MAX_ABS_LOGIT = 1e100


def softmax(logits, scale=1.0):
    """Return ``softmax(scale * logits)`` row by row in float64.

    The row maximum is subtracted in float64 before scaling, so float32 logits scaled
    beyond float32's range (a small temperature) give finite probabilities.

    Parameters
    ----------
    logits : ndarray of shape (n_samples, n_classes)
        Logits of absolute value at most :data:`MAX_ABS_LOGIT`.
    scale : float, default=1.0
        Positive factor, such as an inverse temperature.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes), dtype float64
    """
    proba = np.array(logits, dtype=np.float64)
    proba -= proba.max(axis=1, keepdims=True)
    if scale != 1.0:
        proba *= scale
    # torch's vectorised exp is about 2.5 times numpy's (float64, one thread)
    torch.from_numpy(proba).exp_()
    proba /= proba.sum(axis=1, keepdims=True)
    return proba


def normalised_weights(n_samples, sample_weight):
    """Weights that sum to 1: uniform, or ``sample_weight`` over its sum.

    Parameters
    ----------
    n_samples : int
    sample_weight : ndarray of shape (n_samples,) or None
        Non-negative weights with a positive sum.

    Returns
    -------
    weight : ndarray of shape (n_samples,), dtype float64
    """
    if sample_weight is None:
        return np.full(n_samples, 1.0 / n_samples)
    return sample_weight / sample_weight.sum()


def weighted_count(n_samples, sample_weight):
    """The weighted number of samples: ``n_samples``, or the sum of ``sample_weight``."""
    return n_samples if sample_weight is None else float(sample_weight.sum())


def weighted_subsample(n_samples, size, sample_weight=None):
    """Evenly spaced rows (:func:`evenly_spaced_rows`) and their sample weights.

    Parameters
    ----------
    n_samples : int
    size : int
    sample_weight : ndarray of shape (n_samples,) or None

    Returns
    -------
    rows : ndarray of shape (min(n_samples, size),), dtype intp, or None
        None when the rows' weights sum to 0 (the subsample carries no information).
    weight : ndarray of shape (len(rows),) or None
        The rows' sample weights (not normalised); None without ``sample_weight``.
    """
    rows = evenly_spaced_rows(n_samples, size)
    if sample_weight is None:
        return rows, None
    weight = sample_weight[rows]
    return (rows, weight) if weight.sum() > 0 else (None, None)


def evenly_spaced_rows(n_samples, size):
    """Indices of ``size`` evenly spaced rows out of ``n_samples`` (all rows if fewer).

    Parameters
    ----------
    n_samples : int
    size : int

    Returns
    -------
    rows : ndarray of shape (min(n_samples, size),), dtype intp
    """
    if n_samples <= size:
        return np.arange(n_samples)
    return np.linspace(0, n_samples - 1, size).astype(np.intp)


def check_logit_range(scores):
    """Raise a ValueError naming the range when logits exceed :data:`MAX_ABS_LOGIT`.

    Parameters
    ----------
    scores : ndarray
        Finite logits.
    """
    if scores.size == 0:
        return
    low, high = float(scores.min()), float(scores.max())
    if max(-low, high) > MAX_ABS_LOGIT:
        raise ValueError(
            f"Expected `scores` (logits) with absolute values at most {MAX_ABS_LOGIT:g}, got "
            f"values in [{low:.4g}, {high:.4g}]; the calibrators work in float64 and need the "
            "room. Rescale the scores, or pass probabilities with input='probabilities'."
        )


def renormalize(proba):
    """Divide each row by its sum in place; an all-zero row becomes uniform.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Non-negative float64 values.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes)
    """
    total = proba.sum(axis=1, keepdims=True)
    zero = total[:, 0] <= 0
    proba[zero] = 1.0
    total[zero] = proba.shape[1]
    proba /= total
    return proba


class BaseCalibrator(TransformerMixin, BaseEstimator, metaclass=ABCMeta):
    """Base class of the post-hoc calibrators.

    Subclasses implement ``_fit(scores, y_index, sample_weight)`` and
    ``_predict_proba(scores)`` (a subclass lacking either cannot be instantiated); both
    receive 2-D scores of the kind named by ``input`` (1-D binary scores already turned
    into two columns as described in the module docstring). ``fit`` leaves a fitted
    calibrator unchanged when it raises, and issues each distinct warning once.
    A subclass lists its renamed parameters and fitted attributes (old name to new) in
    ``_renamed_parameters`` and ``_renamed_attributes``: a deprecated parameter spelling
    warns at ``fit``, and a calibrator saved under the old names loads under the new ones.
    """

    _parameter_constraints: dict = {"input": [StrOptions({"logits", "probabilities"})]}
    _renamed_parameters: dict = {}
    _renamed_attributes: dict = {}

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, scores, y, sample_weight=None, classes=None):
        """Fit the calibrator.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes) or (n_samples,)
            Scores of a classifier, of the kind named by ``input``; 1-D for the
            positive class of a binary problem.
        y : array-like of shape (n_samples,)
            True labels. Without ``classes``: either one distinct label per score column
            (sorted labels give the column order), or integers in ``[0, n_classes)`` that
            include 0, read as column indices (so a calibration set may lack a class).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights.
        classes : array-like of shape (n_classes,), default=None
            The label of each score column, such as the ``classes_`` of the classifier
            that made the scores; needed when ``y`` lacks a class and its labels are not
            the column indices. With ``classes``, ``y`` may hold a single class.

        Returns
        -------
        self : object
            Fitted calibrator.
        """
        with self._fitting():
            if uses_dask(scores, y, sample_weight):
                self._fit_dask(scores, y, sample_weight, classes)
                return self
            scores, y_index, sample_weight = self._validate_fit_data(
                scores, y, sample_weight, classes
            )
            with single_threaded_blas():
                self._fit(scores, y_index, sample_weight)
        return self

    @contextlib.contextmanager
    def _fitting(self):
        """The block of a fit: each distinct warning issued once, and the calibrator left
        as it was when the block raises.

        A context manager rather than a shared fit body, so that the warnings of the
        validation and of ``_fit`` are as many frames below the caller of ``fit`` for
        every calibrator (their ``stacklevel`` points at the caller).
        """
        warn_renamed_parameters(self, stacklevel=5)
        saved = dict(self.__dict__)
        try:
            with distinct_warnings():
                yield
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise

    def __setstate__(self, state):
        """Restore a saved state; one saved before a rename gets the new names."""
        renamed = {**self._renamed_parameters, **self._renamed_attributes}
        super().__setstate__(renamed_state(state, renamed))

    def predict_proba(self, scores):
        """Return calibrated probabilities.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes) or (n_samples,)
            Scores of the same kind and number of classes as in ``fit``.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), dtype float64
            Rows sum to 1; columns follow ``classes_``.
        """
        return self._predict_proba(self._validate_scores(scores))

    def transform(self, scores):
        """Return calibrated probabilities; the same as :meth:`predict_proba`.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes) or (n_samples,)
            Scores of the same kind and number of classes as in ``fit``.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), dtype float64
            Rows sum to 1; columns follow ``classes_``.
        """
        return self.predict_proba(scores)

    def predict(self, scores):
        """Return the most probable class after calibration.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes) or (n_samples,)
            Scores of the same kind and number of classes as in ``fit``.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(scores)
        return self.classes_[np.argmax(proba, axis=1)]

    @abstractmethod
    def _fit(self, scores, y_index, sample_weight):
        """Learn the calibration map from validated 2-D scores."""

    @abstractmethod
    def _predict_proba(self, scores):
        """Apply the calibration map to validated 2-D scores."""

    def _fit_dask(self, scores, y, sample_weight, classes):
        """Fit on Dask collections (scores, labels or weights); most calibrators cannot."""
        raise ValueError(
            f"{type(self).__name__} fits in-memory data only, got a Dask collection; "
            "TemperatureScaling and HistogramBinning fit Dask input (or compute it first)."
        )

    def _logits(self, scores):
        """Return the scores as logits (log-probabilities for probability input)."""
        if self.input == "logits":
            return scores
        return np.log(np.maximum(scores, scores.dtype.type(PROBABILITY_FLOOR)))

    def _probabilities(self, scores):
        """Return the scores as float64 probabilities (softmax of logits)."""
        if self.input == "logits":
            return softmax(scores)
        return scores.astype(np.float64)

    def _as_two_dimensional(self, scores):
        """Check the declared kind of ``scores`` and turn 1-D binary scores into 2 columns."""
        if self.input == "probabilities":
            return check_probabilities(
                scores,
                name="scores",
                logits_advice="pass input='logits' (the default) to calibrate logits",
            )
        check_logit_range(scores)
        if scores.ndim == 1:
            return np.column_stack([np.zeros_like(scores), scores])
        return scores

    def _validate_fit_data(self, scores, y, sample_weight, classes=None):
        """Validate the fit inputs; return 2-D scores, column indices and weights."""
        with np.errstate(over="ignore", invalid="ignore"):
            # scikit-learn's finiteness check sums the scores, which may overflow
            scores, y = validate_data(
                self, scores, y, ensure_2d=False, dtype=[np.float64, np.float32]
            )
        if scores.ndim == 2 and scores.shape[1] < 2:
            raise ValueError(
                "Expected 2-D scores with one column per class (at least 2), got "
                f"{scores.shape[1]} feature(s); pass 1-D scores for a binary problem."
            )
        if scores.ndim == 2:
            self.n_features_in_ = scores.shape[1]
            self._warn_if_probabilities_as_logits(scores)
        elif hasattr(self, "n_features_in_"):
            # 1-D scores have no feature count: drop the one of an earlier 2-D fit.
            del self.n_features_in_
        check_class_labels(y)
        n_classes = 2 if scores.ndim == 1 else scores.shape[1]
        sample_weight = check_sample_weight(sample_weight, scores.shape[0])
        if classes is None:
            check_two_classes(y, sample_weight)
        classes = resolve_classes(y, classes, n_classes, names=("y", "classes", "scores"))
        two_dimensional = self._as_two_dimensional(scores)
        self._scores_ndim = scores.ndim
        self.classes_ = classes
        self.n_classes_ = n_classes
        return two_dimensional, encode_labels(y, classes, names=("y", "classes")), sample_weight

    def _warn_if_probabilities_as_logits(self, scores):
        """Warn when scores declared as logits are rows of probabilities."""
        if self.input != "logits" or scores.min() < 0 or scores.max() > 1:
            return
        if np.allclose(scores.sum(axis=1), 1.0, rtol=0, atol=1e-6):
            warnings.warn(
                "The scores are declared as logits (input='logits', the default) but every "
                "row is non-negative and sums to 1, like probabilities; pass "
                "input='probabilities' if they are, or the calibrator reads them as logits.",
                UserWarning,
                stacklevel=5,
            )

    def _validate_scores(self, scores):
        """Validate scores at predict time against the fitted number of classes."""
        check_is_fitted(self)
        with np.errstate(over="ignore", invalid="ignore"):
            scores = validate_data(
                self,
                scores,
                reset=False,
                ensure_2d=self._scores_ndim == 2,
                dtype=[np.float64, np.float32],
            )
        if scores.ndim != self._scores_ndim:
            raise ValueError(
                f"{type(self).__name__} was fitted on 1-D binary scores, got scores of shape "
                f"{scores.shape}."
            )
        return self._as_two_dimensional(scores)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


def takes_groups(calibrator):
    """Whether ``calibrator.fit`` takes group features (``groups=``)."""
    return "groups" in inspect.signature(calibrator.fit).parameters


def check_takes_groups(calibrator, argument):
    """Raise a ValueError naming ``argument`` when ``calibrator`` takes no group features."""
    if not takes_groups(calibrator):
        raise ValueError(
            f"`{argument}` needs a calibrator that takes group features (`groups=`), such "
            f"as MulticalibrationBoosting; {type(calibrator).__name__} does not."
        )


class GroupsMixin:
    """Calibrators that also take group features: ``groups=`` in fit and predict.

    Subclasses implement ``_fit(scores, y_index, sample_weight, groups)`` and
    ``_predict_proba(scores, groups)``; ``groups`` is None or the features as given,
    one row per score.
    """

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, scores, y, sample_weight=None, classes=None, groups=None):
        """Fit the calibrator.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes) or (n_samples,)
            Scores of a classifier, of the kind named by ``input``.
        y : array-like of shape (n_samples,)
            True labels. Without ``classes``: either one distinct label per score column
            (sorted labels give the column order), or integers in ``[0, n_classes)`` that
            include 0, read as column indices.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights.
        classes : array-like of shape (n_classes,), default=None
            The label of each score column.
        groups : array-like of shape (n_samples,) or (n_samples, n_group_features), \
default=None
            Group features of each row (labels, categories or numbers; a DataFrame keeps
            each column's type); the same columns are needed by ``predict_proba``.

        Returns
        -------
        self : object
            Fitted calibrator.
        """
        with self._fitting():
            if uses_dask(scores, y, sample_weight, groups):
                self._fit_dask(scores, y, sample_weight, classes)
                return self
            scores, y_index, sample_weight = self._validate_fit_data(
                scores, y, sample_weight, classes
            )
            with single_threaded_blas():
                self._fit(scores, y_index, sample_weight, groups=groups)
        return self

    def predict_proba(self, scores, groups=None):
        """Return calibrated probabilities.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes) or (n_samples,)
            Scores of the same kind and number of classes as in ``fit``.
        groups : array-like of shape (n_samples,) or (n_samples, n_group_features), \
default=None
            The group features, as in ``fit``.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), dtype float64
            Rows sum to 1; columns follow ``classes_``.
        """
        return self._predict_proba(self._validate_scores(scores), groups)

    def transform(self, scores, groups=None):
        """Return calibrated probabilities; the same as :meth:`predict_proba`.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes) or (n_samples,)
            Scores of the same kind and number of classes as in ``fit``.
        groups : array-like, default=None
            The group features, as in ``fit``.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), dtype float64
            Rows sum to 1; columns follow ``classes_``.
        """
        return self.predict_proba(scores, groups=groups)

    def predict(self, scores, groups=None):
        """Return the most probable class after calibration.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes) or (n_samples,)
            Scores of the same kind and number of classes as in ``fit``.
        groups : array-like, default=None
            The group features, as in ``fit``.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(scores, groups=groups)
        return self.classes_[np.argmax(proba, axis=1)]
