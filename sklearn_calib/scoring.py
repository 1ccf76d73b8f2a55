"""Calibration metrics and their scikit-learn scorers.

The metric functions (numpy) live in :mod:`sklearn_calib.metrics` and are re-exported
here, with the statistics of calibration (bootstrap intervals, tests, decompositions, the
calibration report). Each scorer is what
``make_scorer(metric, response_method="predict_proba", greater_is_better=False)`` builds,
so it returns the negated metric, with one addition: it passes the fitted estimator's
``classes_`` as ``labels=``, so a cross-validation fold that lacks a class is still scored
against the right columns, whatever the label type.
Use them by name through :func:`get_scorer`::

    GridSearchCV(LogisticRegression(), {"C": [0.1, 1]}, scoring=get_scorer("neg_ece"))

scikit-learn's model selection knows only its own scorer names (it has no way to register
others): ``GridSearchCV(..., scoring="neg_ece")`` fails with the list of scikit-learn's
names. Pass the object :func:`get_scorer` returns instead.
"""

import inspect

from sklearn.metrics import get_scorer as _sklearn_get_scorer
from sklearn.metrics import get_scorer_names as _sklearn_get_scorer_names
from sklearn.metrics._scorer import _Scorer

from . import metrics
from ._validation import select_columns
from .metrics import (
    BootstrapInterval,
    CalibrationTestResult,
    adaptive_calibration_error,
    adjust_pvalues,
    brier_score,
    calibration_audit,
    calibration_decomposition,
    calibration_equivalence_test,
    calibration_error_ci,
    calibration_report,
    calibration_test,
    classwise_calibration_error,
    debiased_calibration_error,
    differentiable_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    paired_change_test,
    refinement_loss,
    reliability_band,
    reliability_diagram,
    smooth_calibration_error,
    smooth_ece,
    smooth_reliability_diagram,
    top_label_accuracy,
    top_label_calibration_error,
    worst_group_calibration_error,
)
from .metrics._core._registry import declared

__all__ = [
    "BootstrapInterval",
    "CalibrationTestResult",
    "adaptive_calibration_error",
    "adjust_pvalues",
    "brier_score",
    "calibration_audit",
    "calibration_decomposition",
    "calibration_equivalence_test",
    "calibration_error_ci",
    "calibration_report",
    "calibration_test",
    "classwise_calibration_error",
    "debiased_calibration_error",
    "differentiable_calibration_error",
    "expected_calibration_error",
    "get_scorer",
    "get_scorer_names",
    "make_calibration_scorer",
    "make_worst_group_scorer",
    "maximum_calibration_error",
    "negative_log_likelihood",
    "paired_change_test",
    "refinement_loss",
    "reliability_band",
    "reliability_diagram",
    "smooth_calibration_error",
    "smooth_ece",
    "smooth_reliability_diagram",
    "top_label_accuracy",
    "top_label_calibration_error",
    "worst_group_calibration_error",
]


class _CalibrationScorer(_Scorer):
    """A ``make_scorer`` probability scorer that also passes ``labels=estimator.classes_``.

    scikit-learn hands a metric only ``y_true`` and the probabilities (the positive-class
    column for a binary estimator), so a metric cannot tell which class a column stands
    for when the fold lacks a class. Labels set through ``make_calibration_scorer(...,
    labels=...)`` or passed as metadata take precedence.
    """

    def _score(self, method_caller, estimator, X, y_true, **kwargs):
        classes = getattr(estimator, "classes_", None)
        if classes is not None and "labels" not in self._kwargs and "labels" not in kwargs:
            kwargs["labels"] = classes
        return super()._score(method_caller, estimator, X, y_true, **kwargs)


def make_calibration_scorer(score_func, **kwargs):
    """Make a scorer from a calibration metric (lower is better) on ``predict_proba``.

    Parameters
    ----------
    score_func : callable
        ``score_func(y_true, y_prob, labels=..., **kwargs)`` returning an error.
    **kwargs
        Fixed keyword arguments for ``score_func`` (for example ``n_bins=10``); a name
        that ``score_func`` does not take raises a ValueError listing those it takes.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y, sample_weight=None)`` returning ``-score_func(...)``,
        the scorer of ``make_scorer(score_func, response_method="predict_proba",
        greater_is_better=False, **kwargs)`` that also passes ``labels=estimator.classes_``.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn_calib.scoring import expected_calibration_error, make_calibration_scorer
    >>> X, y = load_digits(return_X_y=True)
    >>> model = LogisticRegression(max_iter=1000).fit(X, y)
    >>> scorer = make_calibration_scorer(expected_calibration_error, n_bins=10)
    >>> scorer(model, X, y) == -expected_calibration_error(y, model.predict_proba(X), n_bins=10)
    True
    """
    _check_keywords(score_func, kwargs)
    return _CalibrationScorer(score_func, -1, kwargs, response_method="predict_proba")


def _check_keywords(score_func, kwargs):
    """Reject keyword arguments ``score_func`` does not take, naming those it takes."""
    if not callable(score_func):
        raise ValueError(f"Expected `score_func` to be a metric function, got {score_func!r}.")
    parameters = inspect.signature(score_func).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    valid = [p.name for p in parameters if p.kind in named][2:]
    unknown = sorted(set(kwargs) - set(valid))
    if unknown:
        raise ValueError(
            f"{getattr(score_func, '__name__', score_func)!r} takes no argument(s) {unknown}; "
            f"its options are {valid}."
        )


class _GroupFeatureScorer(_CalibrationScorer):
    """A worst-group scorer that reads the groups from columns of ``X``."""

    def __init__(self, score_func, sign, kwargs, response_method, group_features):
        super().__init__(score_func, sign, kwargs, response_method=response_method)
        self._group_features = group_features

    def _score(self, method_caller, estimator, X, y_true, **kwargs):
        kwargs["groups"] = select_columns(X, self._group_features)
        return super()._score(method_caller, estimator, X, y_true, **kwargs)

    def __repr__(self):
        return f"{super().__repr__()[:-1]}, group_features={self._group_features!r})"


def make_worst_group_scorer(metric=expected_calibration_error, *, group_features=None, **kwargs):
    """Make a scorer of the worst group's calibration error (lower is better).

    The scorer returns ``-worst_group_calibration_error(y, predict_proba(X), groups=...,
    metric=metric, **kwargs)``, so model selection maximising it minimises the largest
    error over the groups. The groups come from ``X`` or from metadata:

    - ``group_features`` given: the columns of ``X`` it selects (as ColumnTransformer
      reads a selector: indices, DataFrame column names, a boolean mask, or a callable
      of ``X``) are the groups (several columns: their intersections);
    - ``group_features=None``: the groups are scikit-learn metadata, routed to the
      scorer: ``sklearn.set_config(enable_metadata_routing=True)``,
      ``scorer.set_score_request(groups=True)``, then ``GridSearchCV(...).fit(X, y,
      groups=groups)`` (each fold's rows are passed on).

    Parameters
    ----------
    metric : callable, default=expected_calibration_error
        The error computed on each group's rows.
    group_features : int, str, array-like, slice, callable or None, default=None
        The columns of ``X`` holding the groups, or None for routed metadata.
    **kwargs
        Options of ``metric`` (for example ``n_bins=10``).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y)``, which also passes ``labels=estimator.classes_``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import GridSearchCV
    >>> from sklearn_calib.scoring import make_worst_group_scorer
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([rng.normal(size=600), rng.integers(0, 3, 600)])
    >>> y = (X[:, 0] + 0.5 * X[:, 1] + rng.normal(size=600) > 0.5).astype(int)
    >>> scorer = make_worst_group_scorer(group_features=[1], n_bins=10)
    >>> search = GridSearchCV(LogisticRegression(), {"C": [0.01, 1.0]}, scoring=scorer, cv=3)
    >>> float(search.fit(X, y).best_score_) < 0
    True
    """
    _check_keywords(metric, kwargs)
    options = {"metric": metric, **kwargs}
    if group_features is None:
        return _CalibrationScorer(
            worst_group_calibration_error, -1, options, response_method="predict_proba"
        )
    return _GroupFeatureScorer(
        worst_group_calibration_error, -1, options, "predict_proba", group_features
    )


def _scorers():
    """Scorer name to scorer, as the metric declarations name them
    (``metrics._core._registry``)."""
    scorers = {}
    for metric in declared():
        for scorer in metric.scorers:
            if scorer.worst_group:
                scorers[scorer.name] = make_worst_group_scorer(metric.function, **scorer.options)
            else:
                _check_keywords(metric.function, scorer.options)
                sign = 1 if scorer.greater_is_better else -1
                scorers[scorer.name] = _CalibrationScorer(
                    metric.function, sign, dict(scorer.options), response_method="predict_proba"
                )
    return scorers


def get_scorer(scoring):
    """Return a scorer by name: one of ours, else scikit-learn's ``get_scorer(scoring)``.

    Our names: ``neg_ece``, ``neg_mce``, ``neg_adaptive_ece``, ``neg_classwise_ece``,
    ``neg_sece``, ``neg_smooth_ece`` (smECE), ``neg_top_label_ece`` (Gupta & Ramdas),
    ``neg_debiased_ce`` (Kumar et al.'s debiased L2 error), ``neg_brier``, ``neg_nll``,
    and ``neg_refinement_log_loss`` / ``neg_refinement_brier`` (:func:`refinement_loss`:
    the score left after temperature scaling, to select a network by what post-hoc
    calibration cannot fix), and ``neg_worst_group_ece`` / ``neg_worst_group_smooth_ece``
    (the largest error over groups passed as metadata, see
    :func:`make_worst_group_scorer`). scikit-learn's model selection does not know
    these names as strings (``GridSearchCV(..., scoring="neg_ece")`` fails with the list
    of scikit-learn's names), so pass the returned objects, alone or as the values of a
    dict: ``scoring={"ece": get_scorer("neg_ece"), "acc": "accuracy"}``.

    Parameters
    ----------
    scoring : str, callable or None
        A scorer name, or anything :func:`sklearn.metrics.get_scorer` accepts.

    Returns
    -------
    scorer : callable
        A fresh copy, safe to modify.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import cross_val_score
    >>> from sklearn_calib.scoring import get_scorer
    >>> X, y = load_digits(return_X_y=True)
    >>> neg_ece = cross_val_score(
    ...     LogisticRegression(max_iter=1000), X, y, cv=3, scoring=get_scorer("neg_ece")
    ... )
    >>> bool((neg_ece < 0).all())  # negated errors: greater is better
    True
    """
    scorers = _scorers()
    if isinstance(scoring, str) and scoring in scorers:
        return scorers[scoring]
    if isinstance(scoring, str) and scoring not in _sklearn_get_scorer_names():
        raise ValueError(
            f"{scoring!r} is not a valid scoring value; "
            "sklearn_calib.scoring.get_scorer_names() lists the valid names."
        )
    return _sklearn_get_scorer(scoring)


def __getattr__(name):
    """Deprecated names of the module (those of :mod:`sklearn_calib.metrics`)."""
    if name == "NLL_EPS":
        return metrics.NLL_EPS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_scorer_names():
    """Return the names :func:`get_scorer` accepts: ours and scikit-learn's, sorted.

    Returns
    -------
    names : list of str
        The names, sorted.

    Examples
    --------
    >>> from sklearn_calib.scoring import get_scorer_names
    >>> names = get_scorer_names()
    >>> "neg_ece" in names and "accuracy" in names
    True
    """
    return sorted(set(_scorers()) | set(_sklearn_get_scorer_names()))
