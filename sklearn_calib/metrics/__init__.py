"""Calibration metrics computed with numpy, and the statistics of calibration.

The metric functions (``_metrics``) bin with the library's one bin rule (``_binning``:
``(lower, upper]`` on the bin edges, 0 in the first bin); the kernel-smoothed errors,
SECE and smECE, are in ``_smooth``. The statistics of calibration: bootstrap intervals
(``_bootstrap``, over the resampling plans of ``_resampling``), tests
(``_hypothesis_tests``), the debiased and top-label errors (``_debiased``,
``_top_label``), decompositions (``_decomposition``), the smooth reliability diagram
(``_smooth_diagram``), the simultaneous band of the reliability curve and the test it
inverts (``_reliability_band``), the calibration report (``_calibration_report``) and calibration
by group (``_groups``: per-group metrics, the worst group, the audit with corrected tests).
:mod:`sklearn_calib.scoring` re-exports them with their scikit-learn scorers.
:data:`REPORT_METRICS` is the one list of the metrics the main job's table shows
(``_report``), and :func:`metric_values` computes them for one set of predictions.
"""

import warnings

from . import _dask_metrics, _dask_report  # noqa: F401  (they register the Dask handlers)
from ._accumulator import CalibrationAccumulator
from ._bootstrap import BootstrapInterval, calibration_error_ci
from ._calibration_report import calibration_report
from ._debiased import debiased_calibration_error
from ._decomposition import calibration_decomposition, refinement_loss
from ._groups import adjust_pvalues, calibration_audit, worst_group_calibration_error
from ._hypothesis_tests import CalibrationTestResult, calibration_test
from ._metrics import (
    adaptive_calibration_error,
    brier_score,
    classwise_calibration_error,
    differentiable_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    reliability_diagram,
    top_label_accuracy,
)
from ._reliability_band import calibration_equivalence_test, reliability_band
from ._report import REPORT_METRICS, ReportMetric, metric_values
from ._smooth import smooth_calibration_error, smooth_ece
from ._smooth_diagram import smooth_reliability_diagram
from ._top_label import top_label_calibration_error

__all__ = [
    "REPORT_METRICS",
    "BootstrapInterval",
    "CalibrationAccumulator",
    "CalibrationTestResult",
    "ReportMetric",
    "adaptive_calibration_error",
    "adjust_pvalues",
    "brier_score",
    "calibration_audit",
    "calibration_decomposition",
    "calibration_equivalence_test",
    "calibration_error_ci",
    "calibration_report",
    "calibration_test",
    "classwise_calibration_error",
    "debiased_calibration_error",
    "differentiable_calibration_error",
    "expected_calibration_error",
    "maximum_calibration_error",
    "metric_values",
    "negative_log_likelihood",
    "refinement_loss",
    "reliability_band",
    "reliability_diagram",
    "smooth_calibration_error",
    "smooth_ece",
    "smooth_reliability_diagram",
    "top_label_accuracy",
    "top_label_calibration_error",
    "worst_group_calibration_error",
]


def __getattr__(name):
    """Deprecated names of the module."""
    if name == "NLL_EPS":
        warnings.warn(
            "`NLL_EPS` is deprecated and will be removed: negative_log_likelihood now clips "
            "probabilities at the machine epsilon of their dtype, as scikit-learn's log_loss.",
            FutureWarning,
            stacklevel=2,
        )
        return 1e-15
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
