"""Group features as bin codes for the trees of MulticalibrationBoosting.

The columns and their distinct values are read as the metrics' ``groups=`` reads them
(``metrics._group_rows``).

A categorical column's bins are its categories (sorted; a category unseen in fit gets an
extra last bin); a numeric column's bins are equal-mass quantile bins. The fitted state
is plain arrays: each column's categories or inner edges, and which columns are
categorical.
"""

import numpy as np

from ..metrics._core._group_rows import check_not_missing, distinct_values, group_columns
from ._histogram_tree import quantile_edges

#: Most categories of one categorical group feature.
MAX_CATEGORIES = 1024


def _categorical_mask(columns, categorical_features):
    """Which columns are categories: "auto" (the non-floating ones), a mask or indices."""
    n_columns = len(columns)
    if isinstance(categorical_features, str):
        return np.array([column.dtype.kind not in "fc" for column in columns], dtype=bool)
    mask = np.asarray(categorical_features)
    if mask.dtype == bool and mask.shape == (n_columns,):
        return mask
    if mask.dtype.kind in "iu" and mask.ndim == 1:
        if mask.size and (mask.min() < 0 or mask.max() >= n_columns):
            raise ValueError(
                f"Expected `categorical_features` to index the {n_columns} group "
                f"feature(s), got {categorical_features!r}."
            )
        return np.isin(np.arange(n_columns), mask)
    raise ValueError(
        "Expected `categorical_features` to be 'auto', a boolean mask over the group "
        f"features or their indices, got {categorical_features!r}."
    )


def _check_length(column, n_samples):
    if column.shape[0] != n_samples:
        raise ValueError(
            f"Expected `groups` with one row per score ({n_samples}), got {column.shape[0]} rows."
        )


def _categories(column, j):
    categories = distinct_values(column, j)[0]
    if categories.shape[0] > MAX_CATEGORIES:
        raise ValueError(
            f"`groups` column {j} has {categories.shape[0]} categories, more than "
            f"{MAX_CATEGORIES}; pass it as floats to treat it as ordered."
        )
    return categories


def _numeric(column, j):
    check_not_missing(column, j)
    try:
        values = column.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"`groups` column {j} is declared numeric but holds non-numbers: {exc}"
        ) from exc
    if not np.isfinite(values).all():
        raise ValueError(f"`groups` column {j} holds infinite values.")
    return values


def fit_group_bins(groups, n_samples, categorical_features, max_bins, sample_weight):
    """The bins of each group feature.

    Parameters
    ----------
    groups : array-like of shape (n_samples,) or (n_samples, n_features)
        The group features (a DataFrame keeps each column's type).
    n_samples : int
        Number of rows expected.
    categorical_features : "auto" or array-like of bool or int
        Which columns are categories.
    max_bins : int
        Most bins of a numeric column.
    sample_weight : ndarray of shape (n_samples,) or None
        Weights of the numeric columns' quantiles (a weight counts as repeated rows).

    Returns
    -------
    bins : list of ndarray
        A categorical column's sorted categories, a numeric column's inner edges.
    categorical : ndarray of shape (n_features,), dtype bool
    """
    columns = group_columns(groups)
    categorical = _categorical_mask(columns, categorical_features)
    bins = []
    for j, (column, is_categorical) in enumerate(zip(columns, categorical, strict=True)):
        _check_length(column, n_samples)
        if is_categorical:
            bins.append(_categories(column, j))
        else:
            bins.append(quantile_edges(_numeric(column, j), max_bins, sample_weight))
    return bins, categorical


def group_codes(groups, bins, categorical, n_samples):
    """Bin codes of ``groups`` under the fitted ``bins``, shape (n_samples, n_features)."""
    columns = group_columns(groups)
    if len(columns) != len(bins):
        raise ValueError(f"Expected {len(bins)} group feature(s), as in fit, got {len(columns)}.")
    codes = np.empty((n_samples, len(columns)), dtype=np.intp)
    for j, (column, column_bins, is_categorical) in enumerate(
        zip(columns, bins, categorical, strict=True)
    ):
        _check_length(column, n_samples)
        if is_categorical:
            codes[:, j] = _category_codes(column, column_bins, j)
        else:
            codes[:, j] = np.searchsorted(column_bins, _numeric(column, j), side="left")
    return codes


def _category_codes(column, categories, j):
    """Each value's index among the sorted ``categories``; an unseen value gets the extra
    last bin, a missing one a ValueError (:func:`check_not_missing`)."""
    check_not_missing(column, j)
    try:
        position = np.searchsorted(categories, column)
    except TypeError:
        # values that cannot be ordered among the categories (a number among strings)
        index = {category: i for i, category in enumerate(categories.tolist())}
        unseen = categories.shape[0]
        return np.fromiter((index.get(value, unseen) for value in column.tolist()), np.intp)
    found = position < categories.shape[0]
    found[found] = categories[position[found]] == column[found]
    return np.where(found, position, categories.shape[0])


def bin_counts(bins):
    """Number of bins of each feature: a categorical one's last is for unseen values, a
    numeric one has one more bin than inner edges."""
    return [column_bins.shape[0] + 1 for column_bins in bins]
