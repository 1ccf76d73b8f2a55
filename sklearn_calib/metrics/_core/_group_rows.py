"""Groups of samples: their labels, their rows, and a metric computed on each.

A group is a label per sample (one array) or the intersection of several labels (the
columns of a 2-D array or a DataFrame: each distinct row is a group, named by the tuple of
its values). The metric functions' ``groups=`` and the group audit read groups here.
"""

import numbers

import numpy as np

from ._scores import resolve_convention


def group_columns(groups):
    """The columns of a groups table: a DataFrame's own (each keeps its type), or those of
    a 1-D or 2-D array."""
    if hasattr(groups, "columns") and hasattr(groups, "iloc"):
        return [np.asarray(groups.iloc[:, j]) for j in range(groups.shape[1])]
    array = np.asarray(groups)
    if array.ndim not in (1, 2):
        raise ValueError(
            f"Expected `groups` of shape (n_samples,) or (n_samples, n_columns), got shape "
            f"{array.shape}."
        )
    return [array] if array.ndim == 1 else [array[:, j] for j in range(array.shape[1])]


def _is_missing(value):
    """Whether one value is missing: None, or unequal to itself (NaN, NaT), or pandas.NA
    (whose comparisons are missing themselves)."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except TypeError:
        return True


_missing_objects = np.frompyfunc(_is_missing, 1, 1)


def missing_values(column):
    """Which entries of a column of group values are missing (None, NaN, NaT, pandas.NA)."""
    kind = column.dtype.kind
    if kind in "fc":
        return np.isnan(column)
    if kind in "mM":
        return np.isnat(column)
    if kind == "O":
        return _missing_objects(column).astype(bool)
    return np.zeros(column.shape, dtype=bool)


def check_not_missing(column, j):
    """Refuse a column of group values that holds missing values, naming them.

    A missing value is not a group: NaN is unequal to itself, so each NaN would make a
    group of one row, and None, NaN and pandas.NA cannot be sorted among labels. Merging
    them into one group would make a group the caller never named; a label of its own
    (``fillna("missing")``) says what is meant.
    """
    missing = missing_values(column)
    if missing.any():
        kinds = ", ".join(sorted({str(value) for value in column[missing]}))
        raise ValueError(
            f"Expected group labels without missing values, got {kinds} in "
            f"{int(missing.sum())} of {column.shape[0]} rows of `groups` column {j}; give "
            "them a label of their own (for example fillna('missing') on a pandas object) or "
            "leave those rows out."
        )


def distinct_values(column, j):
    """Sorted distinct values of column ``j`` of the groups, and each sample's index among
    them; a ValueError names missing values (:func:`check_not_missing`) and values that
    cannot be sorted."""
    try:
        values, codes = np.unique(column, return_inverse=True)
    except TypeError as exc:
        check_not_missing(column, j)
        raise ValueError(
            f"`groups` column {j} mixes values that cannot be compared (for example numbers "
            f"and strings): {exc}"
        ) from exc
    if missing_values(values).any():
        check_not_missing(column, j)
    return values, codes.ravel()


def encode_groups(groups, n_samples):
    """Each sample's group index and the groups' names, in sorted order.

    Parameters
    ----------
    groups : array-like of shape (n_samples,) or (n_samples, n_columns)
        A label per sample, or several columns whose distinct rows are the groups.
    n_samples : int
        Number of samples the groups must cover.

    Returns
    -------
    codes : ndarray of shape (n_samples,), dtype intp
        Index of each sample's group in ``names``.
    names : list
        The label of each group (a tuple of the columns' values for 2-D ``groups``).
    """
    columns = group_columns(groups)
    if not columns or columns[0].shape[0] != n_samples:
        rows = columns[0].shape[0] if columns else 0
        raise ValueError(f"Expected `groups` with one row per sample ({n_samples}), got {rows}.")
    encoded = [distinct_values(column, j) for j, column in enumerate(columns)]
    encoded = [(values.tolist(), codes) for values, codes in encoded]
    if len(encoded) == 1:
        values, codes = encoded[0]
        return codes.astype(np.intp), values
    stacked = np.column_stack([codes for _, codes in encoded])
    cells, codes = np.unique(stacked, axis=0, return_inverse=True)
    names = [
        tuple(values[index] for (values, _), index in zip(encoded, cell, strict=True))
        for cell in cells.tolist()
    ]
    return codes.ravel().astype(np.intp), names


def group_rows(codes, n_groups):
    """The rows of each group, as a list of index arrays (in group order)."""
    order = np.argsort(codes, kind="stable")
    bounds = np.cumsum(np.bincount(codes, minlength=n_groups))[:-1]
    return np.split(order, bounds)


class GroupedPredictions:
    """Checked predictions split by group: each group's name, rows and predictions."""

    def __init__(self, data, groups):
        self.data = data
        codes, self.names = encode_groups(groups, data.n_samples)
        self.rows = group_rows(codes, len(self.names))

    def size(self, rows):
        """Number of the rows with a positive weight."""
        if self.data.sample_weight is None:
            return rows.shape[0]
        return int(np.count_nonzero(self.data.sample_weight[rows] > 0))

    def predictions(self, rows):
        """The checked predictions of ``rows``."""
        return self.data.rows(rows)


def metric_by_group(kernel, data, groups, **options):
    """A metric's kernel computed on each group's rows.

    Parameters
    ----------
    kernel : callable
        ``kernel(predictions, **options)``, the kernel of a metric (see ``_registry``).
    data : Predictions
        Checked predictions.
    groups : array-like of shape (n_samples,) or (n_samples, n_columns)
        Group labels, or columns whose distinct rows are the groups.
    **options
        Options of the metric.

    Returns
    -------
    values : dict
        Group label to the metric on that group's rows (a float, or what ``kernel``
        returns when that is not a number); groups whose rows all weigh 0 are left out.
    """
    grouped = GroupedPredictions(data, groups)
    values = {}
    for name, rows in zip(grouped.names, grouped.rows, strict=True):
        if grouped.size(rows):
            value = kernel(grouped.predictions(rows), **options)
            values[name] = float(value) if isinstance(value, numbers.Real) else value
    return values


def overall_or_by_group(kernel, data, groups, **options):
    """``kernel(data, **options)``, or its values by group (:func:`metric_by_group`) when
    ``groups`` is given: the body of a public metric that takes ``groups=``. A
    ``convention`` option of ``"auto"`` is resolved for the one or the other
    (:func:`resolve_convention`)."""
    if "convention" in options:
        options["convention"] = resolve_convention(
            options["convention"], data.n_classes, by_group=groups is not None
        )
    if groups is None:
        return kernel(data, **options)
    return metric_by_group(kernel, data, groups, **options)
