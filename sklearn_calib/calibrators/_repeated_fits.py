"""What fits that fit several models share: folds, candidates, penalties, faces.

Each distinct warning is issued once per fit (:func:`distinct_warnings`; joblib workers
hand theirs back with :func:`call_recording_warnings`), a part of the data without weight
is named in an error (:func:`check_part_weight`, :func:`check_fold_weights`), and
candidates are ranked as scikit-learn's ``GridSearchCV`` ranks them (:func:`rank_scores`).
"""

import contextlib
import warnings

import numpy as np


def call_recording_warnings(function, *args, **kwargs):
    """Call ``function`` and return its result with the warnings it issued, as records.

    The records (message, category, file name, line) pickle, so that a joblib worker
    can hand them to the process that re-issues them (:func:`reissue_warnings`).

    Returns
    -------
    result : object
    records : list of tuple
    """
    with warnings.catch_warnings(record=True) as caught:
        result = function(*args, **kwargs)
    return result, [(w.message, w.category, w.filename, w.lineno) for w in caught]


def reissue_warnings(records):
    """Issue each distinct warning of ``records`` (category and text) once, where it arose."""
    seen = set()
    for message, category, filename, lineno in records:
        key = (category, str(message))
        if key not in seen:
            seen.add(key)
            warnings.warn_explicit(message, category, filename, lineno)


@contextlib.contextmanager
def distinct_warnings():
    """Context manager that issues each distinct warning raised inside it once, at its end.

    A fit that fits many models (folds, candidates, penalties, constraint faces) would
    repeat the same warning for each. The warnings are issued also when the block raises;
    the user's warning filters apply to each (an ``"error"`` filter raises at the first).
    """
    records = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            try:
                yield
            finally:
                records = [(w.message, w.category, w.filename, w.lineno) for w in caught]
    finally:
        reissue_warnings(records)


def check_part_weight(sample_weight, rows, part):
    """Raise a ValueError naming ``part`` when its rows' sample weights sum to 0.

    Parameters
    ----------
    sample_weight : ndarray of shape (n_samples,) or None
        Non-negative weights of all the rows (None: every row weighs 1).
    rows : ndarray of int
        The rows of the part.
    part : str
        The part's name in the message, such as ``"the training part of fold 1 of 3"``.
    """
    if sample_weight is None or sample_weight[rows].sum() > 0:
        return
    raise ValueError(
        f"Expected every part fitted or scored to have a positive total sample weight, got "
        f"0 for {part} ({len(rows)} of the {len(sample_weight)} samples, whose weights sum "
        f"to {sample_weight.sum():.6g}). Use folds that spread the weighted samples (for "
        "example a shuffled KFold or StratifiedKFold), or leave out the samples of zero "
        "weight."
    )


def check_fold_weights(folds, sample_weight):
    """Raise a ValueError naming the first fold whose training or held-out part weighs 0.

    Parameters
    ----------
    folds : list of (ndarray, ndarray)
        The training and held-out rows of each fold of ``cv``.
    sample_weight : ndarray of shape (n_samples,) or None
    """
    for i, (train, test) in enumerate(folds, 1):
        check_part_weight(sample_weight, train, f"the training part of fold {i} of {len(folds)}")
        check_part_weight(sample_weight, test, f"the held-out part of fold {i} of {len(folds)}")


def rank_scores(scores):
    """Ranks of mean scores, greater is better, as scikit-learn's ``GridSearchCV`` gives them.

    Tied scores share the lowest rank of their group (``[1, 1, 3]``); NaN scores rank
    last, tied with each other.

    Parameters
    ----------
    scores : ndarray of shape (n_candidates,)

    Returns
    -------
    ranks : ndarray of shape (n_candidates,), dtype int64
    """
    finite = np.where(np.isnan(scores), -np.inf, scores)
    # a candidate's rank is 1 + the number of candidates that score strictly better
    better = (finite[None, :] > finite[:, None]).sum(axis=1)
    last = np.isnan(scores)
    better[last] = np.count_nonzero(~last)
    return (better + 1).astype(np.int64)
