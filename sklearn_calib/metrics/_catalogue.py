"""The declarations of the library's metrics, each once (``_core._registry``).

The order of the declarations is the order of every list read from them: the columns of
the report table (:data:`REPORT_METRICS`), the rows of ``calibration_report``'s errors,
the metrics of ``CalibrationAccumulator``.
"""

import functools

from ._core._registry import Column, Metric, Resampled, Scorer, Streaming, register
from ._dask import _metrics as on_dask
from ._functions import _binned, _debiased, _scores, _sece, _smece, _top_label
from ._statistics import _decomposition
from ._statistics._report import report_metrics
from ._streaming import _entries

_TOP = ("top",)
_SCORES = ("scores",)
_GRID = ("grid",)
_FINE = ("fine",)

_DECLARATIONS = (
    Metric(
        "accuracy",
        function=_scores.top_label_accuracy,
        kernel=_scores._top_label_accuracy,
        plan=_scores.top_label_accuracy_plan,
        dask=on_dask.top_label_accuracy,
        column=Column("accuracy", "accuracy"),
        streaming=Streaming(
            _SCORES, _entries.accuracy, interval=Resampled("top", _entries.accuracy_replicates)
        ),
    ),
    Metric(
        "nll",
        function=_scores.negative_log_likelihood,
        kernel=_scores._negative_log_likelihood,
        plan=_scores.negative_log_likelihood_plan,
        dask=on_dask.negative_log_likelihood,
        column=Column("nll", "NLL"),
        scorers=(Scorer("neg_nll"),),
        streaming=Streaming(
            _SCORES,
            _entries.nll,
            interval=Resampled("scores", _entries.nll_replicates),
            per_epoch=True,
        ),
    ),
    Metric(
        "brier",
        function=_scores.brier_score,
        kernel=_scores._brier_score,
        plan=_scores.brier_plan,
        dask=on_dask.brier_score,
        column=Column("brier", "Brier"),
        scorers=(Scorer("neg_brier"),),
        streaming=Streaming(
            _SCORES,
            _entries.brier,
            interval=Resampled("scores", _entries.brier_replicates),
            per_epoch=True,
        ),
    ),
    Metric(
        "ece",
        function=_binned.expected_calibration_error,
        kernel=_binned._expected_calibration_error,
        plan=_binned.binned_plan,
        dask=on_dask.expected_calibration_error,
        column=Column("ece", "ECE"),
        report="ECE",
        scorers=(Scorer("neg_ece"), Scorer("neg_worst_group_ece", worst_group=True)),
        streaming=Streaming(
            _TOP,
            _entries.ece,
            interval=Resampled("top", _entries.ece_replicates),
            per_epoch=True,
        ),
    ),
    Metric(
        "mce",
        function=_binned.maximum_calibration_error,
        kernel=_binned._maximum_calibration_error,
        plan=functools.partial(_binned.binned_plan, norm="max"),
        dask=on_dask.maximum_calibration_error,
        column=Column("mce", "MCE"),
        scorers=(Scorer("neg_mce"),),
        streaming=Streaming(
            _TOP,
            _entries.mce,
            interval=Resampled("top", _entries.mce_replicates),
            per_epoch=True,
        ),
    ),
    Metric(
        "adaptive_ece",
        function=_binned.adaptive_calibration_error,
        kernel=_binned._adaptive_calibration_error,
        plan=functools.partial(_binned.binned_plan, strategy="quantile"),
        dask=on_dask.adaptive_calibration_error,
        column=Column("ada_ece", "AdaECE"),
        report="adaptive ECE",
        scorers=(Scorer("neg_adaptive_ece"),),
        streaming=Streaming(_FINE, _entries.adaptive_ece, per_epoch=True),
    ),
    Metric(
        "classwise_ece",
        function=_binned.classwise_calibration_error,
        kernel=_binned._classwise_calibration_error,
        plan=_binned.classwise_plan,
        dask=on_dask.classwise_calibration_error,
        column=Column("cw_ece", "cw-ECE"),
        report="classwise ECE",
        scorers=(Scorer("neg_classwise_ece"),),
        streaming=Streaming(
            ("classwise",),
            _entries.classwise_ece,
            interval=Resampled("classwise", _entries.classwise_ece_replicates),
            per_epoch=True,
        ),
    ),
    Metric(
        "sece",
        function=_sece.smooth_calibration_error,
        kernel=_sece._smooth_calibration_error,
        dask=on_dask.smooth_calibration_error,
        column=Column("sece", "SECE"),
        scorers=(Scorer("neg_sece"),),
        streaming=Streaming(_GRID, _entries.sece),
    ),
    Metric(
        "smooth_ece",
        function=_smece.smooth_ece,
        kernel=_smece._smooth_ece,
        plan=_smece.smooth_ece_plan,
        dask=on_dask.smooth_ece,
        report="smECE",
        scorers=(
            Scorer("neg_smooth_ece"),
            Scorer("neg_worst_group_smooth_ece", worst_group=True),
        ),
        streaming=Streaming(
            _GRID,
            _entries.smooth_ece,
            interval=Resampled("smooth", _entries.smooth_ece_replicates),
            per_epoch=True,
        ),
    ),
    Metric(
        "debiased_ce",
        function=_debiased.debiased_calibration_error,
        kernel=_debiased._debiased_calibration_error,
        plan=_debiased.debiased_plan,
        dask=on_dask.debiased_calibration_error,
        report="debiased L2 CE",
        scorers=(Scorer("neg_debiased_ce"),),
        streaming=Streaming(_FINE, _entries.debiased_ce),
    ),
    Metric(
        "top_label_ece",
        function=_top_label.top_label_calibration_error,
        kernel=_top_label._top_label_calibration_error,
        plan=_top_label.top_label_plan,
        dask=on_dask.top_label_calibration_error,
        scorers=(Scorer("neg_top_label_ece"),),
        streaming=Streaming(("predicted",), _entries.top_label_ece),
    ),
    Metric(
        "dece",
        function=_scores.differentiable_calibration_error,
        kernel=_scores._differentiable_calibration_error,
    ),
    Metric(
        "refinement",
        function=_decomposition.refinement_loss,
        kernel=_decomposition._refinement_loss,
        scorers=(
            Scorer("neg_refinement_log_loss", {"score": "log_loss"}),
            Scorer("neg_refinement_brier", {"score": "brier"}),
        ),
    ),
    Metric(
        "reliability",
        function=_binned.reliability_diagram,
        dask=on_dask.reliability_diagram,
        streaming=Streaming(_TOP, _entries.reliability_diagram),
    ),
    Metric("ks", streaming=Streaming(("fine", "scores"), _entries.ks)),
    Metric("kuiper", streaming=Streaming(("fine", "scores"), _entries.kuiper)),
    Metric("spiegelhalter", streaming=Streaming(_SCORES, _entries.spiegelhalter_test)),
)

for _metric in _DECLARATIONS:
    register(_metric)


#: The metrics of a calibration report, in the order of its columns.
REPORT_METRICS = report_metrics()
