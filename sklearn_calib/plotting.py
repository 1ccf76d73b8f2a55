"""Reliability diagrams in the style of scikit-learn's ``CalibrationDisplay``.

matplotlib is an optional dependency (the ``plot`` extra); it is imported only when a
diagram is drawn.
"""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._validation import check_probabilities, resolve_classes
from .metrics import (
    expected_calibration_error,
    reliability_diagram,
    smooth_reliability_diagram,
)

__all__ = ["ReliabilityDisplay"]

#: gid of the accuracy bars, by which a diagram finds the diagrams already on its axes.
_ACCURACY_GID = "sklearn_calib-reliability-accuracy"
#: Bar keywords the diagram sets itself (geometry), so a caller may not pass them.
_OWN_BAR_KEYWORDS = {"x", "y", "xy", "height", "width", "bottom", "align", "bounds", "angle"}
#: Keywords of ``Axes.bar`` beyond the Rectangle properties, and line aliases that
#: scikit-learn's CalibrationDisplay users pass (``c`` for the colour).
_EXTRA_BAR_KEYWORDS = {"tick_label", "xerr", "yerr", "ecolor", "capsize", "error_kw", "log"}
_LINE_ALIASES = {"c": "color"}


def _bar_keywords(kwargs):
    """Return the keywords for the accuracy bars, or raise naming the valid ones."""
    from matplotlib.artist import ArtistInspector
    from matplotlib.patches import Rectangle

    inspector = ArtistInspector(Rectangle)
    aliases = {alias for names in inspector.aliasd.values() for alias in names}
    valid = set(inspector.get_setters()) | aliases | _EXTRA_BAR_KEYWORDS | set(_LINE_ALIASES)
    valid -= _OWN_BAR_KEYWORDS | {"figure"}
    unknown = sorted(set(kwargs) - valid)
    if unknown:
        raise TypeError(
            f"ReliabilityDisplay got unexpected keyword argument(s) {unknown}; extra keywords "
            f"style the accuracy bars (matplotlib's Axes.bar), valid ones are "
            f"{sorted(valid)}."
        )
    return {_LINE_ALIASES.get(name, name): value for name, value in kwargs.items()}


def _positive_class_problem(y_true, y_prob, labels, pos_label):
    """Reorder a binary problem's columns so that ``pos_label`` is the positive (second)."""
    proba = check_probabilities(y_prob)
    y = np.asarray(y_true)
    if proba.shape[1] != 2:
        raise ValueError(
            f"Expected a binary problem for `pos_label`, got {proba.shape[1]} classes; leave "
            "`pos_label=None` for the top-label diagram."
        )
    classes = resolve_classes(y.ravel() if y.ndim == 2 else y, labels, 2)
    matches = np.flatnonzero(classes == pos_label)
    if matches.shape[0] != 1:
        raise ValueError(
            f"Expected `pos_label` to be one of the classes {classes.tolist()}, got {pos_label!r}."
        )
    order = [1, 0] if matches[0] == 0 else [0, 1]
    return proba[:, order], classes[order]


def _supported(smooth, total):
    """Mesh points of a smooth curve with about one sample or more within a bandwidth.

    The density of the scores on the mesh's range is ``density / span`` (``density``
    has mean 1 on the mesh), so ``total * density / span * 2 h`` samples lie within
    ``h`` of a point; where that is below 1 the curve is the kernel's extrapolation.
    """
    mesh = np.asarray(smooth.mesh, dtype=np.float64)
    span = mesh[-1] - mesh[0]
    return total * np.asarray(smooth.density) * 2 * smooth.bandwidth / span >= 1


def _legend_above(ax):
    """One legend entry per label, above the axes, where it hides no bar: the bars and
    intervals first, then the lines, then the bands."""
    from matplotlib.container import Container
    from matplotlib.lines import Line2D

    def kind(entry):
        handle = entry[0]
        return 0 if isinstance(handle, Container) else 1 if isinstance(handle, Line2D) else 2

    entries = {}
    for handle, label in sorted(zip(*ax.get_legend_handles_labels(), strict=True), key=kind):
        entries.setdefault(label, handle)
    ax.legend(
        entries.values(),
        entries.keys(),
        loc="lower left",
        bbox_to_anchor=(0, 1.02, 1, 0.2),
        mode="expand",
        borderaxespad=0,
        fontsize="small",
        frameon=False,
    )


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "ReliabilityDisplay needs matplotlib, which is not installed. Install it with "
            '`pip install matplotlib` (or, from the repository root, `pip install ".[plot]"`).'
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
    accuracy_low, accuracy_high : ndarray of shape (n_bins,), default=None
        Per-bin interval of the accuracy (Clopper-Pearson), drawn as error bars.
    smooth : :class:`~sklearn.utils.Bunch`, default=None
        A :func:`~sklearn_calib.scoring.smooth_reliability_diagram`, drawn as a line
        (with its band, if it has one).
    pos_label : int, float, bool or str, default=None
        The positive class of a positive-class diagram (axis labels say so); None for
        the top-label diagram.
    confidence_level : float, default=None
        Coverage of the accuracy intervals and of the smooth curve's band, for the
        legend.
    group_diagrams : dict, default=None
        Group label to that group's diagram (a
        :func:`~sklearn_calib.scoring.reliability_diagram` Bunch with its ``ece`` added),
        drawn as one line per group over the bars.

    Attributes
    ----------
    bars_ : matplotlib BarContainer
        Accuracy bars (height 0 for an empty bin).
    errorbar_ : matplotlib ErrorbarContainer or None
        The accuracy intervals, if any.
    smooth_line_ : matplotlib Line2D or None
        The smooth reliability curve, if any (NaN where the data do not support it).
    smooth_band_ : matplotlib PolyCollection or None
        Its bootstrap band, if any.
    group_lines_ : dict
        Group label to its reliability line (empty without ``group_diagrams``).
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

    def __init__(
        self,
        edges,
        count,
        mean_confidence,
        accuracy,
        *,
        ece=None,
        estimator_name=None,
        accuracy_low=None,
        accuracy_high=None,
        smooth=None,
        pos_label=None,
        confidence_level=None,
        group_diagrams=None,
    ):
        self.edges = edges
        self.count = count
        self.mean_confidence = mean_confidence
        self.accuracy = accuracy
        self.ece = ece
        self.estimator_name = estimator_name
        self.accuracy_low = accuracy_low
        self.accuracy_high = accuracy_high
        self.smooth = smooth
        self.pos_label = pos_label
        self.confidence_level = confidence_level
        self.group_diagrams = group_diagrams

    def plot(self, *, ax=None, hist_ax=None, name=None, ref_line=True, **kwargs):
        """Draw the diagram.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes for the reliability bars. When None, a new figure (constrained layout)
            is made with the diagram above and the confidence histogram below. The
            legend is drawn above the axes, outside them, so that it hides no bar; on
            axes of your own, a figure with ``layout="constrained"`` makes room for it.
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
            Style of the accuracy bars, passed to matplotlib's ``Axes.bar`` (Rectangle
            properties such as ``color``, ``alpha``, ``edgecolor``, ``linewidth``,
            ``hatch``, ``label``; ``c`` is read as ``color``, as for
            scikit-learn's line). Any other name raises a TypeError listing the valid
            ones.

        Returns
        -------
        display : ReliabilityDisplay
            ``self``, with the drawn artists.
        """
        bar_keywords = _bar_keywords(kwargs)
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
                2, 1, figsize=(5, 7), sharex=True, height_ratios=[3, 1], layout="constrained"
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
            # half transparent over an earlier diagram, or under the smooth curve's band
            "alpha": 0.5 if earlier or self.smooth is not None else 1.0,
            "edgecolor": "black",
            "label": label,
            "gid": _ACCURACY_GID,
            **bar_keywords,
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
        level = "" if self.confidence_level is None else f"{100 * self.confidence_level:g} % "
        self.errorbar_ = None
        if self.accuracy_low is not None:
            filled = np.asarray(self.count) > 0
            centre = np.asarray(self.mean_confidence)[filled]
            value = np.asarray(self.accuracy)[filled]
            spread = [
                value - np.asarray(self.accuracy_low)[filled],
                np.asarray(self.accuracy_high)[filled] - value,
            ]
            self.errorbar_ = ax.errorbar(
                centre,
                value,
                yerr=spread,
                fmt="none",
                ecolor="black",
                capsize=3,
                zorder=3,
                label=f"{level}Clopper-Pearson interval",
            )
        self.smooth_line_ = self.smooth_band_ = None
        if self.smooth is not None:
            # a darker shade of the bars' colour, drawn over them
            colour = tuple(0.55 * np.asarray(self.bars_.patches[0].get_facecolor()[:3]))
            self._plot_smooth(ax, colour, level)
        self.group_lines_ = {}
        for offset, (group, diagram) in enumerate((self.group_diagrams or {}).items(), 1):
            filled = np.asarray(diagram.count) > 0
            (self.group_lines_[group],) = ax.plot(
                np.asarray(diagram.mean_confidence)[filled],
                np.asarray(diagram.accuracy)[filled],
                marker="o",
                color=f"C{(earlier + offset) % 10}",
                label=f"{group} (ECE = {100 * diagram.ece:.2f} %)",
            )
        self.line_ = None
        if ref_line and not earlier:
            (self.line_,) = ax.plot([0, 1], [0, 1], "k--", label="Perfectly calibrated")
        positive = self.pos_label is not None
        y_label = "Accuracy"
        if positive:
            y_label = f"Fraction of positives (Positive class: {self.pos_label})"
        ax.set(xlim=(0, 1), ylim=(0, 1), ylabel=y_label)
        _legend_above(ax)

        x_label = "Confidence"
        if positive:
            x_label = f"Mean predicted probability (Positive class: {self.pos_label})"
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
            hist_ax.set(xlim=(0, 1), xlabel=x_label, ylabel="Fraction of samples")
        else:
            ax.set(xlabel=x_label)
        self.ax_ = ax
        self.hist_ax_ = hist_ax
        self.figure_ = ax.figure
        return self

    def _plot_smooth(self, ax, colour, level):
        """Draw the smooth curve and its band where the data support them."""
        smooth = self.smooth
        supported = _supported(smooth, np.sum(self.count))
        (self.smooth_line_,) = ax.plot(
            smooth.mesh,
            np.where(supported, smooth.accuracy, np.nan),
            color=colour,
            linewidth=2,
            zorder=4,
            label=f"Smoothed (h = {smooth.bandwidth:.3g})",
        )
        if "low" in smooth:
            self.smooth_band_ = ax.fill_between(
                smooth.mesh,
                smooth.low,
                smooth.high,
                where=supported,
                color=colour,
                alpha=0.3,
                linewidth=0,
                zorder=2.5,
                label=f"{level}bootstrap band",
            )

    @classmethod
    def from_predictions(
        cls,
        y_true,
        y_prob,
        *,
        n_bins=15,
        strategy="uniform",
        pos_label=None,
        confidence_level=None,
        smooth=False,
        random_state=None,
        labels=None,
        sample_weight=None,
        groups=None,
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
        pos_label : int, float, bool or str, default=None
            For a binary problem, draw the positive-class diagram of this class (its
            predicted probability against the fraction of samples of that class), as
            scikit-learn's ``CalibrationDisplay``; None draws the top-label diagram
            (confidence against accuracy).
        confidence_level : float, default=None
            When given (in (0, 1)), draw each bin's Clopper-Pearson interval of the
            accuracy and, with ``smooth=True``, the smooth curve's bootstrap band.
        smooth : bool, default=False
            Also draw the smooth reliability curve
            (:func:`~sklearn_calib.scoring.smooth_reliability_diagram`; from 1/K for
            the top-label confidence of K classes), where the data support it: where at
            least about one sample lies within a bandwidth.
        random_state : int, RandomState instance or None, default=None
            Seeds the bootstrap band.
        labels : array-like of shape (n_classes,), default=None
            The class of each column of ``y_prob``.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.
        groups : array-like of shape (n_samples,) or (n_samples, n_columns), default=None
            Group of each sample, or columns whose distinct rows are the groups: each
            group's reliability line (its bins' accuracy against their mean confidence)
            and ECE are drawn over the overall diagram.
        name : str, default=None
            Name in the legend.
        ax, hist_ax : matplotlib Axes, default=None
            See :meth:`plot`.
        ref_line : bool, default=True
            See :meth:`plot`.
        **kwargs : dict
            See :meth:`plot`.

        Returns
        -------
        display : ReliabilityDisplay

        References
        ----------
        .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On Calibration of Modern
           Neural Networks", International Conference on Machine Learning, 2017.
        .. [2] J. Błasiok and P. Nakkiran, "Smooth ECE: Principled Reliability Diagrams
           via Kernel Smoothing", International Conference on Learning Representations,
           2024.

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> import numpy as np
        >>> from sklearn_calib.plotting import ReliabilityDisplay
        >>> rng = np.random.default_rng(0)
        >>> p = rng.random(500)
        >>> y = np.where(rng.random(500) < p, "spam", "ham")
        >>> display = ReliabilityDisplay.from_predictions(
        ...     y, p, n_bins=5, pos_label="spam", confidence_level=0.95, smooth=True,
        ...     random_state=0)
        >>> display.ax_.get_ylabel()
        'Fraction of positives (Positive class: spam)'
        >>> bool(np.all(display.accuracy_low <= display.accuracy))
        True
        """
        _bar_keywords(kwargs)
        if not isinstance(smooth, (bool, np.bool_)):
            raise ValueError(f"Expected `smooth` to be a bool, got {smooth!r}.")
        convention = "top_label"
        if pos_label is not None:
            y_prob, labels = _positive_class_problem(y_true, y_prob, labels, pos_label)
            convention = "positive_class"
        options = {
            "convention": convention,
            "labels": labels,
            "sample_weight": sample_weight,
        }
        diagram = reliability_diagram(
            y_true,
            y_prob,
            n_bins=n_bins,
            strategy=strategy,
            confidence_level=confidence_level,
            **options,
        )
        ece = expected_calibration_error(
            y_true, y_prob, n_bins=n_bins, strategy=strategy, **options
        )
        group_diagrams = None
        if groups is not None:
            binning = {"n_bins": n_bins, "strategy": strategy, "groups": groups, **options}
            group_diagrams = reliability_diagram(y_true, y_prob, **binning)
            errors = expected_calibration_error(y_true, y_prob, **binning)
            for group, group_diagram in group_diagrams.items():
                group_diagram.ece = errors[group]
        curve = None
        if smooth:
            curve = smooth_reliability_diagram(
                y_true,
                y_prob,
                confidence_level=confidence_level,
                random_state=random_state,
                **options,
            )
        display = cls(
            diagram.edges,
            diagram.count,
            diagram.mean_confidence,
            diagram.accuracy,
            ece=ece,
            estimator_name=name,
            accuracy_low=diagram.get("accuracy_low"),
            accuracy_high=diagram.get("accuracy_high"),
            smooth=curve,
            pos_label=pos_label,
            confidence_level=confidence_level,
            group_diagrams=group_diagrams,
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
        pos_label=None,
        confidence_level=None,
        smooth=False,
        random_state=None,
        sample_weight=None,
        groups=None,
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
        pos_label : int, float, bool or str, default=None
            See :meth:`from_predictions`; one of ``estimator.classes_``.
        confidence_level : float, default=None
            See :meth:`from_predictions`.
        smooth : bool, default=False
            See :meth:`from_predictions`.
        random_state : int, RandomState instance or None, default=None
            See :meth:`from_predictions`.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.
        groups : array-like of shape (n_samples,) or (n_samples, n_columns), default=None
            Groups whose reliability lines are drawn too; see :meth:`from_predictions`.
        name : str, default=None
            Name in the legend; the estimator's class name when None.
        ax, hist_ax : matplotlib Axes, default=None
            See :meth:`plot`.
        ref_line : bool, default=True
            See :meth:`plot`.
        **kwargs : dict
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
            pos_label=pos_label,
            confidence_level=confidence_level,
            smooth=smooth,
            random_state=random_state,
            labels=estimator.classes_,
            sample_weight=sample_weight,
            groups=groups,
            name=type(estimator).__name__ if name is None else name,
            ax=ax,
            hist_ax=hist_ax,
            ref_line=ref_line,
            **kwargs,
        )
