"""``LabelShiftAdapter``: calibrated probabilities re-weighted to the class priors of a target."""

import numbers
import warnings

import numpy as np
from scipy.special import softmax
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._dask_chunks import uses_dask
from .._rollback import restored_on_failure
from .._validation import (
    check_class_labels,
    check_sample_weight,
    check_two_classes,
    encode_labels,
    resolve_classes,
)
from ..calibrators import BiasCorrectedTemperatureScaling, fit_calibrator
from ..metrics._fused._check import checked_rows
from ._dask import adapt_dask, predict_proba_dask
from ._estimate import estimate_priors
from ._source import check_adaptable, check_prior, summarise_source
from ._uncertainty import (
    likelihood_ratio_test,
    prediction_count_test,
    prior_intervals,
    replicate_start,
    resampled_counts,
    stratified_counts,
    target_replicates,
)

#: The attributes ``adapt`` sets (a new ``fit`` removes them).
_ADAPTED = (
    "target_prior_",
    "weights_",
    "n_iter_",
    "converged_",
    "target_prior_intervals_",
    "shift_test_",
)


class LabelShiftAdapter(TransformerMixin, BaseEstimator):
    """Calibrated probabilities adapted to new class priors, estimated without labels.

    Under label shift the classes' priors change between the source (where the classifier
    and its calibration data come from) and a target, while each class looks the same
    (``p(x | y)`` is unchanged). Then the target posteriors are the source's re-weighted,
    ``q(y | x) ~ p(y | x) q_y / pi_y``, and the target priors ``q`` can be estimated from
    unlabelled target scores. ``fit`` calibrates the scores on labelled source data;
    ``adapt`` estimates the target priors from unlabelled target scores (or takes known
    ones); ``predict_proba`` returns the calibrated, re-weighted probabilities.

    Estimators of the target priors (``method``):

    - ``"em"``: maximum likelihood by EM (Saerens et al. 2002), accelerated by Newton
      steps (SQUAREM where they fail), stopped when the mean log-likelihood is provably
      within ``tol`` of its maximum (see :mod:`sklearn_calib.label_shift`). It needs
      calibrated probabilities, with a bias per class: Alexandari et al. (2020) found EM
      with bias-corrected temperature scaling (the default calibrator) hard to beat, and
      EM without calibration, or with temperature scaling alone, worse.
    - ``"bbse"``: black-box shift estimation (Lipton et al. 2018), which solves
      ``C w = mu`` for the class weights ``w = q / pi``, with ``C`` the source's joint
      confusion matrix of (hard or soft) predictions and classes and ``mu`` the target's
      mean prediction.
    - ``"rlls"``: regularised BBSE (Azizzadenesheli et al. 2019), whose penalty pulls the
      weights towards 1.

    Parameters
    ----------
    input : {"logits", "probabilities"}, default="logits"
        What the scores are, as for the calibrators; 1-D scores are the positive class's
        of a binary problem (see :mod:`sklearn_calib.calibrators`).
    calibrator : calibrator, "passthrough" or None, default=None
        Fitted (a clone) on the labelled source scores: any calibrator of
        :mod:`sklearn_calib.calibrators`; None means
        :class:`~sklearn_calib.calibrators.BiasCorrectedTemperatureScaling`;
        ``"passthrough"`` takes the scores as they are (their softmax for logits), which
        warns with ``method="em"``.
    method : {"em", "bbse", "rlls"}, default="em"
        How the target priors are estimated.
    confusion : {"hard", "soft"}, default="hard"
        The predictions of BBSE's and RLLS's confusion matrix: the top class (Lipton et
        al.) or the calibrated probabilities (Alexandari et al.'s soft variant).
    source_prior : {"predictions", "labels"} or array-like of shape (n_classes,), \
default="predictions"
        The source priors the calibrated probabilities are re-weighted against: their mean
        on the source (Alexandari et al.'s choice: with it, target scores distributed as
        the source's give no shift), the source's label frequencies, or given priors
        (positive, summing to 1). With a bias per class in the calibrator the first two
        agree.
    regularization : float, default=0.01
        RLLS's penalty factor: the penalty weight is ``regularization`` times the
        concentration bound of the confusion matrix (the factor of Azizzadenesheli et
        al.'s code).
    max_iter : int, default=1000
        Largest number of EM passes over the target rows.
    tol : float, default=1e-8
        EM stops when its mean log-likelihood per row is within ``tol`` (nats) of the
        maximum (a bound from the gradient, not a change between steps).
    n_resamples : int, default=200
        Bootstrap replicates of the priors' intervals; 0 skips them. Each replicate is
        an estimate of its own (for EM, from near the full sample's), so the intervals
        cost about ``n_resamples / 5`` estimates.
    resample_source : bool, default=False
        Whether the bootstrap also resamples the labelled source rows (within each
        class) and refits the calibrator on each resample, so that the intervals hold
        the calibration's uncertainty too (slower: one calibrator fit per replicate).
    confidence_level : float, default=0.95
        Coverage of the intervals.
    random_state : int, RandomState instance or None, default=None
        Seeds the bootstrap.

    Attributes
    ----------
    calibrator_ : calibrator or None
        The fitted calibrator (None for ``"passthrough"``).
    classes_ : ndarray of shape (n_classes,)
        Label of each score column.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of score columns (only for 2-D scores).
    source_prior_ : ndarray of shape (n_classes,)
        The source priors (see ``source_prior``).
    target_prior_ : ndarray of shape (n_classes,)
        The target priors, estimated or given (set by :meth:`adapt`).
    weights_ : ndarray of shape (n_classes,)
        The class weights ``target_prior_ / source_prior_`` that re-weight the calibrated
        probabilities (set by :meth:`adapt`).
    n_iter_ : int
        EM's passes over the target rows, RLLS's solver steps, 0 otherwise (set by
        :meth:`adapt`).
    converged_ : bool
        Whether EM reached ``tol`` (True for the other methods).
    target_prior_intervals_ : list of BootstrapInterval or None
        The bootstrap interval of each class's target prior
        (:class:`~sklearn_calib.metrics.BootstrapInterval`); None with ``n_resamples=0``
        or known priors.
    shift_test_ : LabelShiftTestResult or None
        The test of "no shift" (``q = pi``): likelihood ratio for EM, Lipton et al.'s
        test of the predicted classes' frequencies for BBSE and RLLS; None for known
        priors.

    See Also
    --------
    LabelShiftClassifier : The same around a classifier, on features.
    sklearn_calib.calibrators.BiasCorrectedTemperatureScaling : The default calibrator.

    References
    ----------
    M. Saerens, P. Latinne and C. Decaestecker, "Adjusting the Outputs of a Classifier to
    New a Priori Probabilities: A Simple Procedure", Neural Computation 14(1), 2002.

    Z. Lipton, Y.-X. Wang and A. Smola, "Detecting and Correcting for Label Shift with
    Black Box Predictors", ICML 2018.

    K. Azizzadenesheli, A. Liu, F. Yang and A. Anandkumar, "Regularized Learning for
    Domain Adaptation under Label Shifts", ICLR 2019.

    A. Alexandari, A. Kundaje and A. Shrikumar, "Maximum Likelihood with Bias-Corrected
    Calibration is Hard-To-Beat at Label Shift Adaptation", ICML 2020.

    R. Varadhan and C. Roland, "Simple and Globally Convergent Methods for Accelerating
    the Convergence of Any EM Algorithm", Scandinavian Journal of Statistics 35(2), 2008.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.label_shift import LabelShiftAdapter
    >>> rng = np.random.default_rng(0)
    >>> def draw(prior, n):
    ...     y = rng.choice(3, size=n, p=prior)
    ...     return 2.0 * np.eye(3)[y] + rng.normal(size=(n, 3)), y
    >>> source_scores, source_y = draw([1 / 3, 1 / 3, 1 / 3], 3000)
    >>> target_scores, target_y = draw([0.7, 0.2, 0.1], 3000)
    >>> adapter = LabelShiftAdapter(n_resamples=0).fit(source_scores, source_y)
    >>> np.round(adapter.adapt(target_scores).target_prior_, 1)
    array([0.7, 0.2, 0.1])
    """

    _parameter_constraints: dict = {
        "input": [StrOptions({"logits", "probabilities"})],
        "calibrator": [None, StrOptions({"passthrough"}), HasMethods(["fit", "predict_proba"])],
        "method": [StrOptions({"em", "bbse", "rlls"})],
        "confusion": [StrOptions({"hard", "soft"})],
        "source_prior": [StrOptions({"predictions", "labels"}), "array-like"],
        "regularization": [Interval(numbers.Real, 0, None, closed="left")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "tol": [Interval(numbers.Real, 0, None, closed="neither")],
        "n_resamples": [Interval(numbers.Integral, 0, None, closed="left")],
        "resample_source": ["boolean"],
        "confidence_level": [Interval(numbers.Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        *,
        input="logits",
        calibrator=None,
        method="em",
        confusion="hard",
        source_prior="predictions",
        regularization=0.01,
        max_iter=1000,
        tol=1e-8,
        n_resamples=200,
        resample_source=False,
        confidence_level=0.95,
        random_state=None,
    ):
        self.input = input
        self.calibrator = calibrator
        self.method = method
        self.confusion = confusion
        self.source_prior = source_prior
        self.regularization = regularization
        self.max_iter = max_iter
        self.tol = tol
        self.n_resamples = n_resamples
        self.resample_source = resample_source
        self.confidence_level = confidence_level
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, scores, y, sample_weight=None, classes=None):
        """Calibrate on labelled source scores and summarise the source.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes) or (n_samples,)
            Scores of the classifier on labelled source data (its calibration data), of
            the kind named by ``input``.
        y : array-like of shape (n_samples,)
            Their labels; every class must occur.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the source rows.
        classes : array-like of shape (n_classes,), default=None
            The label of each score column (see :mod:`sklearn_calib.calibrators`).

        Returns
        -------
        self : object
            The fitted adapter, not adapted yet (its probabilities are the calibrated
            ones). A fit that raises leaves the adapter as it was.
        """
        with restored_on_failure(self):
            self._fit(scores, y, sample_weight, classes)
        return self

    def _fit(self, scores, y, sample_weight, classes):
        self._forget_target()
        with np.errstate(over="ignore", invalid="ignore"):
            scores, y = validate_data(
                self, scores, y, ensure_2d=False, dtype=[np.float64, np.float32]
            )
        if scores.ndim == 2 and scores.shape[1] < 2:
            raise ValueError(
                "Expected 2-D scores with one column per class (at least 2), got "
                f"{scores.shape[1]} feature(s); pass 1-D scores for a binary problem."
            )
        if scores.ndim == 2:
            self.n_features_in_ = scores.shape[1]
        elif hasattr(self, "n_features_in_"):
            # 1-D scores have no feature count: drop the one of an earlier 2-D fit.
            del self.n_features_in_
        check_class_labels(y)
        sample_weight = check_sample_weight(sample_weight, scores.shape[0])
        if classes is None:
            check_two_classes(y, sample_weight)
        n_classes = 2 if scores.ndim == 1 else scores.shape[1]
        self.classes_ = resolve_classes(y, classes, n_classes, names=("y", "classes", "scores"))
        self.n_classes_ = n_classes
        self._scores_ndim = scores.ndim
        y_index = encode_labels(y, self.classes_, names=("y", "classes"))
        self.calibrator_ = self._fit_calibrator(scores, y_index, sample_weight)
        self._source = self._summarise(scores, y_index, sample_weight, self.calibrator_)
        self.source_prior_ = self._source.prior.copy()
        keep = self.resample_source and self.n_resamples > 0
        self._source_data = (scores, y_index, sample_weight) if keep else None

    def _forget_target(self):
        """Drop what :meth:`adapt` set: the probabilities are the calibrated ones again."""
        for name in _ADAPTED:
            self.__dict__.pop(name, None)

    def _fit_calibrator(self, scores, y_index, sample_weight):
        """A clone of the calibrator fitted on source scores (None for passthrough)."""
        if isinstance(self.calibrator, str):
            return None
        calibrator = self.calibrator or BiasCorrectedTemperatureScaling()
        return fit_calibrator(
            calibrator,
            scores,
            self.classes_[y_index],
            input=self.input,
            classes=self.classes_,
            sample_weight=sample_weight,
        )

    def _summarise(self, scores, y_index, sample_weight, calibrator):
        proba = self._calibrate(scores, calibrator)
        return summarise_source(
            proba,
            y_index,
            sample_weight,
            source_prior=self.source_prior,
            confusion=self.confusion,
        )

    def adapt(self, target_scores=None, y=None, *, target_prior=None):
        """Estimate the target priors from unlabelled target scores, or take known ones.

        Parameters
        ----------
        target_scores : array-like or Dask array of shape (n_samples, n_classes) or \
(n_samples,), default=None
            Scores of the same classifier on unlabelled target data, of the kind and
            number of columns seen in ``fit``. A Dask array is read chunk by chunk
            (``n_resamples`` must then be 0).
        y : None
            Not used: the target has no labels; given labels raise a ValueError.
        target_prior : array-like of shape (n_classes,), default=None
            Known target priors (non-negative, summing to 1), instead of scores.

        Returns
        -------
        self : object
            The adapter, whose ``predict_proba`` now answers for the target. An adapt
            that raises leaves the adapter unadapted (no priors of an earlier target).
        """
        check_is_fitted(self)
        self._forget_target()
        if y is not None:
            raise ValueError(
                "adapt estimates the target priors from unlabelled scores, got labels `y`; "
                "the labelled (source) data go to fit. With target labels, the target "
                "priors are their frequencies: pass them as `target_prior`."
            )
        if (target_scores is None) == (target_prior is None):
            raise ValueError(
                "Expected either `target_scores` (unlabelled scores of the target) or "
                "`target_prior` (known target priors), got "
                + ("both." if target_prior is not None else "neither.")
            )
        if target_prior is not None:
            prior = check_prior(target_prior, "target_prior", self.n_classes_, allow_zero=True)
            check_adaptable(self._source, self.classes_, prior)
            self._set_adaptation(prior, 0, True, None, None)
            return self
        check_adaptable(self._source, self.classes_)
        if self.method == "em" and self.calibrator == "passthrough":
            warnings.warn(
                "EM estimates the target priors from calibrated probabilities, but the "
                "scores are used uncalibrated (calibrator='passthrough'); Alexandari et al. "
                "(2020) found EM on uncalibrated scores the least accurate estimator. Use "
                "the default calibrator, or method='bbse'.",
                UserWarning,
                stacklevel=2,
            )
        if uses_dask(target_scores):
            if self.n_resamples:
                raise ValueError(
                    "Bootstrap intervals of Dask target scores are not computed: set "
                    f"n_resamples=0 (got {self.n_resamples}), or compute the scores first."
                )
            estimation, test = adapt_dask(self, target_scores)
            self._finish(estimation, test, None)
            return self
        scores = self._validate_scores(target_scores, "target_scores")
        following = "mixture" if self.method == "em" else None
        proba = self._calibrate(scores, self.calibrator_, "target_scores", following)
        estimation = estimate_priors(self.method, proba, self._source, options=self._options())
        test = self._shift_test(estimation, proba)
        intervals = None
        if self.n_resamples:
            intervals = self._intervals(estimation.prior[0], scores, proba)
        self._finish(estimation, test, intervals)
        return self

    def _options(self):
        return {
            "confusion": self.confusion,
            "regularization": self.regularization,
            "max_iter": self.max_iter,
            "tol": self.tol,
        }

    def _finish(self, estimation, test, intervals):
        converged = bool(self.method != "em" or estimation.gap[0] <= self.tol)
        if not converged:
            warnings.warn(
                f"EM did not converge in max_iter={self.max_iter} passes: the mean "
                f"log-likelihood may still rise by up to {estimation.gap[0]:.3g} nats per row "
                f"(tol={self.tol:g}); increase max_iter.",
                ConvergenceWarning,
                stacklevel=3,
            )
        self._set_adaptation(estimation.prior[0], estimation.n_iter, converged, intervals, test)

    def _set_adaptation(self, prior, n_iter, converged, intervals, test):
        self.target_prior_ = prior
        self.weights_ = np.divide(
            prior, self.source_prior_, out=np.zeros_like(prior), where=self.source_prior_ > 0
        )
        self.n_iter_ = int(n_iter)
        self.converged_ = converged
        self.target_prior_intervals_ = intervals
        self.shift_test_ = test

    def _shift_test(self, estimation, proba):
        if self.method == "em":
            return likelihood_ratio_test(estimation.loglik[0], proba.shape[0], self.n_classes_)
        hard = np.bincount(proba.argmax(axis=1), minlength=self.n_classes_)
        return prediction_count_test(self._source.prediction_counts, hard)

    def _intervals(self, prior, scores, proba):
        """Bootstrap intervals of the target priors (module ``_uncertainty``)."""
        rng = check_random_state(self.random_state)
        generator = np.random.default_rng(rng.randint(np.iinfo(np.int32).max))
        options = self._options()
        if self._source_data is None:

            def estimate(counts, start):
                return estimate_priors(
                    self.method, proba, self._source, counts=counts, start=start, options=options
                ).prior

            replicates = target_replicates(
                estimate, prior, self._source.prior, proba.shape[0], self.n_resamples, generator
            )
        else:
            replicates = np.array(
                [
                    self._source_replicate(prior, scores, generator, options)
                    for _ in range(self.n_resamples)
                ]
            )
        return prior_intervals(prior, replicates, self.confidence_level)

    def _source_replicate(self, prior, scores, rng, options):
        """One replicate's priors with the source rows (within classes) and the target
        rows resampled, the calibrator refitted."""
        source_scores, y_index, sample_weight = self._source_data
        counts = stratified_counts(rng, y_index, self.n_classes_)
        if sample_weight is not None:
            counts *= sample_weight
        calibrator = self._fit_calibrator(source_scores, y_index, counts)
        source = self._summarise(source_scores, y_index, counts, calibrator)
        proba = self._calibrate(scores, calibrator)
        return estimate_priors(
            self.method,
            proba,
            source,
            counts=resampled_counts(rng, proba.shape[0], 1),
            start=replicate_start(prior, source.prior, 1),
            options=options,
        ).prior[0]

    def _validate_scores(self, scores, name="scores"):
        """Validate scores against the fitted number of columns (and at least one row).
        Probabilities used uncalibrated are scanned for non-finite values by the check of
        :meth:`_calibrate`, in the read that checks their rows, not here too."""
        with np.errstate(over="ignore", invalid="ignore"):
            scores = validate_data(
                self,
                scores,
                reset=False,
                ensure_2d=self._scores_ndim == 2,
                dtype=[np.float64, np.float32],
                ensure_all_finite=self.calibrator_ is not None or self.input != "probabilities",
            )
        if scores.ndim != self._scores_ndim:
            raise ValueError(
                f"{type(self).__name__} was fitted on 1-D binary scores, got `{name}` of "
                f"shape {scores.shape}."
            )
        return scores

    def _calibrate(self, scores, calibrator, name="scores", following=None):
        """Calibrated probabilities (float64, 2-D) of validated scores (the argument
        ``name`` of the caller, for error messages); probabilities used as they are are
        checked on the path of the fused pass ``following`` (numba's or numpy's; None:
        numpy's, no fused pass follows)."""
        if calibrator is not None:
            return calibrator.predict_proba(scores)
        if self.input == "probabilities":
            proba = checked_rows(scores, kind=following, name=name)
            return proba.astype(np.float64, copy=False)
        logits = scores if scores.ndim == 2 else np.column_stack([np.zeros_like(scores), scores])
        return softmax(logits.astype(np.float64), axis=1)

    def predict_proba(self, scores):
        """Return the calibrated probabilities, re-weighted to the target priors.

        Parameters
        ----------
        scores : array-like or Dask array of shape (n_samples, n_classes) or (n_samples,)
            Scores of the kind and number of columns seen in ``fit``.

        Returns
        -------
        proba : ndarray (Dask array for Dask input) of shape (n_samples, n_classes)
            Rows sum to 1; columns follow ``classes_``. Before :meth:`adapt` they are the
            calibrated probabilities.
        """
        check_is_fitted(self)
        if uses_dask(scores):
            return predict_proba_dask(self, scores)
        proba = self._calibrate(self._validate_scores(scores), self.calibrator_)
        return self._reweight(proba)

    def _reweight(self, proba):
        """Multiply by the class weights and renormalise (rows of zero mass keep theirs)."""
        weights = getattr(self, "weights_", None)
        if weights is None:
            return proba
        adapted = proba * weights
        total = adapted.sum(axis=1, keepdims=True)
        empty = total[:, 0] <= 0
        adapted[empty] = proba[empty]
        total[empty] = 1.0
        adapted /= total
        return adapted

    def transform(self, scores):
        """Return the adapted probabilities; the same as :meth:`predict_proba`.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes) or (n_samples,)
            Scores of the kind and number of columns seen in ``fit``.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            The probabilities under the target priors.
        """
        return self.predict_proba(scores)

    def predict(self, scores):
        """Return the most probable class under the target priors.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes) or (n_samples,)
            Scores of the kind and number of columns seen in ``fit``.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(scores)
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags
