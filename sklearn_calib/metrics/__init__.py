"""Calibration metrics computed with numpy, and the statistics of calibration.

The package has six private parts, each importing only those before it: ``_core`` (the
checks' shared pieces: the one bin rule, weights, blocks of rows, conventions, resampling
plans, groups' rows, Poisson counts, the metric registry and the routing of Dask input),
``_fused`` (the fused passes: numba kernels and their numpy twins), ``_functions`` (the
metric functions and their kernels), ``_statistics`` (bootstrap intervals, tests,
decompositions, groups and audit, the simultaneous reliability band and the equivalence
test it inverts, the calibration report and the report table),
``_streaming`` (``CalibrationAccumulator``: its sums and their metrics) and ``_dask``
(every handler of Dask input). Each metric is declared once, in ``_catalogue``, and read
from there by the report, the scorers, the accumulator and ``CalibrationScoring``.
:mod:`sklearn_calib.scoring` re-exports the public names with their scikit-learn
scorers. :data:`REPORT_METRICS` is the one list of the metrics the main job's table
shows, and :func:`metric_values` computes them for one set of predictions.
"""

import warnings

from ._catalogue import REPORT_METRICS
from ._functions._binned import (
    adaptive_calibration_error,
    classwise_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    reliability_diagram,
)
from ._functions._debiased import debiased_calibration_error
from ._functions._scores import (
    brier_score,
    differentiable_calibration_error,
    negative_log_likelihood,
    top_label_accuracy,
)
from ._functions._sece import smooth_calibration_error
from ._functions._smece import smooth_ece
from ._functions._top_label import top_label_calibration_error
from ._statistics._bootstrap import BootstrapInterval, calibration_error_ci
from ._statistics._calibration_report import calibration_report
from ._statistics._decomposition import calibration_decomposition, refinement_loss
from ._statistics._group_change import paired_change_test
from ._statistics._groups import calibration_audit, worst_group_calibration_error
from ._statistics._hypothesis_tests import CalibrationTestResult, calibration_test
from ._statistics._multiple_testing import adjust_pvalues
from ._statistics._reliability_band import calibration_equivalence_test, reliability_band
from ._statistics._report import ReportMetric, metric_values
from ._statistics._smooth_diagram import smooth_reliability_diagram
from ._streaming._accumulator import CalibrationAccumulator

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
    "paired_change_test",
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
