"""Second-order regression trees on binned features, grown level by level.

The weak learner of :class:`~sklearn_calib.calibrators.MulticalibrationBoosting`. Every
feature is a column of small integer bin codes; a numeric feature's bins are ordered (a
split sends bins ``<= b`` left), a categorical feature's bins are categories (a split
sends a set of categories left, found by ordering them by their Newton step, the optimal
binary partition of a squared-error criterion, Fisher 1958). A node's split maximises

``gain = G_L^2 / (H_L + lambda) + G_R^2 / (H_R + lambda) - G^2 / (H + lambda)``

over features and bins, with ``G`` and ``H`` the sums of the rows' gradients and
hessians, subject to both children holding at least ``min_samples_leaf`` of (weighted)
rows; a leaf's value is the Newton step ``-G / (H + lambda)`` (Chen and Guestrin 2016).
One level costs three ``np.bincount`` per feature over all rows, whatever the number of
nodes. A node that does not split sends every row left, so a tree of depth ``D`` always
has ``2^D`` leaves (the empty ones are never reached).
"""

from typing import NamedTuple

import numpy as np


class HistogramTree(NamedTuple):
    """A fitted tree: which feature each internal node splits and which bins go left.

    Attributes
    ----------
    feature : ndarray of shape (2^D - 1,)
        Feature of each internal node, level by level (0 where the node does not split:
        its left table is then all True).
    left : ndarray of shape (2^D - 1, n_bins), dtype bool
        Whether each bin of the node's feature goes to the left child.
    value : ndarray of shape (2^D,)
        Value of each leaf.
    """

    feature: np.ndarray
    left: np.ndarray
    value: np.ndarray

    def apply(self, codes):
        """Leaf of each row of ``codes`` (n_rows, n_features)."""
        rows = np.arange(codes.shape[0])
        node = np.zeros(codes.shape[0], dtype=np.intp)
        first = 0
        for level in range(self.value.shape[0].bit_length() - 1):
            index = first + node
            goes_left = self.left[index, codes[rows, self.feature[index]]]
            node = 2 * node + ~goes_left
            first += 1 << level
        return node

    def predict(self, codes):
        """Leaf value of each row of ``codes`` (n_rows, n_features)."""
        return self.value[self.apply(codes)]


def _best_splits(codes, feature, n_bins, categorical, node, n_nodes, stats, options):
    """Best split of every node on one feature: its gain, bin order and split position."""
    l2, min_samples_leaf = options
    key = node * n_bins + codes[:, feature]
    size = n_nodes * n_bins
    sums = [np.bincount(key, s, minlength=size).reshape(n_nodes, n_bins) for s in stats]
    empty = sums[2] == 0
    if categorical:
        order = np.argsort(sums[0] / (sums[1] + l2), axis=1, kind="stable")
        sums = [np.take_along_axis(s, order, axis=1) for s in sums]
    else:
        order = np.broadcast_to(np.arange(n_bins), (n_nodes, n_bins))
    left = [np.cumsum(s, axis=1)[:, :-1] for s in sums]
    total = [s.sum(axis=1, keepdims=True) for s in sums]
    right = [t - s for t, s in zip(total, left, strict=True)]
    gain = (
        left[0] ** 2 / (left[1] + l2)
        + right[0] ** 2 / (right[1] + l2)
        - total[0] ** 2 / (total[1] + l2)
    )
    allowed = (left[2] >= min_samples_leaf) & (right[2] >= min_samples_leaf)
    gain = np.where(allowed, gain, -np.inf)
    position = np.argmax(gain, axis=1)
    nodes = np.arange(n_nodes)
    best = gain[nodes, position]
    # a category without rows (one unseen in fit) goes to the child with more hessian
    majority_left = left[1][nodes, position] >= right[1][nodes, position]
    return best, order, position, empty, majority_left


def fit_tree(
    codes, n_bins, categorical, gradient, hessian, count, *, max_depth, l2, min_samples_leaf
):
    """Grow a second-order regression tree on binned features.

    Parameters
    ----------
    codes : ndarray of shape (n_rows, n_features)
        Bin of each row on each feature, in ``[0, n_bins[j])``.
    n_bins : sequence of int
        Number of bins of each feature.
    categorical : sequence of bool
        Whether each feature's bins are unordered categories.
    gradient, hessian : ndarray of shape (n_rows,)
        First and second derivatives of each row's (weighted) loss.
    count : ndarray of shape (n_rows,)
        Each row's weight in ``min_samples_leaf`` (1, or its sample weight).
    max_depth : int
        Number of levels of splits.
    l2 : float
        L2 penalty on the leaf values (``lambda``), positive.
    min_samples_leaf : float
        Least total ``count`` of a child.

    Returns
    -------
    tree : HistogramTree
    """
    width = int(max(n_bins))
    n_internal = (1 << max_depth) - 1
    feature = np.zeros(n_internal, dtype=np.intp)
    left = np.ones((n_internal, width), dtype=bool)
    node = np.zeros(codes.shape[0], dtype=np.intp)
    stats = (gradient, hessian, count)
    first = 0
    for level in range(max_depth):
        n_nodes = 1 << level
        best_gain = np.zeros(n_nodes)
        for j, (bins, is_categorical) in enumerate(zip(n_bins, categorical, strict=True)):
            gain, order, position, empty, majority_left = _best_splits(
                codes, j, bins, is_categorical, node, n_nodes, stats, (l2, min_samples_leaf)
            )
            better = np.flatnonzero(gain > best_gain)
            best_gain[better] = gain[better]
            feature[first + better] = j
            table = np.ones((better.shape[0], width), dtype=bool)
            ranks = np.empty((better.shape[0], bins), dtype=np.intp)
            np.put_along_axis(ranks, order[better], np.arange(bins), axis=1)
            table[:, :bins] = ranks <= position[better, None]
            if is_categorical:
                unseen = empty[better]
                table[:, :bins] = np.where(unseen, majority_left[better, None], table[:, :bins])
            left[first + better] = table
        goes_left = left[first + node, codes[np.arange(codes.shape[0]), feature[first + node]]]
        node = 2 * node + ~goes_left
        first += n_nodes
    n_leaves = 1 << max_depth
    leaf_gradient = np.bincount(node, gradient, minlength=n_leaves)
    leaf_hessian = np.bincount(node, hessian, minlength=n_leaves)
    value = -leaf_gradient / (leaf_hessian + l2)
    return HistogramTree(feature, left, value)
