"""Multicalibration by gradient-boosted corrections of the scores, per group."""

import numbers
from functools import partial

import numpy as np
from scipy.special import expit, log_expit, logsumexp
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Hidden, Interval, StrOptions

from .._deprecation import DEPRECATED, keyword_only, parameter, renamed_attribute
from ._base import BaseCalibrator, GroupsMixin, normalised_weights
from ._binary_logistic import fit_logistic
from ._group_features import bin_counts, fit_group_bins, group_codes
from ._group_guard import NUMERIC_CELLS, cell_codes, choose_guarded, guarded_rows
from ._histogram_tree import HistogramTree, fit_tree, quantile_edges
from ._temperature_solver import fit_inverse_temperature
from .platt import PlattScaling

__all__ = ["MulticalibrationBoosting"]

#: Log-odds of a class are computed from probabilities clipped to [eps, 1 - eps].
_LOG_ODDS_EPS = 1e-12
#: ``validation_fraction="auto"``: this many folds below ``AUTO_HOLDOUT_ROWS`` rows, else a holdout
#: of ``AUTO_FRACTION`` of them (a small set's single holdout is too noisy to stop on).
AUTO_FOLDS = 5
AUTO_HOLDOUT_ROWS = 10000
AUTO_FRACTION = 0.2
#: The group offsets' Newton steps stop when no offset moves by more than this, or after
#: ``OFFSET_ITERATIONS`` sweeps.
OFFSET_TOL = 1e-6
OFFSET_ITERATIONS = 50
#: A category's slope is penalised this many times more than its offset: it rests on the
#: spread of the category's scores, which a small group barely has.
OFFSET_SLOPE_PENALTY = 100.0
_VALIDATION = [
    StrOptions({"auto"}),
    Interval(numbers.Real, 0, 1, closed="neither"),
    Interval(numbers.Integral, 2, None, closed="left"),
]


class _Link:
    """How margins become probabilities, gradients and the score feature of each column.

    ``columns`` margins per row are boosted: one for a binary problem (the positive
    class's log-odds) and the top-label mode (the top class's log-odds), one per class
    (the logits) in the classwise mode.
    """

    def __init__(self, mode, n_classes):
        self.mode = mode
        self.n_classes = n_classes
        self.columns = n_classes if mode == "classwise" else 1

    def start(self, logits):
        """Initial margins and, in the top-label mode, the predicted class of each row."""
        if self.mode == "binary":
            return (logits[:, 1] - logits[:, 0])[:, None], None
        if self.mode == "classwise":
            return logits.astype(np.float64), None
        top = np.argmax(logits, axis=1)
        rest = logits.astype(np.float64)
        rest[np.arange(rest.shape[0]), top] = -np.inf
        top_logit = logits[np.arange(logits.shape[0]), top]
        return (top_logit - logsumexp(rest, axis=1))[:, None], top

    def fit_scaling(self, margins, targets, y_index, sample_weight):
        """``(a, b)`` of the global map ``a F + b`` of the margins fitted first: Platt
        scaling of a sigmoid column (with Platt's smoothed targets, finite on separable
        scores), temperature scaling (``b = 0``) of softmax margins."""
        if self.mode == "classwise":
            beta, _ = fit_inverse_temperature(margins, y_index, sample_weight)
            return beta, 0.0
        counts = np.ones(margins.shape[0]) if sample_weight is None else sample_weight
        smoothed = PlattScaling._targets(targets[:, 0] == 1, counts)
        weight = normalised_weights(margins.shape[0], sample_weight)
        coef, intercept, _ = fit_logistic(
            margins, smoothed, weight, name="MulticalibrationBoosting"
        )
        return float(coef[0]), float(intercept)

    def targets(self, y_index, top):
        if self.mode == "binary":
            return (y_index == 1)[:, None].astype(np.float64)
        if self.mode == "top_label":
            return (y_index == top)[:, None].astype(np.float64)
        return (y_index[:, None] == np.arange(self.n_classes)).astype(np.float64)

    def probabilities(self, margins):
        """Per-column event probabilities (sigmoid, or softmax across classes)."""
        if self.mode == "classwise":
            return np.exp(margins - logsumexp(margins, axis=1, keepdims=True))
        return expit(margins)

    def score_features(self, margins):
        """Each column's log-odds, the feature the trees split besides the groups."""
        if self.mode != "classwise":
            return margins
        proba = np.clip(self.probabilities(margins), _LOG_ODDS_EPS, 1.0 - _LOG_ODDS_EPS)
        return np.log(proba) - np.log1p(-proba)

    def row_losses(self, margins, targets):
        """Negative log-likelihood of each row."""
        if self.mode == "classwise":
            return logsumexp(margins, axis=1) - np.sum(margins * targets, axis=1)
        return -(targets * log_expit(margins) + (1 - targets) * log_expit(-margins))[:, 0]

    def loss(self, margins, targets, weight):
        """Weighted mean negative log-likelihood."""
        return float(np.dot(weight, self.row_losses(margins, targets)) / weight.sum())

    def output(self, margins, logits, top):
        """Calibrated probabilities of every class."""
        if self.mode == "binary":
            positive = expit(margins[:, 0])
            return np.column_stack([1.0 - positive, positive])
        if self.mode == "classwise":
            return self.probabilities(margins)
        rows = np.arange(logits.shape[0])
        rest = logits.astype(np.float64)
        rest[rows, top] = -np.inf
        rest = np.exp(rest - logsumexp(rest, axis=1, keepdims=True))
        top_proba = expit(margins[:, 0])
        proba = rest * (1.0 - top_proba)[:, None]
        proba[rows, top] = top_proba
        return proba


def _offset_change(offsets, fixed, margins):
    """The change the group ``offsets`` (per feature: each bin's offset, slope and centre)
    make to ``margins`` of rows with codes ``fixed``."""
    change = np.zeros_like(margins)
    for j, (offset, slope, centre) in enumerate(zip(*offsets, strict=True)):
        rows = fixed[:, j]
        change += offset[rows] + slope[rows] * (margins - centre[rows])
    return change


class MulticalibrationBoosting(GroupsMixin, BaseCalibrator):
    """Multicalibration by gradient-boosted corrections of the scores within groups.

    The scores' margins (log-odds) first get one global map, Platt scaling (temperature
    scaling of the logits in the classwise mode); then a sum of shallow regression trees,
    each a Newton step on the log loss whose features are the group features and the
    *current* calibrated log-odds, so that the corrections differ between groups and,
    within a group, between score levels. Each leaf's correction is linear in the
    current log-odds (``linear_leaves``): an intercept and a slope, a per-cell Platt
    step, so a group that is over- or underconfident is fixed in a few trees. A model
    whose log loss no tree can lower is calibrated on every cell a tree can carve (a
    group, a score range, their intersections): this is how gradient boosting reaches
    multicalibration (Tax et al. 2026, MCGrad), an alternative to the iterative patching
    of Hébert-Johnson et al. (2018). With ``group_offsets``, each category of a
    categorical group feature first gets its own linear map of the log-odds (an offset
    and a slope), fitted to convergence: a group whose level or confidence is off is
    corrected whole, not through shrunken tree steps that early stopping may cut short
    on a small calibration set. Early
    stopping on held-out rows of the fit data
    (``validation_fraction``) picks the number of rounds before groups too small to support a
    correction are overfitted; the trees are then refitted on all the rows. With
    ``guard_groups``, a group whose held-out rows the corrections do not help keeps its
    scores as given.

    - Binary problems boost the positive class's log-odds (``multi_class`` is ignored).
    - ``multi_class="classwise"``: one tree per class per round on that class's
      one-vs-rest log-odds, boosting the softmax of the logits (classwise
      multicalibration, ``P(y = k | p_k, group) = p_k``).
    - ``multi_class="top_label"``: one tree per round on the top class's log-odds,
      with the predicted class as a categorical feature; the other classes keep their
      proportions (top-label multicalibration, Gupta and Ramdas 2022). A correction that
      lowers the top probability below the runner-up's changes the predicted class.

    Without ``groups`` the trees see the scores alone: a non-parametric recalibration.
    Inside :class:`CalibratedClassifier`, its ``group_features`` name the columns of
    ``X`` passed as ``groups``; through scikit-learn's metadata routing,
    ``set_fit_request(groups=True)`` and ``set_predict_proba_request(groups=True)``.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are. See :mod:`sklearn_calib.calibrators` for 1-D binary scores.
    multi_class : {"classwise", "top_label"}, default="classwise"
        What is multicalibrated beyond two classes.
    learning_rate : float, default=0.1
        Shrinkage of each tree's Newton step, in (0, 1].
    max_iter : int, default=100
        Most boosting rounds (a round fits one tree per column of margins).
    max_depth : int, default=3
        Levels of splits of a tree (``2^max_depth`` leaves).
    min_samples_leaf : float, default=40
        Least (weighted) number of rows in a leaf; a sample weight counts as that many
        rows.
    l2_regularization : float, default=1.0
        L2 penalty (positive) on the leaf values and slopes, in units of the hessian sums
        (rows times ``p (1 - p)``); it shrinks the corrections of small cells.
    max_bins : int, default=64
        Most bins of a numeric group feature and of the score feature (quantiles).
    linear_leaves : bool, default=True
        Whether a leaf's correction is linear in the current log-odds (split gains then
        count the slope too), or constant.
    categorical_features : "auto", array-like of bool or of int, default="auto"
        Which group features are categories: ``"auto"`` takes the non-floating columns
        (integers, booleans, strings) as categories and the floating ones as ordered;
        otherwise a boolean mask or the indices of the categorical columns. A category
        unseen in fit follows the larger child of each split.
    early_stopping : bool, default=True
        Keep the number of rounds with the lowest held-out log loss (else
        ``max_iter``).
    validation_fraction : "auto", float or int, default="auto"
        The held-out rows of early stopping: a float in (0, 1) holds out that share of
        the rows; an int ``k >= 2`` uses ``k`` folds (each holding out a ``1 / k``
        share) and the log loss pooled over them; ``"auto"`` takes 5 folds below 10,000
        rows, a fifth of the rows above. Splits are stratified by class where every class
        has enough rows.
    n_iter_no_change : int, default=10
        Stop when the held-out loss has not improved by ``tol`` for this many rounds.
    tol : float, default=1e-7
        Least improvement of the held-out loss that counts.
    group_offsets : bool, default=True
        Fit one offset and one slope of the log-odds per category of each categorical
        group feature (and per predicted class in the top-label mode) after the global
        map, before the trees: a per-category Platt step, ``offset + slope (F - c)``
        with ``c`` the category's mean log-odds ``F``, by Newton steps on the log loss
        penalised by ``l2_regularization`` (the slope by 100 times that: it rests on the
        spread of the category's scores) until nothing moves; each early-stopping fold
        fits its own. ``False`` leaves the groups to the trees, whose shrunken steps
        early stopping may cut short on small calibration sets.
    guard_groups : bool, default=True
        Keep the scores as given in every group whose held-out rows (those of early
        stopping, over ``max_iter`` rounds without it) have no lower log loss with the
        corrections: the rows of a category of a categorical group feature, of a quarter
        of a numeric one's range (equal mass), of a predicted class in the top-label mode,
        or all the rows. A row in any such group keeps its scores, and so do the rows of a
        category unseen in fit. It trades some of the corrections' gain for never making
        a group worse than doing nothing, where the held-out rows can tell; ``False``
        keeps every correction.
    random_state : int, RandomState instance or None, default=None
        Seed of the held-out split.
    multiclass, max_rounds, validation, n_rounds_no_change : deprecated
        Deprecated names of ``multi_class``, ``max_iter``, ``validation_fraction`` and
        ``n_iter_no_change``.

        .. deprecated:: 0.2
           Renamed as scikit-learn's ``HistGradientBoostingClassifier`` names them;
           removed in 0.3.

    Attributes
    ----------
    scaling_ : tuple of float
        ``(a, b)`` of the global map ``a F + b`` of the margins fitted first.
    offsets_ : list of ndarray or None
        With ``group_offsets``, per feature other than the score (the group features,
        then the predicted class in the top-label mode), the offset of each of its bins
        and column of margins, of shape (n_bins, n_columns): zeros for a numeric feature
        and for unseen categories; None without ``group_offsets``.
    offset_slopes_, offset_centres_ : list of ndarray or None
        Alike, each bin's slope and the log-odds its slope is centred on (the bin's
        mean): the bin's rows' log-odds ``F`` become
        ``F + offset + slope (F - centre)``.
    n_iter_ : int
        Boosting rounds kept (0: the global map
        alone).
    validation_loss_ : ndarray of shape (n_rounds_tried + 1,)
        Held-out log loss after the global map and after each round (early stopping
        only).
    trees_ : list of list of tuple
        Per round and column of margins, the score feature's inner bin edges and the
        tree's arrays: each internal node's feature and the bins it sends left, each
        leaf's value, centre and slope.
    group_bins_ : list of ndarray or None
        Per group feature, its categories (categorical) or its inner bin edges (numeric);
        None without ``groups``.
    group_categorical_ : ndarray of shape (n_group_features,) or None
        Which group features are categorical.
    guarded_groups_ : list of tuple or None
        With ``guard_groups``, the groups that keep their scores, as ``(feature, value)``:
        ``("all", None)`` for every row, ``(j, category)`` for a category of the
        categorical group feature ``j``, ``(j, (lower, upper))`` for the values of the
        numeric group feature ``j`` in ``(lower, upper]``, ``("predicted_class", k)``
        in the top-label mode; None without ``guard_groups``.
    n_group_features_ : int
        Number of group features seen in fit (0 without ``groups``).
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).

    See Also
    --------
    sklearn_calib.metrics.calibration_audit : Per-group errors, tests and the worst group.
    PlattScaling : The global map alone (binary problems).

    References
    ----------
    .. [1] U. Hébert-Johnson, M. P. Kim, O. Reingold and G. N. Rothblum,
       "Multicalibration: Calibration for the (Computationally-Identifiable) Masses",
       International Conference on Machine Learning, 2018.
    .. [2] N. Tax, L. Perini, F. Linder, D. Haimovich, D. Karamshuk, N. Okati,
       M. Vojnovic and P. A. Apostolopoulos, "MCGrad: Multicalibration at Web Scale",
       Knowledge Discovery and Data Mining, 2026.
    .. [3] T. Chen and C. Guestrin, "XGBoost: A Scalable Tree Boosting System",
       Knowledge Discovery and Data Mining, 2016.
    .. [4] C. Gupta and A. Ramdas, "Top-label calibration and multiclass-to-binary
       reductions", International Conference on Learning Representations, 2022.

    Examples
    --------
    Two groups whose true probabilities lie on either side of the scores: one
    temperature cannot fix both, the group-wise corrections do.

    >>> import numpy as np
    >>> from sklearn_calib.calibrators import MulticalibrationBoosting, TemperatureScaling
    >>> rng = np.random.default_rng(0)
    >>> log_odds = rng.normal(size=4000)
    >>> group = rng.integers(0, 2, size=4000)
    >>> truth = 1 / (1 + np.exp(-(log_odds + np.where(group == 1, 1.0, -1.0))))
    >>> y = (rng.random(4000) < truth).astype(int)
    >>> def gaps(proba):  # mean predicted minus observed, per group (0.0 for -0.0)
    ...     return [round(float(proba[group == g].mean() - y[group == g].mean()), 2) + 0.0
    ...             for g in (0, 1)]
    >>> gaps(TemperatureScaling().fit(log_odds, y).predict_proba(log_odds)[:, 1])
    [0.2, -0.19]
    >>> mcb = MulticalibrationBoosting(random_state=0).fit(log_odds, y, groups=group)
    >>> gaps(mcb.predict_proba(log_odds, groups=group)[:, 1])
    [0.0, 0.0]
    """

    _parameter_constraints: dict = {
        **BaseCalibrator._parameter_constraints,
        "multi_class": [StrOptions({"classwise", "top_label"})],
        "learning_rate": [Interval(numbers.Real, 0, 1, closed="right")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "max_depth": [Interval(numbers.Integral, 1, 12, closed="both")],
        "min_samples_leaf": [Interval(numbers.Real, 0, None, closed="left")],
        "l2_regularization": [Interval(numbers.Real, 0, None, closed="neither")],
        "max_bins": [Interval(numbers.Integral, 2, 1024, closed="both")],
        "linear_leaves": ["boolean"],
        "categorical_features": [StrOptions({"auto"}), "array-like"],
        "early_stopping": ["boolean"],
        "validation_fraction": _VALIDATION,
        "n_iter_no_change": [Interval(numbers.Integral, 1, None, closed="left")],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "group_offsets": ["boolean"],
        "guard_groups": ["boolean"],
        "random_state": ["random_state"],
        "multiclass": [
            Hidden(StrOptions({DEPRECATED})),
            StrOptions({"classwise", "top_label"}),
        ],
        "max_rounds": [
            Hidden(StrOptions({DEPRECATED})),
            Interval(numbers.Integral, 1, None, closed="left"),
        ],
        "validation": [Hidden(StrOptions({DEPRECATED})), *_VALIDATION],
        "n_rounds_no_change": [
            Hidden(StrOptions({DEPRECATED})),
            Interval(numbers.Integral, 1, None, closed="left"),
        ],
    }
    _renamed_parameters: dict = {
        "multiclass": "multi_class",
        "max_rounds": "max_iter",
        "validation": "validation_fraction",
        "n_rounds_no_change": "n_iter_no_change",
    }
    _renamed_attributes: dict = {"n_rounds_": "n_iter_"}
    n_rounds_ = renamed_attribute("n_rounds_", "n_iter_")

    @keyword_only(
        "input",
        "multiclass",
        "learning_rate",
        "max_rounds",
        "max_depth",
        "min_samples_leaf",
        "l2_regularization",
        "max_bins",
        "linear_leaves",
        "categorical_features",
        "early_stopping",
        "validation",
        "n_rounds_no_change",
        "tol",
        "random_state",
    )
    def __init__(
        self,
        *,
        input="logits",
        multi_class="classwise",
        learning_rate=0.1,
        max_iter=100,
        max_depth=3,
        min_samples_leaf=40,
        l2_regularization=1.0,
        max_bins=64,
        linear_leaves=True,
        categorical_features="auto",
        early_stopping=True,
        validation_fraction="auto",
        n_iter_no_change=10,
        tol=1e-7,
        group_offsets=True,
        guard_groups=True,
        random_state=None,
        multiclass=DEPRECATED,
        max_rounds=DEPRECATED,
        validation=DEPRECATED,
        n_rounds_no_change=DEPRECATED,
    ):
        self.input = input
        self.multi_class = multi_class
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.max_bins = max_bins
        self.linear_leaves = linear_leaves
        self.categorical_features = categorical_features
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.group_offsets = group_offsets
        self.guard_groups = guard_groups
        self.random_state = random_state
        self.multiclass = multiclass
        self.max_rounds = max_rounds
        self.validation = validation
        self.n_rounds_no_change = n_rounds_no_change

    def __setstate__(self, state):
        """Restore a saved state; one saved before the group offsets fits without them,
        one saved before their slopes has slopes of zero."""
        defaults = {"group_offsets": False}
        if "scaling_" in state:
            defaults["offsets_"] = None
            offsets = state.get("offsets_")
            zeros = None if offsets is None else [np.zeros_like(o) for o in offsets]
            defaults["offset_slopes_"] = defaults["offset_centres_"] = zeros
        super().__setstate__({**defaults, **state})

    def _mode(self):
        return "binary" if self.n_classes_ == 2 else parameter(self, "multi_class")

    def _fit(self, scores, y_index, sample_weight, groups=None):
        n_samples = scores.shape[0]
        codes, self.group_bins_, self.group_categorical_ = None, None, None
        self.n_group_features_ = 0
        if groups is not None:
            self.group_bins_, self.group_categorical_ = fit_group_bins(
                groups, n_samples, self.categorical_features, self.max_bins, sample_weight
            )
            self.n_group_features_ = len(self.group_bins_)
            codes = group_codes(groups, self.group_bins_, self.group_categorical_, n_samples)
        link = _Link(self._mode(), self.n_classes_)
        given, top = link.start(self._logits(scores))
        targets = link.targets(y_index, top)
        self.scaling_ = link.fit_scaling(given, targets, y_index, sample_weight)
        margins = self.scaling_[0] * given + self.scaling_[1]
        weight = np.ones(n_samples) if sample_weight is None else sample_weight
        fixed = self._fixed_codes(codes, top, n_samples)
        n_rounds, held = parameter(self, "max_iter"), None
        if self.early_stopping or self.guard_groups:
            n_rounds, held = self._held_out_rounds(link, margins, targets, weight, fixed, y_index)
        self.offsets_ = self.offset_slopes_ = self.offset_centres_ = None
        if self.group_offsets:
            offsets = self._fit_offsets(link, margins, targets, weight, fixed)
            self.offsets_, self.offset_slopes_, self.offset_centres_ = offsets
            margins = margins + _offset_change(offsets, fixed, margins)
        self.trees_ = self._boost(link, margins, targets, weight, fixed, n_rounds)
        self.n_iter_ = len(self.trees_)
        self.guarded_, self.guarded_groups_ = None, None
        if self.guard_groups:
            rows, corrected = held
            cells, sizes = cell_codes(fixed[rows], *self._fixed_layout())
            self.guarded_ = choose_guarded(
                cells,
                sizes,
                link.row_losses(corrected, targets[rows]),
                link.row_losses(given[rows], targets[rows]),
                weight[rows],
            )
            self.guarded_groups_ = self._guarded_groups()

    def _fit_offsets(self, link, margins, targets, weight, fixed):
        """Each categorical feature's offset, slope and centre per bin and column:
        penalised Newton steps on the log loss, one feature after another, until no
        offset or slope moves."""
        n_bins, categorical = self._fixed_layout()
        shapes = [(size, margins.shape[1]) for size in n_bins]
        offsets, slopes = [np.zeros(shape) for shape in shapes], [np.zeros(s) for s in shapes]
        centres = [np.zeros(shape) for shape in shapes]
        penalty = self.l2_regularization
        slope_penalty = OFFSET_SLOPE_PENALTY * penalty
        given, margins = margins, margins.copy()
        for j in np.flatnonzero(categorical):
            mass = np.bincount(fixed[:, j], weight, minlength=n_bins[j])
            for k in range(margins.shape[1]):
                total = np.bincount(fixed[:, j], weight * given[:, k], minlength=n_bins[j])
                centres[j][:, k] = np.divide(total, mass, out=np.zeros(n_bins[j]), where=mass > 0)
        for _ in range(OFFSET_ITERATIONS):
            largest = 0.0
            for j in np.flatnonzero(categorical):
                rows = fixed[:, j]
                spread = given - centres[j][rows]
                proba = link.probabilities(margins)
                gradient = weight[:, None] * (proba - targets)
                hessian = weight[:, None] * proba * (1.0 - proba)
                offset_step, slope_step = np.empty(shapes[j]), np.empty(shapes[j])
                total = partial(np.bincount, rows, minlength=n_bins[j])
                for k in range(margins.shape[1]):
                    x = spread[:, k]
                    g0 = total(gradient[:, k]) + penalty * offsets[j][:, k]
                    g1 = total(gradient[:, k] * x) + slope_penalty * slopes[j][:, k]
                    h00 = total(hessian[:, k]) + penalty
                    h01 = total(hessian[:, k] * x)
                    h11 = total(hessian[:, k] * x * x) + slope_penalty
                    determinant = h00 * h11 - h01 * h01
                    offset_step[:, k] = -(h11 * g0 - h01 * g1) / determinant
                    slope_step[:, k] = -(h00 * g1 - h01 * g0) / determinant
                offsets[j] += offset_step
                slopes[j] += slope_step
                margins += offset_step[rows] + slope_step[rows] * spread
                steps = np.concatenate([offset_step.ravel(), slope_step.ravel()])
                largest = max(largest, float(np.abs(steps).max(initial=0.0)))
            if largest < OFFSET_TOL:
                break
        return offsets, slopes, centres

    def _guarded_groups(self):
        """The guarded cells as ``(feature, value)`` pairs (see ``guarded_groups_``)."""
        if self.guarded_[0][0]:
            return [("all", None)]
        groups = []
        bins = self.group_bins_ or []
        for j, column_guarded in enumerate(self.guarded_[1:]):
            for cell in np.flatnonzero(column_guarded).tolist():
                if j >= len(bins):
                    groups.append(("predicted_class", self.classes_[cell]))
                elif self.group_categorical_[j]:
                    if cell < bins[j].shape[0]:
                        groups.append((j, bins[j][cell]))
                else:
                    edges = np.concatenate([[-np.inf], bins[j], [np.inf]])
                    n_bins = edges.shape[0] - 1
                    first = -(-cell * n_bins // NUMERIC_CELLS)
                    last = -(-(cell + 1) * n_bins // NUMERIC_CELLS)
                    if last > first:
                        groups.append((j, (float(edges[first]), float(edges[last]))))
        return groups

    @staticmethod
    def _fixed_codes(codes, top, n_samples):
        """The features other than the score: group codes, and the predicted class."""
        parts = [np.empty((n_samples, 0), dtype=np.intp)]
        if codes is not None:
            parts.append(codes)
        if top is not None:
            parts.append(top[:, None])
        return np.hstack(parts)

    def _fixed_layout(self):
        """Number of bins and categorical flag of each fixed feature."""
        n_bins, categorical = [], []
        if self.group_bins_ is not None:
            n_bins += bin_counts(self.group_bins_)
            categorical += self.group_categorical_.tolist()
        if self._mode() == "top_label":
            n_bins.append(self.n_classes_)
            categorical.append(True)
        return n_bins, categorical

    def _folds(self, y_index, n_samples):
        """Training and held-out rows of each fold, stratified by class where possible."""
        rng = check_random_state(self.random_state)
        counts = np.bincount(y_index)
        present = counts[counts > 0]
        validation = parameter(self, "validation_fraction")
        if validation == "auto":
            validation = AUTO_FOLDS if n_samples < AUTO_HOLDOUT_ROWS else AUTO_FRACTION
        if isinstance(validation, numbers.Integral):
            n_folds = int(validation)
            if n_folds > n_samples:
                raise ValueError(
                    f"early_stopping with validation_fraction={n_folds} folds needs at least "
                    "as many "
                    f"rows, got {n_samples}; set early_stopping=False."
                )
            if present.min() >= n_folds:
                splitter = StratifiedKFold(n_folds, shuffle=True, random_state=rng)
            else:
                splitter = KFold(n_folds, shuffle=True, random_state=rng)
            return list(splitter.split(np.zeros(n_samples), y_index))
        n_validation = int(np.ceil(validation * n_samples))
        if n_validation >= n_samples:
            raise ValueError(
                f"early_stopping needs a training and a validation part; with {n_samples} "
                f"rows and validation_fraction={validation} the training part is empty; set "
                "early_stopping=False."
            )
        can_stratify = present.min() >= 2 and n_validation >= present.shape[0]
        can_stratify = can_stratify and n_samples - n_validation >= present.shape[0]
        return [
            train_test_split(
                np.arange(n_samples),
                test_size=n_validation,
                stratify=y_index if can_stratify else None,
                random_state=rng,
            )
        ]

    def _held_out_rounds(self, link, margins, targets, weight, fixed, y_index):
        """Boost on each fold's training rows; return the number of rounds of least pooled
        held-out loss (``max_iter`` without early stopping), and the held-out rows with
        their margins after that many rounds."""
        folds = self._folds(y_index, margins.shape[0])
        fit_margins = [margins[train].copy() for train, _ in folds]
        held_margins = [margins[held].copy() for _, held in folds]
        if self.group_offsets:  # each fold's own, so that its held-out rows stay unseen
            for fold, (train, held) in enumerate(folds):
                offsets = self._fit_offsets(
                    link, fit_margins[fold], targets[train], weight[train], fixed[train]
                )
                fit_margins[fold] += _offset_change(offsets, fixed[train], fit_margins[fold])
                held_margins[fold] += _offset_change(offsets, fixed[held], held_margins[fold])
        held_weight = np.concatenate([weight[held] for _, held in folds])
        if held_weight.sum() <= 0 or any(weight[train].sum() <= 0 for train, _ in folds):
            raise ValueError(
                "The early-stopping split left a part whose sample weights sum to 0; pass "
                "another random_state or set early_stopping=False."
            )
        held_targets = np.concatenate([targets[held] for _, held in folds])

        def pooled_loss():
            return link.loss(np.concatenate(held_margins), held_targets, held_weight)

        held_rows = np.concatenate([held for _, held in folds])
        losses = [pooled_loss()]
        best, best_margins = 0, np.concatenate(held_margins)
        for round_ in range(1, parameter(self, "max_iter") + 1):
            for fold, (train, held) in enumerate(folds):
                change, trees = self._round(
                    link, fit_margins[fold], targets[train], weight[train], fixed[train]
                )
                fit_margins[fold] += change
                held_margins[fold] += self._apply_round(
                    link, held_margins[fold], fixed[held], trees
                )
            losses.append(pooled_loss())
            if not self.early_stopping or losses[-1] < losses[best] - self.tol:
                best, best_margins = round_, np.concatenate(held_margins)
            elif round_ - best >= parameter(self, "n_iter_no_change"):
                break
        if self.early_stopping:
            self.validation_loss_ = np.array(losses)
        return best, (held_rows, best_margins)

    def _boost(self, link, margins, targets, weight, fixed, n_rounds):
        margins = margins.copy()
        trees = []
        for _ in range(n_rounds):
            change, round_trees = self._round(link, margins, targets, weight, fixed)
            margins += change
            trees.append(round_trees)
        return trees

    def _round(self, link, margins, targets, weight, fixed):
        """Fit one tree per column of margins; return the change and the trees."""
        proba = link.probabilities(margins)
        gradient = weight[:, None] * (proba - targets)
        hessian = weight[:, None] * proba * (1.0 - proba)
        score = link.score_features(margins)
        n_bins, categorical = self._fixed_layout()
        change = np.zeros_like(margins)
        trees = []
        for k in range(link.columns):
            edges = quantile_edges(score[:, k], self.max_bins, weight)
            codes = np.column_stack([fixed, np.searchsorted(edges, score[:, k], side="left")])
            tree = fit_tree(
                codes,
                n_bins + [edges.shape[0] + 1],
                categorical + [False],
                gradient[:, k],
                hessian[:, k],
                weight,
                score[:, k] if self.linear_leaves else None,
                max_depth=self.max_depth,
                l2=self.l2_regularization,
                min_samples_leaf=self.min_samples_leaf,
            )
            tree = tree.scaled(self.learning_rate)
            change[:, k] = tree.predict(codes, score[:, k])
            trees.append((edges, *tree))
        return change, trees

    @staticmethod
    def _apply_round(link, margins, fixed, trees):
        """The change one round's trees make to ``margins``."""
        score = link.score_features(margins)
        change = np.zeros_like(margins)
        for k, (edges, *tree) in enumerate(trees):
            codes = np.column_stack([fixed, np.searchsorted(edges, score[:, k], side="left")])
            change[:, k] = HistogramTree(*tree).predict(codes, score[:, k])
        return change

    def _calibrate(self, scores, codes):
        """Calibrated probabilities of validated 2-D scores with their group codes."""
        logits = self._logits(scores)
        link = _Link(self._mode(), self.n_classes_)
        margins, top = link.start(logits)
        margins = self.scaling_[0] * margins + self.scaling_[1]
        fixed = self._fixed_codes(codes, top, scores.shape[0])
        if self.offsets_ is not None:
            offsets = self.offsets_, self.offset_slopes_, self.offset_centres_
            margins = margins + _offset_change(offsets, fixed, margins)
        for trees in self.trees_:
            margins += self._apply_round(link, margins, fixed, trees)
        proba = link.output(margins, logits, top)
        if self.guarded_ is not None:
            kept = guarded_rows(cell_codes(fixed, *self._fixed_layout())[0], self.guarded_)
            given, given_top = link.start(logits[kept])
            proba[kept] = link.output(given, logits[kept], given_top)
        return proba

    def _group_codes(self, groups, n_samples):
        """Bin codes of the group features, checked against those seen in fit."""
        if self.group_bins_ is None:
            if groups is not None:
                raise ValueError(
                    f"{type(self).__name__} was fitted without groups; got `groups` in "
                    "predict_proba."
                )
            return None
        if groups is None:
            raise ValueError(
                f"{type(self).__name__} was fitted with {self.n_group_features_} group "
                "feature(s); pass the same `groups` to predict_proba."
            )
        return group_codes(groups, self.group_bins_, self.group_categorical_, n_samples)

    def _predict_proba(self, scores, groups=None):
        return self._calibrate(scores, self._group_codes(groups, scores.shape[0]))
