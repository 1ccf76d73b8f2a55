"""The kernel of each public metric, and its resampling plan, by public function.

A public metric checks its input and calls its kernel; :func:`calibration_error_ci`,
:func:`calibration_report` and :func:`metric_values` check their input once and look the
kernels of several metrics up here, so one set of predictions is validated once however
many metrics are computed on it.
"""

import functools
from typing import NamedTuple

from .._statistics._decomposition import _refinement_loss, refinement_loss
from ._binned import (
    _adaptive_calibration_error,
    _brier_score,
    _classwise_calibration_error,
    _differentiable_calibration_error,
    _expected_calibration_error,
    _maximum_calibration_error,
    _negative_log_likelihood,
    _top_label_accuracy,
    adaptive_calibration_error,
    binned_plan,
    brier_plan,
    brier_score,
    classwise_calibration_error,
    classwise_plan,
    differentiable_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    negative_log_likelihood_plan,
    top_label_accuracy,
    top_label_accuracy_plan,
)
from ._debiased import _debiased_calibration_error, debiased_calibration_error, debiased_plan
from ._smece import (
    _smooth_calibration_error,
    _smooth_ece,
    smooth_calibration_error,
    smooth_ece,
    smooth_ece_plan,
)
from ._top_label import _top_label_calibration_error, top_label_calibration_error, top_label_plan


class MetricKernel(NamedTuple):
    """How a public metric is computed on checked :class:`Predictions`.

    Attributes
    ----------
    compute : callable
        ``compute(predictions, **options)`` returns the metric, ``options`` being the
        public function's keyword arguments but ``labels``, ``sample_weight`` and
        ``groups`` (a kernel computes one set of predictions; see ``_group_rows``).
    plan : callable or None
        ``plan(predictions, **options)`` returns its :class:`ResamplingPlan`; None when
        a bootstrap recomputes the metric on every replicate.
    """

    compute: object
    plan: object


#: Public metric function to its kernel.
KERNELS = {
    expected_calibration_error: MetricKernel(_expected_calibration_error, binned_plan),
    maximum_calibration_error: MetricKernel(
        _maximum_calibration_error, functools.partial(binned_plan, norm="max")
    ),
    adaptive_calibration_error: MetricKernel(
        _adaptive_calibration_error, functools.partial(binned_plan, strategy="quantile")
    ),
    classwise_calibration_error: MetricKernel(_classwise_calibration_error, classwise_plan),
    top_label_calibration_error: MetricKernel(_top_label_calibration_error, top_label_plan),
    debiased_calibration_error: MetricKernel(_debiased_calibration_error, debiased_plan),
    smooth_ece: MetricKernel(_smooth_ece, smooth_ece_plan),
    brier_score: MetricKernel(_brier_score, brier_plan),
    negative_log_likelihood: MetricKernel(_negative_log_likelihood, negative_log_likelihood_plan),
    top_label_accuracy: MetricKernel(_top_label_accuracy, top_label_accuracy_plan),
    smooth_calibration_error: MetricKernel(_smooth_calibration_error, None),
    differentiable_calibration_error: MetricKernel(_differentiable_calibration_error, None),
    refinement_loss: MetricKernel(_refinement_loss, None),
}
