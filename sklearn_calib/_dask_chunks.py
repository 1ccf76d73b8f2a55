"""Rows of Dask collections in aligned chunks, and sums over them merged as a tree.

Shared by the metrics and the calibrators that accept Dask input. Dask is imported only
when a Dask collection is met: :func:`is_dask_collection` recognises one by its
``__dask_graph__`` method, so a user without Dask never imports it.
"""

import numpy as np

from ._validation import check_label_values, numeric_values


def is_dask_collection(value):
    """Whether ``value`` is a Dask collection (array, DataFrame, Series), without Dask.

    Parameters
    ----------
    value : object

    Returns
    -------
    bool
    """
    return callable(getattr(value, "__dask_graph__", None)) and not isinstance(value, type)


def uses_dask(*values):
    """Whether any of ``values`` is a Dask collection."""
    return any(is_dask_collection(value) for value in values)


def _partition_lengths(*values):
    """The lengths of the partitions of each Dask DataFrame or Series among ``values`` (None
    for other values), counted in one computation."""
    import dask

    frames = [value for value in values if hasattr(value, "to_dask_array")]
    counted = iter(dask.compute(*(frame.map_partitions(len) for frame in frames)))
    return [next(counted) if hasattr(value, "to_dask_array") else None for value in values]


def _as_array(value, name, *, columns, lengths):
    """A Dask array of a Dask array, DataFrame, Series (whose partitions have ``lengths``)
    or array-like (None stays None)."""
    if value is None:
        return None
    import dask.array as da

    if hasattr(value, "to_dask_array"):
        value = _partition_values(value, lengths)
    elif not isinstance(value, da.Array):
        value = da.from_array(np.asarray(value))
    if not columns and value.ndim == 2 and value.shape[1] == 1:
        value = value[:, 0]
    if any(np.isnan(size) for size in value.shape):
        raise ValueError(f"Expected `{name}` with known chunk sizes, got shape {value.shape}.")
    return value


def _partition_values(frame, lengths):
    """A Dask array of a Dask DataFrame or Series whose partitions have ``lengths``, one
    chunk per partition.

    Each partition is read as the in-memory functions read a pandas object
    (:func:`~sklearn_calib._validation.numeric_values`): nullable and Arrow-backed columns
    become numpy numbers (missing values NaN), strings and categories objects.
    """
    import dask
    import dask.array as da
    from dask.dataframe.utils import make_meta

    meta = numeric_values(make_meta(frame))
    chunks = [
        da.from_delayed(
            dask.delayed(numeric_values)(partition), (length, *meta.shape[1:]), dtype=meta.dtype
        )
        for partition, length in zip(frame.to_delayed(), lengths, strict=True)
    ]
    return da.concatenate(chunks)


class ChunkedRows:
    """Labels, scores and weights as Dask arrays, read in the scores' row chunks.

    The labels and weights keep their own chunks: where those differ from the scores',
    each pass's task of a chunk of scores cuts the rows it needs from the chunks of labels
    and weights they span (:meth:`blocks`). Rechunking them instead would run the
    rechunk's tasks again at every pass over the rows.

    Parameters
    ----------
    y : Dask collection or array-like of shape (n_samples,), or None
        Labels; None for scores without labels.
    scores : Dask collection or array-like of shape (n_samples, n_classes) or (n_samples,)
        Probabilities or logits; their row chunks are kept, their columns joined.
    sample_weight : Dask collection or array-like of shape (n_samples,), default=None
        Sample weights.
    names : tuple of str, default=("y_true", "y_prob", "sample_weight")
        Names of the three in error messages.
    """

    def __init__(self, y, scores, sample_weight=None, names=("y_true", "y_prob", "sample_weight")):
        # the partitions of all DataFrames and Series counted in one computation
        lengths = _partition_lengths(y, scores, sample_weight)
        scores = _as_array(scores, names[1], columns=True, lengths=lengths[1])
        if scores.ndim == 2 and scores.numblocks[1] > 1:
            scores = scores.rechunk({1: -1})
        rows = tuple(size for size in scores.chunks[0] if size) or scores.chunks[0][:1]
        if rows != scores.chunks[0]:  # chunks without rows (one stays if all are)
            scores = scores.rechunk({0: rows})
        self.names = names
        self.scores = scores
        self.y = self._same_length(y, lengths[0], rows, names[0], names[1])
        self.sample_weight = self._same_length(sample_weight, lengths[2], rows, names[2], names[1])
        self.n_samples = int(sum(rows))
        self.row_chunks = rows
        self.offsets = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64)

    @staticmethod
    def _same_length(value, lengths, rows, name, scores_name):
        value = _as_array(value, name, columns=False, lengths=lengths)
        if value is None:
            return None
        if value.shape[0] != sum(rows):
            raise ValueError(
                f"`{name}` has {value.shape[0]} samples but `{scores_name}` has {sum(rows)}; "
                "they must have the same length."
            )
        return value

    def distinct_labels(self):
        """The sorted distinct labels (one pass over the labels, each chunk checked as
        :func:`check_label_values` checks labels in memory)."""
        import dask.array as da

        checked = self.y.map_blocks(_checked_labels, self.names[0], dtype=self.y.dtype)
        return np.asarray(da.unique(checked).compute())

    def blocks(self):
        """Per chunk: delayed labels, scores, weights (labels and weights may be None) and
        the first row's index."""
        score_blocks = self.scores.to_delayed().ravel()
        y_blocks = self._row_blocks(self.y)
        weight_blocks = self._row_blocks(self.sample_weight)
        return list(zip(y_blocks, score_blocks, weight_blocks, self.offsets.tolist(), strict=True))

    def _row_blocks(self, value):
        """Per chunk of the scores, the delayed rows of the 1-D ``value`` (None for None):
        its own chunks where they are the scores', else the rows cut from its chunks."""
        if value is None:
            return [None] * len(self.row_chunks)
        parts = value.to_delayed().ravel()
        if value.chunks[0] == self.row_chunks:
            return list(parts)
        import dask

        starts = np.concatenate([[0], np.cumsum(value.chunks[0])])
        # positions in these arrays (``offsets`` may continue the row ids of a stream)
        first_rows = np.cumsum((0, *self.row_chunks[:-1])).tolist()
        cut = dask.delayed(_rows_of_chunks, pure=True)
        blocks = []
        for first_row, n_rows in zip(first_rows, self.row_chunks, strict=True):
            # the chunks that hold rows first_row to first_row + n_rows (at least one)
            first = min(int(np.searchsorted(starts, first_row, side="right")) - 1, len(parts) - 1)
            end = max(int(np.searchsorted(starts, first_row + n_rows, side="left")), first + 1)
            blocks.append(cut(first_row - int(starts[first]), n_rows, *parts[first:end]))
        return blocks

    def reduce(self, function, *args, merge=None):
        """``function(y, scores, weight, first_row, *args)`` of every chunk, added up.

        The chunks' results are added pairwise, as a tree (``merge(first, second)``, or
        ``first + second``), on the active Dask scheduler (the user's client if any).

        Returns
        -------
        total : object
            The computed sum.
        """
        import dask

        combine = _plus if merge is None else merge
        parts = [dask.delayed(function)(*block, *args) for block in self.blocks()]
        while len(parts) > 1:
            pairs = zip(parts[::2], parts[1::2], strict=False)
            merged = [dask.delayed(combine)(first, second) for first, second in pairs]
            parts = merged + ([parts[-1]] if len(parts) % 2 else [])
        return dask.compute(parts[0])[0]

    def rows(self, index):
        """The rows ``index`` (sorted) of labels, scores and weights (or None), in memory."""
        import dask

        y = None if self.y is None else self.y[index]
        scores = self.scores[index]
        weight = None if self.sample_weight is None else self.sample_weight[index]
        return dask.compute(y, scores, weight)


def _rows_of_chunks(start, n_rows, *chunks):
    """``n_rows`` rows of consecutive chunks joined, from row ``start`` of the first."""
    joined = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    return joined[start : start + n_rows]


def _checked_labels(y, name):
    check_label_values(y, name)
    return y


def _plus(first, second):
    return first + second
