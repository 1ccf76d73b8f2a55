"""The public estimators of sklearn_calib, discovered, with the parameters that keep them tiny.

Every walk over the estimators (bad input, scikit-learn's checks, persistence, the
calibrators' invariances) takes its estimators from here rather than from a list of its
own, so that a new public estimator joins them all: the estimators are the scikit-learn
estimators in the ``__all__`` of the public modules, and
``tests/test_test_helpers.py`` fails while one of them has no entry in
:data:`TINY`.
"""

import importlib
import inspect
import pkgutil

from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.linear_model import LogisticRegression
from skorch import NeuralNet

import sklearn_calib
from sklearn_calib.label_shift import LabelShiftAdapter

#: The parameters each public estimator needs to fit in a fraction of a second on a
#: hundred rows: small networks trained for two epochs, internal cross-validations of
#: few folds over few candidates, boosting of few rounds.
TINY = {
    "BetaCalibration": {},
    "BiasCorrectedTemperatureScaling": {},
    "CalibratedClassifier": {"estimator": LogisticRegression(), "random_state": 0},
    "CalibratorSelector": {"cv": 2},
    "DirichletCalibration": {
        "cv": 2,
        "l2_regularization_off_diagonal_grid": (1e-3, 1e-1),
        "l2_regularization_intercept_grid": (1e-3,),
    },
    "EnsembleTemperatureScaling": {},
    "HistogramBinning": {},
    "IsotonicCalibration": {},
    "LabelShiftAdapter": {"n_resamples": 0},
    "LabelShiftClassifier": {
        "estimator": LogisticRegression(),
        "adapter": LabelShiftAdapter(n_resamples=0),
        "random_state": 0,
    },
    "MatrixScaling": {},
    "MetaNetClassifier": {
        "module__hidden_units": (8,),
        "max_epochs": 2,
        "batch_size": 32,
        "random_state": 0,
    },
    "MulticalibrationBoosting": {"max_iter": 5, "validation_fraction": 2, "random_state": 0},
    "NetClassifier": {
        "module__hidden_units": (8,),
        "max_epochs": 2,
        "batch_size": 32,
        "random_state": 0,
    },
    "PlattScaling": {},
    "QuadraticScaling": {},
    "ScalingBinning": {},
    "StructuredMatrixScaling": {},
    "StructuredVectorScaling": {},
    "TemperatureScaling": {},
    "VectorScaling": {},
    "VennAbersCalibrator": {},
}


def public_modules():
    """Return sklearn_calib's public modules: those without a component starting with ``_``."""
    names = [sklearn_calib.__name__]
    for info in pkgutil.walk_packages(sklearn_calib.__path__, prefix="sklearn_calib."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return [importlib.import_module(name) for name in names]


def _discover():
    found = {}
    for module in public_modules():
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) and issubclass(obj, BaseEstimator):
                found[obj.__name__] = obj
    return dict(sorted(found.items()))


#: Every public estimator class, by name.
ESTIMATORS = _discover()

#: The label-shift adapters, of scores or around a classifier: fitted on the source, then
#: ``adapt`` to a target.
LABEL_SHIFT = [name for name, cls in ESTIMATORS.items() if hasattr(cls, "adapt")]

#: The label-shift adapters of scores (``input=`` says what the scores are) and those
#: around a classifier, fitted on features.
LABEL_SHIFT_ADAPTERS = [
    name for name in LABEL_SHIFT if "input" in inspect.signature(ESTIMATORS[name]).parameters
]
LABEL_SHIFT_CLASSIFIERS = [name for name in LABEL_SHIFT if name not in LABEL_SHIFT_ADAPTERS]

#: The post-hoc calibrators: fitted on scores, ``input=`` says what the scores are.
CALIBRATORS = [
    name
    for name, cls in ESTIMATORS.items()
    if "input" in inspect.signature(cls).parameters
    and not issubclass(cls, MetaEstimatorMixin)
    and name not in LABEL_SHIFT
]

#: The meta-estimators, wrapping a classifier.
META_CLASSIFIERS = [
    name
    for name, cls in ESTIMATORS.items()
    if issubclass(cls, MetaEstimatorMixin) and name not in LABEL_SHIFT
]

#: The networks trained from ``(X, y)``.
NET_CLASSIFIERS = [name for name, cls in ESTIMATORS.items() if issubclass(cls, NeuralNet)]


def tiny(name, **params):
    """Return a new unfitted instance of the estimator ``name`` with its :data:`TINY`
    parameters, updated by ``params``."""
    return clone(ESTIMATORS[name](**{**TINY[name], **params}))
