"""Venn-Abers predictors (Vovk and Petej 2014; Vovk, Petej and Fedorova 2015).

An inductive Venn-Abers predictor turns the score of a binary classifier into a pair of
probabilities ``(p0, p1)``: the values at the test score of two isotonic regressions of
the calibration labels, one with the test example added with label 0, one with label 1.
One of the two is a perfectly calibrated probability (the validity of Venn predictors,
for exchangeable calibration and test examples), and the width ``p1 - p0`` says how much
the calibration set pins the score down. Their merge ``p1 / (1 - p0 + p1)`` is the
probability of least worst-case log-loss regret.
"""

import numpy as np
from sklearn.utils._param_validation import StrOptions

from ._base import BaseCalibrator, renormalize
from ._binary_logistic import one_vs_rest_log_probabilities
from ._ivap import fit_grid, grid_interval

__all__ = ["VennAbersCalibrator"]


def merged_probability(p0, p1):
    """The log-loss merge ``p1 / (1 - p0 + p1)`` of Venn-Abers pairs (elementwise).

    Parameters
    ----------
    p0, p1 : ndarray
        Lower and upper probabilities, ``0 <= p0 <= p1 <= 1``.

    Returns
    -------
    p : ndarray
    """
    return p1 / (1.0 - p0 + p1)


def merge_folds(p0, p1):
    """Vovk et al.'s merge of the pairs of several Venn-Abers predictors (cross form).

    The merged probability ``GM(p1) / (GM(1 - p0) + GM(p1))`` (``GM`` the geometric mean
    over the predictors) is the merge of the pair ``(1 - GM(1 - p0), GM(p1))``, which is
    returned.

    Parameters
    ----------
    p0, p1 : ndarray of shape (n_predictors, ...)
        Each predictor's pairs.

    Returns
    -------
    p0, p1 : ndarray of shape (...)
    """
    with np.errstate(divide="ignore"):
        upper = np.exp(np.log(p1).mean(axis=0))
        lower = 1.0 - np.exp(np.log1p(-p0).mean(axis=0))
    return lower, upper


def _binary_interval(p0, p1):
    """Both columns of a binary problem's pairs: class 0's ``(1 - p1, 1 - p0)``."""
    return np.column_stack([1.0 - p1, p0]), np.column_stack([1.0 - p0, p1])


class VennAbersCalibrator(BaseCalibrator):
    """Inductive Venn-Abers predictor: a pair of probabilities per class, and their merge.

    For a binary problem, one inductive Venn-Abers predictor (IVAP) on the positive
    class's score (a 1-D decision function, the log-odds of two logits, or the
    positive-class probability): for each test score, ``p0`` and ``p1`` are the isotonic
    regressions of the calibration labels at that score with the test example added as
    label 0 and as label 1, and :meth:`predict_proba` gives their merge
    ``p1 / (1 - p0 + p1)``. Only the order of the scores matters. All test scores' pairs
    come from one pass over the calibration set's cumulative-sum diagram (Vovk, Petej and
    Fedorova 2015), in ``O(n log n)`` time, not one isotonic fit per test score.

    Beyond two classes, binary predictors are combined by ``multi_class``:

    - ``"one_vs_rest"``: one IVAP per class on its one-vs-rest score (the log-odds
      ``log p_k - log(1 - p_k)`` of logits, or ``p_k``); each row of merged
      probabilities is divided by its sum.
    - ``"one_vs_one"`` (Manokhin 2017): one IVAP per pair of classes ``i < j``,
      calibrated on the samples of those two classes, on the score ``z_j - z_i`` of
      logits or ``p_j / (p_i + p_j)`` of probabilities; the pairwise probabilities are
      coupled by Price et al.'s rule ``p_c = 1 / (sum_{d != c} 1 / r_cd - (k - 2))`` and
      each row is divided by its sum. It fits ``k (k - 1) / 2`` predictors. With many
      classes and few samples per pair, the coupling adds up the pairs' shortfalls from
      1 and the top probability collapses (100 classes, 5,000 samples: a mean top
      probability near 0.2 at an accuracy of 0.74 on CIFAR-100 outputs).

    The pairs of :meth:`predict_interval` are the binary predictors' for
    ``"one_vs_rest"``, and Price et al.'s coupling of the pairwise lower (upper)
    probabilities for ``"one_vs_one"``, neither divided by a row sum.

    The cross form (CVAP, Vovk et al. 2015) is a :class:`CalibratedClassifier` with this
    calibrator and cross-validation folds (``ensemble=True``): one predictor per fold,
    calibrated on the fold's held-out scores of the estimator fitted on the other folds,
    whose pairs are merged by the geometric means ``GM(p1) / (GM(1 - p0) + GM(p1))``
    instead of an average of probabilities.

    Sample weights are counts: an integer weight ``m`` stands for ``m`` copies of its
    row (0 for none), which keeps the validity of the predictor for the repeated data.
    Other weights raise a ValueError: the test example counts as one example, so a weight
    that is not a count changes the pair with the weights' scale.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are. See :mod:`sklearn_calib.calibrators` for 1-D binary scores.
    multi_class : {"one_vs_rest", "one_vs_one"}, default="one_vs_rest"
        How more than two classes are reduced to binary problems; ignored for two.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).
    pairs_ : ndarray of shape (n_problems, 2)
        The classes (column indices) of each binary problem: ``(k, -1)`` for a class
        against the rest, ``(i, j)`` for the pair ``i < j`` with ``j`` the positive
        class; ``[[1, -1]]`` for a binary problem.

    See Also
    --------
    IsotonicCalibration : One isotonic regression per class, without the test example.

    References
    ----------
    V. Vovk and I. Petej, "Venn-Abers predictors", Conference on Uncertainty in Artificial
    Intelligence, 2014.

    V. Vovk, I. Petej and V. Fedorova, "Large-scale probabilistic predictors with and
    without guarantees of validity", Advances in Neural Information Processing Systems,
    2015.

    V. Manokhin, "Multi-class probabilistic classification using inductive and cross
    Venn-Abers predictors", Conformal and Probabilistic Prediction and Applications, 2017.

    D. Price, S. Knerr, L. Personnaz and G. Dreyfus, "Pairwise neural network classifiers
    with probabilistic outputs", Advances in Neural Information Processing Systems, 1995.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import VennAbersCalibrator
    >>> decision = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0])
    >>> va = VennAbersCalibrator().fit(decision, [0, 0, 1, 0, 1, 0, 1, 1])
    >>> p0, p1 = va.predict_interval(np.array([0.2]))
    >>> round(float(p0[0, 1]), 3), round(float(p1[0, 1]), 3)
    (0.333, 0.667)
    >>> round(float(va.predict_proba(np.array([0.2]))[0, 1]), 3)  # 0.667 / (1 - 0.333 + 0.667)
    0.5
    """

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "multi_class": [StrOptions({"one_vs_rest", "one_vs_one"})],
    }

    def __init__(self, *, input="logits", multi_class="one_vs_rest"):
        self.input = input
        self.multi_class = multi_class

    def _fit(self, scores, y_index, sample_weight):
        if sample_weight is not None:
            _check_counts(sample_weight)
            kept = sample_weight > 0
            scores, y_index, sample_weight = scores[kept], y_index[kept], sample_weight[kept]
        self.pairs_ = self._problems(scores.shape[1])
        problem_scores = self._problem_scores(scores)
        problems = []
        for (negative, positive), score in zip(self.pairs_, problem_scores, strict=True):
            if negative >= 0:
                rows = np.flatnonzero((y_index == negative) | (y_index == positive))
            else:
                rows = slice(None)
            weight = None if sample_weight is None else sample_weight[rows]
            problems.append((score[rows], y_index[rows] == positive, weight))
        self._grid = fit_grid(problems)

    def _problems(self, n_classes):
        """The binary problems: ``(-1 or the negative class, the positive class)``."""
        if n_classes == 2:
            return np.array([[-1, 1]])
        if self.multi_class == "one_vs_rest":
            return np.column_stack([np.full(n_classes, -1), np.arange(n_classes)])
        return np.array([(i, j) for i in range(n_classes) for j in range(i + 1, n_classes)])

    def _problem_scores(self, scores):
        """Yield the score of every row for each binary problem (order matters only)."""
        if scores.shape[1] == 2 or self.multi_class == "one_vs_rest":
            if self.input == "probabilities":
                columns = scores.astype(np.float64)
            else:
                log_proba, log_rest = one_vs_rest_log_probabilities(scores, "logits")
                columns = log_proba - log_rest
            for _, positive in self._problems(scores.shape[1]):
                yield columns[:, positive]
            return
        for negative, positive in self.pairs_:
            if self.input == "logits":
                yield scores[:, positive].astype(np.float64) - scores[:, negative]
                continue
            first, second = scores[:, negative], scores[:, positive]
            total = first.astype(np.float64) + second
            with np.errstate(invalid="ignore"):
                yield np.where(total > 0, second / total, 0.5)

    def _problem_intervals(self, scores):
        """Yield ``(p0, p1)`` of every row for each binary problem."""
        for problem, score in enumerate(self._problem_scores(scores)):
            yield grid_interval(self._grid, problem, score)

    def predict_interval(self, scores):
        """Return the Venn-Abers pair ``(p0, p1)`` of each class.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes) or (n_samples,)
            Scores of the same kind and number of classes as in ``fit``.

        Returns
        -------
        p0, p1 : ndarray of shape (n_samples, n_classes)
            Lower and upper probability of each class (``p0 <= p1``); for a binary
            problem, class 0 gets ``(1 - p1, 1 - p0)``. Rows do not sum to 1.
        """
        scores = self._validate_scores(scores)
        intervals = self._problem_intervals(scores)
        if scores.shape[1] == 2:
            return _binary_interval(*next(intervals))
        if self.multi_class == "one_vs_rest":
            lower, upper = zip(*intervals, strict=True)
            return np.column_stack(lower), np.column_stack(upper)
        return self._coupled(scores.shape, intervals, bounds=True)

    def _predict_proba(self, scores):
        return self._merged(scores.shape[0], self._problem_intervals(scores))

    def _merged(self, n_samples, intervals):
        """Probabilities from each binary problem's pairs (``(p0, p1)`` of every row)."""
        if self.n_classes_ == 2:
            positive = merged_probability(*next(iter(intervals)))
            return np.column_stack([1.0 - positive, positive])
        if self.multi_class == "one_vs_rest":
            merged = np.column_stack([merged_probability(p0, p1) for p0, p1 in intervals])
            return renormalize(merged)
        return renormalize(self._coupled((n_samples, self.n_classes_), intervals, bounds=False))

    def _coupled(self, shape, intervals, bounds):
        """Price et al.'s coupling of the pairwise probabilities (or of their bounds).

        With ``bounds``, returns the coupled lower and upper probabilities; else the
        coupled merged probabilities.
        """
        n_samples, n_classes = shape
        n_sums = 2 if bounds else 1
        # one row per class, so that a pair adds to two contiguous rows
        inverse = np.zeros((n_sums, n_classes, n_samples))
        with np.errstate(divide="ignore"):
            for (negative, positive), (p0, p1) in zip(self.pairs_, intervals, strict=True):
                if bounds:
                    inverse[0, positive] += 1.0 / p0
                    inverse[0, negative] += 1.0 / (1.0 - p1)
                    inverse[1, positive] += 1.0 / p1
                    inverse[1, negative] += 1.0 / (1.0 - p0)
                else:
                    merged = merged_probability(p0, p1)
                    inverse[0, positive] += 1.0 / merged
                    inverse[0, negative] += 1.0 / (1.0 - merged)
        coupled = 1.0 / (inverse - (n_classes - 2))
        coupled = np.ascontiguousarray(coupled.transpose(0, 2, 1))
        return (coupled[0], coupled[1]) if bounds else coupled[0]

    @staticmethod
    def _merged_folds(calibrators, fold_scores):
        """Probabilities of a :class:`CalibratedClassifier`'s folds: each binary problem's
        pairs merged over the folds as Vovk et al. merge them (:func:`merge_folds`), then
        reduced to classes as by one calibrator.

        Parameters
        ----------
        calibrators : list of VennAbersCalibrator
            One fitted calibrator per fold, all of the same classes and parameters.
        fold_scores : list of ndarray
            Each fold's estimator's scores of the samples.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        folds = [
            list(calibrator._problem_intervals(calibrator._validate_scores(scores)))
            for calibrator, scores in zip(calibrators, fold_scores, strict=True)
        ]
        merged = [
            merge_folds(
                np.stack([fold[problem][0] for fold in folds]),
                np.stack([fold[problem][1] for fold in folds]),
            )
            for problem in range(len(folds[0]))
        ]
        return calibrators[0]._merged(merged[0][0].shape[0], merged)


def _check_counts(sample_weight):
    """Raise a ValueError unless every weight is a whole number (a count of copies)."""
    fraction = np.flatnonzero(sample_weight != np.round(sample_weight))
    if fraction.size:
        value = sample_weight[fraction[0]]
        raise ValueError(
            "Expected sample weights that are counts (whole numbers: a weight m stands "
            f"for m copies of its row) for VennAbersCalibrator, got {float(value)!r}; the test "
            "example counts as one example, so other weights would change the Venn-Abers "
            "pair with their scale."
        )
