"""The smooth reliability diagram: kernel regression of the outcomes on the scores."""

import numpy as np
from sklearn.utils import Bunch, check_random_state

from .._core._resampling import bootstrap_sums, check_interval_options, resample
from .._functions._predictions import check_predictions
from .._functions._smece import _check_smece_bandwidth, _SmoothECE

#: Points of the diagram's mesh.
MESH_POINTS = 200


def _lowest_score(y_prob, convention):
    """The lowest score a prediction can have: 1/K for the top-label confidence of K
    classes (the largest of K probabilities is at least their mean), else 0."""
    if convention != "top_label":
        return 0.0
    shape = np.shape(y_prob)
    return 1.0 / (2 if len(shape) == 1 else max(shape[1], 2))


def smooth_reliability_diagram(
    y_true,
    y_prob,
    *,
    bandwidth="auto",
    convention="top_label",
    confidence_level=None,
    n_resamples=1000,
    random_state=None,
    labels=None,
    sample_weight=None,
):
    """Smooth reliability diagram (Błasiok & Nakkiran 2024), with a bootstrap band.

    The outcomes (correctness) are regressed on the scores (confidences) with the
    reflected Gaussian kernel of :func:`smooth_ece`, at its bandwidth:
    ``accuracy(t) = sum_i w_i K_h(t, s_i) y_i / (sum_i w_i K_h(t, s_i) + 1e-4 w_bar)``
    on 200 mesh points of the scores' range: [1/K, 1] for the top-label confidence of K
    classes, which never lies below 1/K, and [0, 1] for the positive class's
    probability. Unlike a binned diagram it needs no bin choice, and the distance of
    the curve from the diagonal, weighted by the density, is the smECE.
    With ``confidence_level``, a pointwise percentile band comes from bootstrap
    replicates of the kernel sums (rows resampled as in :func:`calibration_error_ci`,
    the bandwidth held fixed).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels of any type.
    y_prob : array-like of shape (n_samples, n_classes) or (n_samples,)
        Predicted probabilities; 1-D means the positive class of a binary problem.
    bandwidth : "auto" or float, default="auto"
        Kernel bandwidth; "auto" is smECE's fixed point.
    convention : {"top_label", "positive_class"}, default="top_label"
        What is smoothed; see :func:`expected_calibration_error`.
    confidence_level : float, default=None
        Coverage of the pointwise band, in (0, 1); no band when None.
    n_resamples : int, default=1000
        Bootstrap replicates of the band.
    random_state : int, RandomState instance or None, default=None
        Seeds the resampling.
    labels : array-like of shape (n_classes,), default=None
        The class of each column of ``y_prob``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    diagram : :class:`~sklearn.utils.Bunch`
        ``mesh`` (200,) from 1/K (top-label) or 0 to 1, ``accuracy`` (200,) the
        smoothed outcome rate, ``density`` (200,) the kernel density of the scores (mean
        1 on the mesh), ``bandwidth``, and with ``confidence_level`` the band ``low``
        and ``high`` (200,).

    See Also
    --------
    smooth_ece : The smooth ECE of this curve.
    reliability_diagram : The binned diagram, with Clopper-Pearson intervals.

    References
    ----------
    .. [1] J. Błasiok and P. Nakkiran, "Smooth ECE: Principled Reliability Diagrams via
       Kernel Smoothing", International Conference on Learning Representations, 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.scoring import smooth_reliability_diagram
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(3000)
    >>> y = rng.random(3000) < p
    >>> diagram = smooth_reliability_diagram(y, p, convention="positive_class",
    ...                                      confidence_level=0.9, random_state=0)
    >>> middle = np.abs(diagram.mesh - 0.5).argmin()
    >>> bool(diagram.low[middle] <= 0.5 <= diagram.high[middle])
    True
    """
    bandwidth = _check_smece_bandwidth(bandwidth)
    if confidence_level is not None:
        n_resamples, confidence_level = check_interval_options(n_resamples, confidence_level)
    data = check_predictions(y_true, y_prob, labels=labels, sample_weight=sample_weight)
    # rows of weight 0 stand for no sample: they are neither smoothed nor resampled
    smece = _SmoothECE.from_predictions(data.weighted_rows(), convention)
    bandwidth = smece.resolve(bandwidth)
    mesh = np.linspace(_lowest_score(y_prob, convention), 1.0, MESH_POINTS)

    def curves(smoothed, eps):
        density, outcome = smoothed[..., 0, :], smoothed[..., 1, :]
        return outcome / (density + eps), density

    plan = smece.plan(bandwidth, [smece.weight, smece.outcome], mesh, curves)
    no_groups = np.zeros(plan.n_rows, dtype=np.intp)
    accuracy, density = plan.value(plan.accumulate(no_groups, 1)[0])
    diagram = Bunch(
        mesh=mesh, accuracy=accuracy, density=density / density.mean(), bandwidth=bandwidth
    )
    if confidence_level is not None:
        rng = check_random_state(random_state)
        _, replicate_sums = bootstrap_sums(plan, resample(plan, n_resamples, rng))
        replicate_accuracy, _ = plan.value(replicate_sums)
        tail = (1.0 - confidence_level) / 2.0
        diagram.low, diagram.high = np.quantile(replicate_accuracy, [tail, 1.0 - tail], axis=0)
    return diagram
