"""Second-order regression trees on binned features, grown level by level, and the
equal-mass binning of their numeric features.

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

from ..metrics._core._binning import quantile_bin_edges


def quantile_edges(values, max_bins, sample_weight):
    """Inner edges of at most ``max_bins`` equal-mass bins of ``values`` (distinct).

    The library's equal-mass rule (``metrics._core._binning.quantile_bin_edges``): a sample
    weight counts as repeated rows; a value ``x`` falls in bin
    ``searchsorted(edges, x, side="left")``, the ``(lower, upper]`` rule.
    """
    return np.unique(quantile_bin_edges(values, max_bins, sample_weight)[1:-1])


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
        Value of each leaf at its centre.
    center : ndarray of shape (2^D,)
        Hessian-weighted mean of the linear feature in each leaf.
    slope : ndarray of shape (2^D,)
        Slope of each leaf's value in the linear feature (0 without one).
    """

    feature: np.ndarray
    left: np.ndarray
    value: np.ndarray
    center: np.ndarray
    slope: np.ndarray

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

    def predict(self, codes, linear):
        """Value of each row: its leaf's value plus slope times its offset from the centre.

        Parameters
        ----------
        codes : ndarray of shape (n_rows, n_features)
            Bin codes.
        linear : ndarray of shape (n_rows,)
            The linear feature.
        """
        leaf = self.apply(codes)
        return self.value[leaf] + self.slope[leaf] * (linear - self.center[leaf])

    def scaled(self, factor):
        """The tree with its values and slopes multiplied by ``factor``."""
        return self._replace(value=factor * self.value, slope=factor * self.slope)


def _leaf_score(sums, l2):
    """``-2 x`` the least penalised second-order loss of a leaf with these sums.

    Constant leaves: ``G^2 / (H + lambda)``. Linear leaves (sums also of ``g x``,
    ``h x``, ``h x^2``) add the slope's share on the feature centred at the leaf's
    hessian-weighted mean ``c``: ``(sum g (x - c))^2 / (sum h (x - c)^2 + lambda)``.
    """
    score = sums[0] ** 2 / (sums[1] + l2)
    if len(sums) > 3:
        gradient_x, hessian_x, hessian_xx = sums[3:]
        center = np.divide(hessian_x, sums[1], out=np.zeros_like(hessian_x), where=sums[1] > 0)
        spread = np.maximum(hessian_xx - center * hessian_x, 0.0)
        score = score + (gradient_x - center * sums[0]) ** 2 / (spread + l2)
    return score


def _split_gains(sums, l2, min_samples_leaf):
    """Gain of splitting after each bin of ``sums`` (in their order), ``-inf`` if barred."""
    left = [np.cumsum(s, axis=1)[:, :-1] for s in sums]
    total = [s.sum(axis=1, keepdims=True) for s in sums]
    right = [t - s for t, s in zip(total, left, strict=True)]
    gain = _leaf_score(left, l2) + _leaf_score(right, l2) - _leaf_score(total, l2)
    allowed = (left[2] >= min_samples_leaf) & (right[2] >= min_samples_leaf)
    return np.where(allowed, gain, -np.inf), left[1], right[1]


def _category_orders(sums, l2):
    """Orders of the categories to scan: by their intercept step, and by their slope step
    when the leaves are linear (a split by either is optimal for that part alone)."""
    orders = [np.argsort(sums[0] / (sums[1] + l2), axis=1, kind="stable")]
    if len(sums) > 3:
        center = np.divide(sums[4], sums[1], out=np.zeros_like(sums[4]), where=sums[1] > 0)
        spread = np.maximum(sums[5] - center * sums[4], 0.0)
        slope = (sums[3] - center * sums[0]) / (spread + l2)
        orders.append(np.argsort(slope, axis=1, kind="stable"))
    return orders


def _best_splits(codes, feature, n_bins, categorical, node, n_nodes, stats, options):
    """Best split of every node on one feature: its gain, bin order and split position."""
    l2, min_samples_leaf = options
    key = node * n_bins + codes[:, feature]
    size = n_nodes * n_bins
    sums = [np.bincount(key, s, minlength=size).reshape(n_nodes, n_bins) for s in stats]
    empty = sums[2] == 0
    if categorical:
        orders = _category_orders(sums, l2)
    else:
        orders = [np.broadcast_to(np.arange(n_bins), (n_nodes, n_bins))]
    nodes = np.arange(n_nodes)
    best = None
    for order in orders:
        ordered = [np.take_along_axis(s, order, axis=1) for s in sums]
        gain, left_hessian, right_hessian = _split_gains(ordered, l2, min_samples_leaf)
        position = np.argmax(gain, axis=1)
        candidate = (gain[nodes, position], order, position, left_hessian, right_hessian)
        if best is None:
            best = candidate
            continue
        better = candidate[0] > best[0]
        best = tuple(
            np.where(better.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)
            for new, old in zip(candidate, best, strict=True)
        )
    gain, order, position, left_hessian, right_hessian = best
    # a category without rows (one unseen in fit) goes to the child with more hessian
    majority_left = left_hessian[nodes, position] >= right_hessian[nodes, position]
    return gain, order, position, empty, majority_left


def fit_tree(
    codes,
    n_bins,
    categorical,
    gradient,
    hessian,
    count,
    linear,
    *,
    max_depth,
    l2,
    min_samples_leaf,
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
    linear : ndarray of shape (n_rows,) or None
        A feature each leaf's value is linear in, or None for constant leaves.
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
    if linear is not None:
        stats += (gradient * linear, hessian * linear, hessian * linear**2)
    first = 0
    for level in range(max_depth):
        n_nodes = 1 << level
        best_gain = np.zeros(n_nodes)
        for j, (bins, is_categorical) in enumerate(zip(n_bins, categorical, strict=True)):
            if bins < 2:  # a single bin (every value equal) cannot be split
                continue
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
    leaf_hessian = np.bincount(node, hessian, minlength=n_leaves)
    value = -np.bincount(node, gradient, minlength=n_leaves) / (leaf_hessian + l2)
    center, slope = np.zeros(n_leaves), np.zeros(n_leaves)
    if linear is not None:
        moment = np.bincount(node, hessian * linear, minlength=n_leaves)
        center = np.divide(moment, leaf_hessian, out=center, where=leaf_hessian > 0)
        offset = linear - center[node]
        spread = np.bincount(node, hessian * offset**2, minlength=n_leaves)
        slope = -np.bincount(node, gradient * offset, minlength=n_leaves) / (spread + l2)
    return HistogramTree(feature, left, value, center, slope)
