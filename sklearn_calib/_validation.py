"""Input validation shared by the metrics, calibrators and estimators.

Every public entry point of sklearn_calib that takes predictions and labels goes through
these helpers, so a bad input gets the same clear ``ValueError`` everywhere.
"""

import math
import numbers
import sys

import numpy as np
from sklearn.utils import _safe_indexing
from sklearn.utils.multiclass import check_classification_targets

#: Largest accepted ``|sum_k p_k - 1|`` for a row of probabilities. It admits float32
#: rounding of a softmax over many classes and the rounding of saved predictions.
ROW_SUM_TOLERANCE = 1e-3
#: Elements of a block of rows small enough to stay in the processor's cache while a pass
#: makes several reductions of it (one read of the array from memory).
CACHE_BLOCK_ELEMENTS = 1 << 17


def check_number(name, value, *, low, high=None, low_open=False, allow_inf=False):
    """Return ``value`` as a float after checking it is a real number in the given range.

    Infinite values are rejected unless ``allow_inf`` is True; NaN is always rejected.

    Parameters
    ----------
    name : str
        Name of the parameter in the error message.
    value : object
        Value to check.
    low : float
        Lower bound.
    high : float, default=None
        Upper bound (inclusive), or None for none.
    low_open : bool, default=False
        Whether ``low`` itself is excluded.
    allow_inf : bool, default=False
        Whether infinite values (within the bounds) are accepted.

    Returns
    -------
    value : float
    """
    is_number = (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and (math.isfinite(value) or (allow_inf and not math.isnan(value)))
    )
    if (
        not is_number
        or not (value > low if low_open else value >= low)
        or (high is not None and value > high)
    ):
        kind = "number" if allow_inf else "finite number"
        bound = f"{'>' if low_open else '>='} {low}" + (
            f" and <= {high}" if high is not None else ""
        )
        raise ValueError(f"Expected `{name}` to be a {kind} {bound}, got {value!r}.")
    return float(value)


def is_tensor(value):
    """Whether ``value`` is a torch tensor, without importing torch (a tensor exists only
    once torch has been imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def check_confidence_level(confidence_level):
    """Return ``confidence_level`` as a float after checking it lies in (0, 1).

    Parameters
    ----------
    confidence_level : float
        Coverage of an interval.

    Returns
    -------
    confidence_level : float
    """
    message = f"Expected `confidence_level` to be a number in (0, 1), got {confidence_level!r}."
    try:
        value = check_number("confidence_level", confidence_level, low=0, low_open=True)
    except ValueError:
        raise ValueError(message) from None
    if value >= 1:
        raise ValueError(message)
    return value


def check_option(value, name, options):
    """Return ``value`` after checking it is one of the strings ``options``.

    Parameters
    ----------
    value : object
        Value to check.
    name : str
        Name of the parameter in the error message.
    options : tuple of str
        The accepted values.

    Returns
    -------
    value : str
    """
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"Expected `{name}` to be one of {options}, got {value!r}.")
    return value


def check_n_bins(n_bins):
    """Return ``n_bins`` as an int after checking it is an integer >= 1.

    Parameters
    ----------
    n_bins : int
        Number of bins asked for.

    Returns
    -------
    n_bins : int
    """
    if isinstance(n_bins, (bool, np.bool_)) or not isinstance(n_bins, numbers.Integral):
        raise ValueError(f"Expected `n_bins` to be an integer >= 1, got {n_bins!r}.")
    if n_bins < 1:
        raise ValueError(f"Expected `n_bins` to be an integer >= 1, got {n_bins}.")
    return int(n_bins)


def numeric_values(values):
    """``np.asarray(values)``, but a pandas DataFrame of nullable numeric columns (such as
    ``Float64`` or ``Int64``), which numpy reads as objects, becomes float64 with NaN for
    its missing values (as scikit-learn's ``check_array`` reads it)."""
    array = np.asarray(values)
    if array.dtype == object and array.ndim == 2 and hasattr(values, "to_numpy"):
        if all(getattr(dtype, "kind", "O") in "biuf" for dtype in values.dtypes):
            return values.to_numpy(dtype=np.float64, na_value=np.nan)
    return array


def check_probability_shape(shape, name="y_prob"):
    """Check that probabilities of ``shape`` are 1-D, or 2-D with at least 2 columns."""
    if len(shape) not in (1, 2):
        raise ValueError(
            f"Expected `{name}` to be 1-D (positive-class probabilities) or 2-D "
            f"(n_samples, n_classes), got an array of shape {shape}."
        )
    if len(shape) == 2 and shape[1] < 2:
        raise ValueError(
            f"Expected `{name}` to have at least 2 columns, got shape {shape}; "
            "pass a 1-D array for the positive-class probabilities of a binary problem."
        )


def _as_float_array(values, name):
    """Return ``values`` as a floating array without copying float32/float64 input."""
    array = numeric_values(values)
    if array.dtype.kind in "biu":
        return array.astype(np.float64)
    if array.dtype.kind != "f":
        raise ValueError(f"Expected `{name}` to hold numbers, got an array of dtype {array.dtype}.")
    if array.dtype not in (np.float32, np.float64):
        return array.astype(np.float64)
    return array


#: How to turn logits into probabilities, for 1-D (binary) and 2-D scores.
_LOGITS_TO_PROBABILITIES = {
    1: "scipy.special.expit(logits) for the positive class's logit of a binary problem",
    2: "scipy.special.softmax(logits, axis=1)",
}


def _logits_advice(ndim, advice):
    """Return the error-message tail for scores that look like logits."""
    if advice is None:
        advice = (
            f"pass probabilities such as {_LOGITS_TO_PROBABILITIES[ndim]}, or calibrate the "
            "logits with a calibrator (input='logits') and pass its predict_proba"
        )
    return f"they look like logits (unnormalised scores): {advice}."


def check_probabilities(y_prob, *, tol=ROW_SUM_TOLERANCE, name="y_prob", logits_advice=None):
    """Validate class probabilities and return them as an (n_samples, n_classes) array.

    A 1-D input is read as the probability of the positive class of a binary problem (what
    scikit-learn scorers pass) and becomes the two columns ``(1 - p, p)``. Values above 1
    that the tolerance admits (rounding: at most ``tol`` in 1-D, a row sum within ``tol``
    in 2-D) count as 1, so a confidence, a quantile bin edge or a log-probability never
    passes 1. A 2-D input is returned without a copy when it is float32 or float64 and no
    entry exceeds 1. The checks need no temporary of the input's size and read a 2-D input
    once: non-finite values show up in the row sums, which are one matrix-vector product in
    the input's precision (float32 rounding of a sum of K terms is far below ``tol``),
    computed block by block with the smallest and largest entries.

    Parameters
    ----------
    y_prob : array-like of shape (n_samples,) or (n_samples, n_classes)
        Predicted probabilities.
    tol : float, default=ROW_SUM_TOLERANCE
        Largest accepted deviation of a row sum from 1.
    name : str, default="y_prob"
        Name of the argument, used in error messages.
    logits_advice : str, default=None
        What to do when the values look like logits (negative, or above 1 where rows do
        not sum to 1), for the error message; None says how to turn logits into
        probabilities (softmax, or a calibrator).

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes)
        float32 or float64 probabilities.
    """
    proba = _as_float_array(y_prob, name)
    check_probability_shape(proba.shape, name)
    if proba.shape[0] == 0:
        raise ValueError(f"Expected at least one sample, got empty `{name}`.")
    if proba.ndim == 1:
        if not np.isfinite(proba).all():
            raise ValueError(f"`{name}` contains NaN or infinite values.")
        if proba.min() < 0 or proba.max() > 1 + tol:
            raise ValueError(
                f"Expected 1-D `{name}` to hold positive-class probabilities in [0, 1] "
                f"(up to 1 + {tol}), got values in [{float(proba.min())}, {float(proba.max())}]; "
                + _logits_advice(1, logits_advice)
            )
        proba = np.minimum(proba, proba.dtype.type(1))
        return np.column_stack([1 - proba, proba])
    row_sums, smallest, largest = _row_sums_and_range(proba)
    lowest, highest = row_sums.min(), row_sums.max()
    if not (np.isfinite(lowest) and np.isfinite(highest)):
        raise ValueError(f"`{name}` contains NaN or infinite values.")
    if smallest < 0:
        raise ValueError(
            f"`{name}` contains negative values (minimum {smallest}); "
            + _logits_advice(2, logits_advice)
        )
    if max(highest - 1.0, 1.0 - lowest) > tol:
        row = int(np.abs(row_sums - 1.0).argmax())
        raise ValueError(
            f"Expected each row of `{name}` to sum to 1 (tolerance {tol}), "
            f"row {row} sums to {float(row_sums[row])!r}"
            + (
                f"; with values up to {float(largest)}, " + _logits_advice(2, logits_advice)
                if largest > 1 + tol
                else "."
            )
        )
    if largest > 1:
        proba = np.minimum(proba, proba.dtype.type(1))
    return proba


def _row_sums_and_range(proba):
    """The row sums and the smallest and largest entries of a 2-D array, in one read of
    it: block by block of rows that stay in the processor's cache."""
    n_samples, n_classes = proba.shape
    step = max(1, CACHE_BLOCK_ELEMENTS // max(1, n_classes))
    ones = np.ones(n_classes, dtype=proba.dtype)
    row_sums = np.empty(n_samples, dtype=proba.dtype)
    smallest, largest = np.inf, -np.inf
    for start in range(0, n_samples, step):
        block = proba[start : start + step]
        np.matmul(block, ones, out=row_sums[start : start + step])
        smallest = min(smallest, block.min())
        largest = max(largest, block.max())
    return row_sums, smallest, largest


def _check_y_true(y_true, n_samples):
    """Return ``y_true`` as a 1-D array of ``n_samples`` labels."""
    y = np.asarray(y_true)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"Expected `y_true` to be 1-D, got an array of shape {y.shape}.")
    if y.shape[0] != n_samples:
        raise ValueError(
            f"`y_true` has {y.shape[0]} samples but `y_prob` has {n_samples}; "
            "they must have the same length."
        )
    check_label_values(y, "y_true")
    return y


def check_label_values(y, name):
    """Check that the labels ``y`` (an ndarray) are finite and orderable
    (:func:`check_label_types`); ``name`` is the argument's name in error messages."""
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ValueError(f"`{name}` contains NaN or infinite values.")
    check_label_types(y, name)


def check_label_types(y, name):
    """Check that object-dtype labels can be ordered: all strings or all real numbers.

    Labels are sorted to find the classes, so None, NaN, a mix of strings and numbers or
    other types would fail deep inside numpy; this names the argument and the labels
    instead. Arrays of any other dtype pass unchecked.

    Parameters
    ----------
    y : ndarray
        Labels.
    name : str
        Name of the argument in error messages.
    """
    if y.dtype.kind != "O":
        return
    values = y.ravel().tolist()
    types = set(map(type, values))
    if type(None) in types:
        index = next(i for i, value in enumerate(values) if value is None)
        raise ValueError(
            f"`{name}` contains None (at index {index}); expected labels that are all "
            "strings or all numbers."
        )
    kinds = {_label_kind(kind) for kind in types}
    if len(kinds) > 1 or kinds - {"string", "number"}:
        names = ", ".join(sorted(kind.__name__ for kind in types))
        problem = f"mixes labels of types {names}" if len(kinds) > 1 else f"holds {names} labels"
        raise ValueError(
            f"`{name}` {problem}; expected labels that are all strings or all numbers."
        )
    if any(issubclass(kind, (float, np.floating)) for kind in types) and not all(
        math.isfinite(value) for value in values
    ):
        raise ValueError(f"`{name}` contains NaN or infinite values.")


def check_class_labels(y, name="y"):
    """Check the labels a classifier or calibrator is fitted on.

    They must be orderable (:func:`check_label_types`) and discrete (scikit-learn's
    ``check_classification_targets``: not continuous values).

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Labels.
    name : str, default="y"
        Name of the argument in error messages.
    """
    check_label_types(y, name)
    if y.ndim == 1 and y.dtype.kind in "biu":
        # 1-D integer or boolean labels are always discrete: skip scikit-learn's scan of them
        return
    check_classification_targets(y)


def check_two_classes(y, sample_weight=None):
    """Raise a ValueError when every label of ``y`` of positive weight is the same.

    The labels of rows of zero weight name classes, but do not make a class present.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Checked labels (:func:`check_class_labels`).
    sample_weight : ndarray of shape (n_samples,) or None, default=None
        Checked weights (:func:`check_sample_weight`).
    """
    among = ""
    if sample_weight is not None and not (sample_weight > 0).all():
        y, among = y[sample_weight > 0], " among the samples of positive weight"
    if y.dtype.kind in "biuf":
        single = y.min() == y.max()
    else:
        single = len(np.unique(y)) < 2
    if single:
        raise ValueError(
            f"Expected `y` to hold at least 2 classes{among}, got 1 class ({y[0]!r}); pass "
            "`classes=` to calibrate on a set that holds one class of several."
        )


def _label_kind(label_type):
    """Return "string", "number" or the type itself: labels of one kind can be ordered."""
    if issubclass(label_type, str):
        return "string"
    if issubclass(label_type, numbers.Real):
        return "number"
    return label_type


def encode_labels(y, classes, *, names=("y_true", "labels")):
    """Map labels to their column index in ``classes``.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Labels.
    classes : ndarray of shape (n_classes,)
        Distinct labels, in column order.
    names : tuple of str, default=("y_true", "labels")
        Names of ``y`` and ``classes`` in error messages.

    Returns
    -------
    y_index : ndarray of shape (n_samples,), dtype int64
        May be ``y`` itself when it already holds column indices; do not modify it.
    """
    if y.dtype.kind in "iu" and classes.dtype.kind in "iu":
        y_index = _encode_integer_labels(y, classes)
        if y_index is not None:
            return y_index
    order = np.argsort(classes, kind="stable")
    sorted_classes = classes[order]
    try:
        position = np.clip(np.searchsorted(sorted_classes, y), 0, len(classes) - 1)
    except TypeError:  # object labels of another kind than the classes: none is known
        unknown = np.ones(len(y), dtype=bool)
    else:
        unknown = sorted_classes[position] != y
    if unknown.any():
        raise ValueError(
            f"`{names[0]}` contains labels not in `{names[1]}`: "
            f"{np.unique(y[unknown]).tolist()}; known labels are {classes.tolist()}."
        )
    return order[position].astype(np.int64)


def _encode_integer_labels(y, classes):
    """Map integer labels through a lookup table; None when a label is unknown.

    Offsets from the smallest value are taken in each array's own dtype, where they
    cannot overflow, so uint64 labels beyond int64's range work too.
    """
    if len(y) == 0 or len(classes) == 0:
        return None
    low, high = int(classes.min()), int(classes.max())
    y_low, y_high = int(y.min()), int(y.max())
    if high - low > max(len(y), 1 << 16) or y_low < low or y_high > high:
        return None
    if low == 0 and high == len(classes) - 1 and np.array_equal(classes, np.arange(len(classes))):
        return y.astype(np.int64, copy=False)
    table = np.full(high - low + 1, -1, dtype=np.int64)
    table[_offsets(classes, low)] = np.arange(len(classes))
    if y_low == low == 0:
        y_index = table[y]
    else:
        position = _offsets(y, y_low)
        position += y_low - low
        y_index = table[position]
    return None if y_index.min() < 0 else y_index


def _offsets(values, low):
    """Return ``values - low`` as int64 for integers ``values >= low`` within a small range."""
    return (values - values.dtype.type(low)).astype(np.int64, copy=False)


def resolve_classes(y, labels, n_classes, *, names=("y_true", "labels", "y_prob")):
    """Return the labels that the ``n_classes`` score columns stand for.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        True labels.
    labels : array-like of shape (n_classes,) or None
        The class of each column, when the caller knows it.
    n_classes : int
        Number of score columns.
    names : tuple of str, default=("y_true", "labels", "y_prob")
        Names of ``y``, ``labels`` and the scores in error messages.

    Returns
    -------
    classes : ndarray of shape (n_classes,)
        ``labels``; else the sorted distinct labels of ``y`` when there is one per column;
        else, for integer (or boolean) labels that include 0 (or are boolean) and lie in
        ``[0, n_classes)``, the column indices, so a cross-validation fold may lack a
        class. Integer labels without 0 raise: ``[1, 2]`` for three columns may be the
        1-based labels of a fold that lacks class 3.
    """
    y_name, labels_name, scores_name = names
    if labels is not None:
        classes = np.asarray(labels)
        check_label_types(classes, labels_name)
        if classes.ndim != 1 or len(np.unique(classes)) != len(classes):
            raise ValueError(f"Expected `{labels_name}` to be 1-D and distinct, got {labels!r}.")
        if len(classes) != n_classes:
            raise ValueError(
                f"`{labels_name}` names {len(classes)} classes but `{scores_name}` has "
                f"{n_classes} columns."
            )
        return classes
    if y.dtype.kind in "iu" and y.min() == 0 and y.max() < n_classes:
        return np.arange(n_classes)
    present = np.unique(y)
    if len(present) == n_classes:
        return present
    integral = y.dtype.kind in "biu" or (
        y.dtype.kind == "f" and np.array_equal(present, np.round(present))
    )
    if integral and present.max() < n_classes and (present.min() == 0 or (y.dtype.kind == "b")):
        return np.arange(n_classes)
    raise ValueError(
        f"`{y_name}` holds {len(present)} distinct labels ({_preview(present)}) but "
        f"`{scores_name}` has {n_classes} columns; pass `{labels_name}=` to say which class "
        "each column stands for (integer labels are read as column indices only when they "
        "include 0)."
    )


def _preview(values, limit=10):
    """Return the first ``limit`` values as a short comma-separated string."""
    shown = ", ".join(str(value) for value in values[:limit].tolist())
    return shown + (", ..." if len(values) > limit else "")


def check_sample_weight(sample_weight, n_samples):
    """Return validated float64 sample weights, or None when none were given.

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,) or None
        Non-negative weights with a positive sum.
    n_samples : int
        Expected length.

    Returns
    -------
    sample_weight : ndarray of shape (n_samples,) or None
    """
    if sample_weight is None:
        return None
    weight = _as_float_array(sample_weight, "sample_weight").astype(np.float64, copy=False)
    if weight.shape != (n_samples,):
        raise ValueError(
            f"Expected `sample_weight` of shape ({n_samples},), got shape {weight.shape}."
        )
    if not np.isfinite(weight).all():
        raise ValueError("`sample_weight` contains NaN or infinite values.")
    if (weight < 0).any():
        raise ValueError("`sample_weight` contains negative values.")
    total = weight.sum()
    if total <= 0:
        raise ValueError("Expected `sample_weight` to have a positive sum, got all weights zero.")
    if not np.isfinite(total):
        raise ValueError(
            f"`sample_weight` sums to infinity (largest weight {weight.max()!r}); divide the "
            "weights by a common factor."
        )
    return weight


def check_pvalues(pvalues):
    """Return p-values as a 1-D float64 array after checking each lies in [0, 1].

    Parameters
    ----------
    pvalues : array-like of shape (m,)
        p-values.

    Returns
    -------
    pvalues : ndarray of shape (m,), dtype float64
    """
    array = _as_float_array(pvalues, "pvalues").astype(np.float64, copy=False)
    if array.ndim != 1:
        raise ValueError(f"Expected `pvalues` of shape (m,), got shape {array.shape}.")
    outside = ~((array >= 0.0) & (array <= 1.0))
    if outside.any():
        raise ValueError(
            f"Expected `pvalues` in [0, 1], got {_preview(array[outside])} "
            f"({int(outside.sum())} of {array.shape[0]})."
        )
    return array


def check_classification_inputs(y_true, y_prob, *, labels=None, sample_weight=None):
    """Validate labels, probabilities and weights of one set of predictions.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples,) or (n_samples, n_classes)
        Predicted probabilities; 1-D means positive-class probabilities of a binary problem.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``. When None, the sorted distinct labels of
        ``y_true`` if there are as many as columns; otherwise integer labels that include 0
        are read as column indices (a cross-validation fold may lack a class). Anything
        else raises.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative sample weights.

    Returns
    -------
    y_index : ndarray of shape (n_samples,), dtype int64
        Column index of each sample's true class.
    proba : ndarray of shape (n_samples, n_classes)
        Probabilities, float32 or float64.
    sample_weight : ndarray of shape (n_samples,) or None
    """
    proba = check_probabilities(y_prob)
    y_index, sample_weight = check_targets(y_true, proba.shape, labels, sample_weight)
    return y_index, proba, sample_weight


def check_targets(y_true, shape, labels=None, sample_weight=None):
    """Validate the labels and weights of predictions whose probabilities are checked.

    ``y_true``, ``labels`` and ``sample_weight`` are read as by
    :func:`check_classification_inputs`, for probabilities of ``shape``
    ``(n_samples, n_classes)``; returns ``(y_index, sample_weight)`` as it does.
    """
    n_samples, n_classes = shape
    y = _check_y_true(y_true, n_samples)
    y_index = encode_labels(y, resolve_classes(y, labels, n_classes))
    return y_index, check_sample_weight(sample_weight, n_samples)


def select_columns(X, columns, name="group_features"):
    """The columns of ``X`` named by a column selector, as ColumnTransformer reads them.

    Parameters
    ----------
    X : array-like or DataFrame of shape (n_samples, n_features)
        The data.
    columns : int, str, array-like of int, str or bool, slice or callable
        Column indices, names (of a DataFrame), a boolean mask, a slice, or a callable
        ``columns(X)`` returning the selected columns.
    name : str, default="group_features"
        The parameter's name, for the error message.

    Returns
    -------
    selected : array-like of shape (n_samples,) or (n_samples, n_selected)
        1-D for a single int or str, the type of ``X`` otherwise (a DataFrame stays one).
    """
    if callable(columns):
        return columns(X)
    try:
        return _safe_indexing(X, columns, axis=1)
    except (IndexError, KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"Could not select `{name}`={columns!r} from X: {exc}") from exc
