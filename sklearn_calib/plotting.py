"""Reliability diagrams in the style of scikit-learn's ``CalibrationDisplay``.

matplotlib is an optional dependency (the ``plot`` extra); it is imported only when a
diagram is drawn.
"""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .metrics import expected_calibration_error, reliability_diagram

__all__ = ["ReliabilityDisplay"]

#: gid of the accuracy bars, by which a diagram finds the diagrams already on its axes.
_ACCURACY_GID = "sklearn_calib-reliability-accuracy"


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "ReliabilityDisplay needs matplotlib, which is not installed. Install it with "
            "`pip install matplotlib` or `pip install sklearn-calib[plot]`."
        ) from exc
    return plt


class ReliabilityDisplay:
    """Reliability diagram: accuracy per confidence bin, its gap to the diagonal, and a
    histogram of the confidences.

    Create it with :meth:`from_predictions` or :meth:`from_estimator`. All parameters are
    stored as attributes. Bins follow the ``(lower, upper]`` rule of the metrics.

    Parameters
    ----------
    edges : ndarray of shape (n_bins + 1,)
        Bin edges.
    count : ndarray of shape (n_bins,)
        Number (or total weight) of samples per bin.
    mean_confidence : ndarray of shape (n_bins,)
        Mean top-label confidence per bin, NaN for an empty bin.
    accuracy : ndarray of shape (n_bins,)
        Accuracy per bin, NaN for an empty bin.
    ece : float, default=None
        Expected calibration error shown in the legend; not shown when None.
    estimator_name : str, default=None
        Name shown in the legend.

    Attributes
    ----------
    bars_ : matplotlib BarContainer
        Accuracy bars (height 0 for an empty bin).
    gap_bars_ : matplotlib BarContainer
        Bars from each bin's accuracy to its mean confidence (the calibration gap).
    line_ : matplotlib Line2D or None
        The diagonal of perfect calibration, if drawn.
    hist_bars_ : matplotlib BarContainer or None
        Fraction of samples per bin, if a histogram axes was used.
    ax_ : matplotlib Axes
        Axes of the reliability diagram.
    hist_ax_ : matplotlib Axes or None
        Axes of the confidence histogram.
    figure_ : matplotlib Figure
        Figure containing the axes.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn_calib.plotting import ReliabilityDisplay
    >>> display = ReliabilityDisplay.from_predictions([0, 1, 1], [[0.8, 0.2], [0.3, 0.7],
    ...                                                           [0.6, 0.4]], n_bins=5)
    >>> print(display.bars_.patches[3].get_height())
    1.0
    """

    def __init__(self, edges, count, mean_confidence, accuracy, *, ece=None, estimator_name=None):
        self.edges = edges
        self.count = count
        self.mean_confidence = mean_confidence
        self.accuracy = accuracy
        self.ece = ece
        self.estimator_name = estimator_name

    def plot(self, *, ax=None, hist_ax=None, name=None, ref_line=True, **kwargs):
        """Draw the diagram.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes for the reliability bars. When None, a new figure is made with the
            diagram above and the confidence histogram below.
        hist_ax : matplotlib Axes, default=None
            Axes for the confidence histogram, given together with ``ax``. When None and
            ``ax`` is given, no histogram is drawn. A diagram drawn on axes that already
            hold one takes the next colour of the cycle, half transparent, and adds no
            second diagonal or gap legend entry.
        name : str, default=None
            Name in the legend; ``estimator_name`` when None.
        ref_line : bool, default=True
            Whether to draw the diagonal of perfect calibration.
        **kwargs : dict
            Passed to ``ax.bar`` for the accuracy bars.

        Returns
        -------
        display : ReliabilityDisplay
        """
        edges = np.asarray(self.edges, dtype=np.float64)
        if (
            edges.ndim != 1
            or len(edges) < 2
            or not np.isfinite(edges).all()
            or (np.diff(edges) < 0).any()
        ):
            raise ValueError(
                "Expected `edges` to be finite, non-decreasing bin edges of shape "
                f"(n_bins + 1,), got {self.edges!r}."
            )
        plt = _pyplot()
        if ax is None:
            if hist_ax is not None:
                raise ValueError(
                    "Expected `ax` together with `hist_ax`, got only `hist_ax`: pass the axes "
                    "of the diagram too, or neither for a new figure with both."
                )
            figure, (ax, hist_ax) = plt.subplots(
                2, 1, figsize=(5, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
            )
        # Diagrams already on these axes: a new one takes the next colour of the cycle and
        # draws the diagonal and the legend entry of the gap only once.
        earlier = sum(
            1
            for container in ax.containers
            if container.patches and container.patches[0].get_gid() == _ACCURACY_GID
        )
        name = self.estimator_name if name is None else name
        left = edges[:-1]
        width = np.diff(edges)
        accuracy = np.nan_to_num(self.accuracy, nan=0.0)
        confidence = np.where(np.isnan(self.mean_confidence), accuracy, self.mean_confidence)

        label = "Accuracy" if name is None else name
        if self.ece is not None:
            label = f"{label} (ECE = {100 * self.ece:.2f} %)"
        bar_kwargs = {
            "color": f"C{earlier % 10}",
            "alpha": 0.5 if earlier else 1.0,
            "edgecolor": "black",
            "label": label,
            "gid": _ACCURACY_GID,
            **kwargs,
        }
        self.bars_ = ax.bar(left, accuracy, width=width, align="edge", **bar_kwargs)
        self.gap_bars_ = ax.bar(
            left,
            confidence - accuracy,
            bottom=accuracy,
            width=width,
            align="edge",
            color="tab:red",
            alpha=0.35,
            edgecolor="tab:red",
            hatch="//",
            label="_nolegend_" if earlier else "Gap to confidence",
        )
        self.line_ = None
        if ref_line and not earlier:
            (self.line_,) = ax.plot([0, 1], [0, 1], "k--", label="Perfectly calibrated")
        ax.set(xlim=(0, 1), ylim=(0, 1), ylabel="Accuracy")
        ax.legend(loc="upper left")

        self.hist_bars_ = None
        if hist_ax is not None:
            total = np.sum(self.count)
            self.hist_bars_ = hist_ax.bar(
                left,
                np.asarray(self.count) / total,
                width=width,
                align="edge",
                color="tab:gray",
                edgecolor="black",
            )
            hist_ax.set(xlim=(0, 1), xlabel="Confidence", ylabel="Fraction of samples")
        else:
            ax.set(xlabel="Confidence")
        self.ax_ = ax
        self.hist_ax_ = hist_ax
        self.figure_ = ax.figure
        return self

    @classmethod
    def from_predictions(
        cls,
        y_true,
        y_prob,
        *,
        n_bins=15,
        strategy="uniform",
        labels=None,
        sample_weight=None,
        name=None,
        ax=None,
        hist_ax=None,
        ref_line=True,
        **kwargs,
    ):
        """Compute the diagram from labels and predicted probabilities and draw it.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            True labels of any type.
        y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
            Predicted probabilities; 1-D means the positive class of a binary problem.
        n_bins : int, default=15
            Number of bins.
        strategy : {"uniform", "quantile"}, default="uniform"
            Equal-width or equal-mass bins; the legend's ECE uses the same bins.
        labels : array-like of shape (n_classes,), default=None
            The class of each column of ``y_prob``.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.
        name : str, default=None
            Name in the legend.
        ax, hist_ax, ref_line, **kwargs
            See :meth:`plot`.

        Returns
        -------
        display : ReliabilityDisplay
        """
        diagram = reliability_diagram(
            y_true,
            y_prob,
            n_bins=n_bins,
            strategy=strategy,
            labels=labels,
            sample_weight=sample_weight,
        )
        ece = expected_calibration_error(
            y_true,
            y_prob,
            n_bins=n_bins,
            strategy=strategy,
            labels=labels,
            sample_weight=sample_weight,
        )
        display = cls(
            diagram.edges,
            diagram.count,
            diagram.mean_confidence,
            diagram.accuracy,
            ece=ece,
            estimator_name=name,
        )
        return display.plot(ax=ax, hist_ax=hist_ax, ref_line=ref_line, **kwargs)

    @classmethod
    def from_estimator(
        cls,
        estimator,
        X,
        y,
        *,
        n_bins=15,
        strategy="uniform",
        sample_weight=None,
        name=None,
        ax=None,
        hist_ax=None,
        ref_line=True,
        **kwargs,
    ):
        """Draw the diagram of a fitted classifier's ``predict_proba`` on ``X``.

        Parameters
        ----------
        estimator : fitted classifier
            Must have ``predict_proba`` and ``classes_``; an unfitted one raises
            ``NotFittedError``.
        X : array-like of shape (n_samples, n_features)
            Input data.
        y : array-like of shape (n_samples,)
            True labels.
        n_bins : int, default=15
            Number of bins.
        strategy : {"uniform", "quantile"}, default="uniform"
            Equal-width or equal-mass bins.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.
        name : str, default=None
            Name in the legend; the estimator's class name when None.
        ax, hist_ax, ref_line, **kwargs
            See :meth:`plot`.

        Returns
        -------
        display : ReliabilityDisplay

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from sklearn.datasets import load_digits
        >>> from sklearn.naive_bayes import GaussianNB
        >>> from sklearn_calib.plotting import ReliabilityDisplay
        >>> X, y = load_digits(return_X_y=True)
        >>> display = ReliabilityDisplay.from_estimator(GaussianNB().fit(X, y), X, y)
        >>> int(sum(display.count)), display.estimator_name
        (1797, 'GaussianNB')
        """
        if not callable(getattr(estimator, "predict_proba", None)):
            raise TypeError(
                f"Expected a classifier with `predict_proba`, got {type(estimator).__name__}."
            )
        check_is_fitted(estimator)
        return cls.from_predictions(
            y,
            estimator.predict_proba(X),
            n_bins=n_bins,
            strategy=strategy,
            labels=estimator.classes_,
            sample_weight=sample_weight,
            name=type(estimator).__name__ if name is None else name,
            ax=ax,
            hist_ax=hist_ax,
            ref_line=ref_line,
            **kwargs,
        )
