"""Time the statistics of calibration against relplot and Kumar et al.'s package.

    PYTHONPATH=. python benchmarks/speed/bench_statistics.py [--n 1000000] [--resamples 1000]

On one float32 array of softmax probabilities (an overconfident model: labels drawn at
half the logits' scale), in one run:

- bootstrap interval of the ECE (``calibration_error_ci``, ``--resamples`` replicates)
  against one ECE call (target: at most 20x), and the per-replicate cost of the
  bootstrap of Kumar et al.'s ``uncertainty-calibration`` (``--kumar-resamples``
  replicates, on the top-label confidences; its debiased L2 error is timed once too);
- smECE (``smooth_ece``, automatic bandwidth) against ``relplot.smECE`` on the same
  confidences and correctness (target: no slower), and its bootstrap interval;
- SECE (``smooth_calibration_error``): the binned path at ``--n`` rows, and binned
  against exact at ``--exact-n`` rows (the exact sums are quadratic);
- the Kuiper test (``calibration_test``) against MAPIE's statistic and p-value, the CORP
  decomposition of the Brier score (``calibration_decomposition``) against
  ``model-diagnostics``' ``decompose`` (both on the top-label confidences and
  correctness), and the temperature split of the log loss against ``probmetrics``
  (on the probabilities);
- one ``calibration_report`` (``--resamples`` replicates per interval) against one ECE,
  the faster of the ECE timed first and again just before the report (target: at most 30x);
  with numba installed, both again on the numpy path (``SKLEARN_CALIB_NUMBA=0``).

Every timing is the best of ``--repeat`` runs (wall clock); ratios are against the
baseline named in the same row, measured in the same run.
"""

import argparse
import contextlib
import importlib.util
import os
import platform
import time

import numpy as np

from sklearn_calib import (
    calibration_decomposition,
    calibration_error_ci,
    calibration_report,
    calibration_test,
    debiased_calibration_error,
    expected_calibration_error,
    smooth_calibration_error,
    smooth_ece,
)


def make_probabilities(n, k, seed):
    """Softmax of Gaussian logits (scale 3) in float32, labels drawn at half that scale."""
    rng = np.random.default_rng(seed)
    proba = np.empty((n, k), dtype=np.float32)
    labels = np.empty(n, dtype=np.int64)
    for start in range(0, n, 1 << 18):
        logits = rng.standard_normal((min(1 << 18, n - start), k)) * 3
        truth = np.exp(logits / 2 - (logits / 2).max(axis=1, keepdims=True))
        truth /= truth.sum(axis=1, keepdims=True)
        draw = rng.random((len(logits), 1))
        labels[start : start + len(logits)] = (truth.cumsum(axis=1) < draw).sum(axis=1)
        expo = np.exp(logits - logits.max(axis=1, keepdims=True))
        proba[start : start + len(logits)] = expo / expo.sum(axis=1, keepdims=True)
    return proba, np.minimum(labels, k - 1)


#: Set to ``0``, this environment variable switches the optional numba kernels off.
NUMBA_SWITCH = "SKLEARN_CALIB_NUMBA"


@contextlib.contextmanager
def numpy_path():
    """Switch the optional numba kernels off (numpy computes the same sums)."""
    os.environ[NUMBA_SWITCH] = "0"
    try:
        yield
    finally:
        del os.environ[NUMBA_SWITCH]


def best_time(function, repeat):
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - start)
    return best, value


def show(rows):
    """Print (name, seconds, baseline seconds or None, value) rows."""
    print(f"{'':44s} {'time (s)':>9s} {'ratio':>8s}  value")
    for name, seconds, baseline, value in rows:
        ratio = "" if baseline is None else f"{seconds / baseline:8.2f}"
        print(f"{name:44s} {seconds:9.3f} {ratio:>8s}  {value}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--kumar-resamples", type=int, default=5)
    parser.add_argument("--exact-n", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import calibration as kumar
    import relplot
    import torch
    from mapie.metrics import calibration as mapie
    from model_diagnostics.scoring import SquaredError, decompose
    from probmetrics.metrics import Metrics

    proba, labels = make_probabilities(args.n, args.k, args.seed)
    confidence = proba.max(axis=1).astype(np.float64)
    correct = (proba.argmax(axis=1) == labels).astype(np.float64)
    print(
        f"P: {args.n} x {args.k} float32, {args.resamples} bootstrap replicates; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"numpy {np.__version__}"
    )

    print("\n-- bootstrap interval of the ECE (ratio: / one ECE call)")
    ece_time, ece = best_time(lambda: expected_calibration_error(labels, proba), args.repeat)
    ci_time, ci = best_time(
        lambda: calibration_error_ci(
            expected_calibration_error, labels, proba, n_resamples=args.resamples, random_state=0
        ),
        args.repeat,
    )
    bca_time, bca = best_time(
        lambda: calibration_error_ci(
            expected_calibration_error,
            labels,
            proba,
            n_resamples=args.resamples,
            ci_method="bca",
            random_state=0,
        ),
        args.repeat,
    )
    kumar_time, _ = best_time(
        lambda: kumar.utils.bootstrap_uncertainty(
            list(zip(confidence, correct.astype(int), strict=True)),
            lambda data: kumar.get_calibration_error(*map(np.array, zip(*data, strict=True))),
            num_samples=args.kumar_resamples,
        ),
        1,
    )
    # it also computes the estimate twice (plug-in and estimator) before resampling
    per_replicate = kumar_time / (args.kumar_resamples + 2)
    show(
        [
            ("expected_calibration_error (one call)", ece_time, None, f"{ece:.6f}"),
            (
                f"calibration_error_ci, percentile x{args.resamples}",
                ci_time,
                ece_time,
                f"[{ci.low:.6f}, {ci.high:.6f}]",
            ),
            (
                f"calibration_error_ci, BCa x{args.resamples}",
                bca_time,
                ece_time,
                f"[{bca.low:.6f}, {bca.high:.6f}]",
            ),
            (
                f"Kumar bootstrap, per replicate (x{args.kumar_resamples})",
                per_replicate,
                ci_time / args.resamples,
                "ratio: / ours per replicate",
            ),
        ]
    )
    ours_debiased, value = best_time(lambda: debiased_calibration_error(labels, proba), args.repeat)
    theirs_debiased, expected = best_time(
        lambda: kumar.get_top_calibration_error(proba, labels, p=2, debias=True), 1
    )
    show(
        [
            ("debiased_calibration_error", ours_debiased, None, f"{value:.8f}"),
            (
                "Kumar get_top_calibration_error (debiased)",
                theirs_debiased,
                ours_debiased,
                f"{expected:.8f}",
            ),
        ]
    )

    print("\n-- smECE, automatic bandwidth (ratio: / relplot.smECE)")
    relplot_time, (relplot_value, width) = best_time(
        lambda: relplot.smECE(confidence, correct, return_width=True), args.repeat
    )
    ours_time, (value, bandwidth) = best_time(
        lambda: smooth_ece(labels, proba, return_bandwidth=True), args.repeat
    )
    smooth_ci_time, smooth_ci = best_time(
        lambda: calibration_error_ci(
            smooth_ece, labels, proba, n_resamples=args.resamples, random_state=0
        ),
        1,
    )
    show(
        [
            ("relplot.smECE", relplot_time, None, f"{relplot_value:.10f} (h = {width})"),
            ("smooth_ece", ours_time, relplot_time, f"{value:.10f} (h = {bandwidth})"),
            (
                f"calibration_error_ci(smooth_ece) x{args.resamples}",
                smooth_ci_time,
                relplot_time,
                f"[{smooth_ci.low:.6f}, {smooth_ci.high:.6f}]",
            ),
        ]
    )

    print("\n-- SECE, h = 0.01 (ratio: / the exact sums on the same rows)")
    binned_time, binned = best_time(
        lambda: smooth_calibration_error(labels, proba, method="binned"), args.repeat
    )
    small = slice(0, args.exact_n)
    exact_small_time, exact_small = best_time(
        lambda: smooth_calibration_error(labels[small], proba[small], method="exact"), 1
    )
    binned_small_time, binned_small = best_time(
        lambda: smooth_calibration_error(labels[small], proba[small], method="binned"),
        args.repeat,
    )
    show(
        [
            (f"SECE exact, {args.exact_n} rows", exact_small_time, None, f"{exact_small:.10f}"),
            (
                f"SECE binned, {args.exact_n} rows",
                binned_small_time,
                exact_small_time,
                f"{binned_small:.10f} (diff {abs(binned_small - exact_small):.1e})",
            ),
            (f"SECE binned, {args.n} rows", binned_time, None, f"{binned:.10f}"),
        ]
    )
    print("\n-- tests and decompositions (ratio: / the reference package on the same input)")
    mapie_time, (mapie_statistic, mapie_pvalue) = best_time(
        lambda: (
            mapie.kuiper_statistic(correct, confidence),
            mapie.kuiper_p_value(correct, confidence),
        ),
        args.repeat,
    )
    test_time, test = best_time(
        lambda: calibration_test(correct, confidence, method="kuiper", convention="positive_class"),
        args.repeat,
    )
    corp_reference_time, corp_reference = best_time(
        lambda: decompose(correct, confidence, scoring_function=SquaredError()).to_dicts()[0],
        args.repeat,
    )
    # our Brier score sums both columns of a binary problem: twice the positive one
    corp_time, corp = best_time(
        lambda: calibration_decomposition(correct, confidence, score="brier"), args.repeat
    )
    split_names = ["refinement_logloss_ts-mix_all", "calib-err_logloss_ts-mix_all"]
    split_reference_time, split_reference = best_time(
        lambda: Metrics.from_names(split_names).compute_all_from_labels_probs(
            torch.as_tensor(labels), torch.as_tensor(proba, dtype=torch.float64)
        ),
        1,
    )
    split_time, split = best_time(
        lambda: calibration_decomposition(labels, proba, score="log_loss", method="temperature"),
        args.repeat,
    )
    show(
        [
            (
                "MAPIE kuiper_statistic + kuiper_p_value",
                mapie_time,
                None,
                f"{mapie_statistic:.6f}, p = {mapie_pvalue:.3g}",
            ),
            (
                "calibration_test(method='kuiper')",
                test_time,
                mapie_time,
                f"{test.statistic:.6f}, p = {test.pvalue:.3g}",
            ),
            (
                "model-diagnostics decompose (Brier)",
                corp_reference_time,
                None,
                f"MCB {2 * corp_reference['miscalibration']:.8f}",
            ),
            (
                "calibration_decomposition (Brier, CORP)",
                corp_time,
                corp_reference_time,
                f"MCB {corp.miscalibration:.8f}",
            ),
            (
                "probmetrics temperature split (log loss)",
                split_reference_time,
                None,
                f"refinement {float(split_reference[split_names[0]]):.8f}",
            ),
            (
                "calibration_decomposition (temperature)",
                split_time,
                split_reference_time,
                f"refinement {split.refinement:.8f}",
            ),
        ]
    )
    print("\n-- calibration report (ratio: / one ECE call, the best of the run's ECE timings)")
    again_time, _ = best_time(lambda: expected_calibration_error(labels, proba), args.repeat)
    report_time, _ = best_time(
        lambda: calibration_report(labels, proba, n_resamples=args.resamples, random_state=0),
        args.repeat,
    )
    best_ece_time = min(ece_time, again_time)
    numpy_ratio = ""
    rows = [
        ("expected_calibration_error (timed again)", again_time, None, ""),
        (f"calibration_report, x{args.resamples}", report_time, best_ece_time, ""),
    ]
    if importlib.util.find_spec("numba") and os.environ.get(NUMBA_SWITCH) != "0":
        with numpy_path():
            numpy_ece_time, _ = best_time(
                lambda: expected_calibration_error(labels, proba), args.repeat
            )
            numpy_report_time, _ = best_time(
                lambda: calibration_report(
                    labels, proba, n_resamples=args.resamples, random_state=0
                ),
                args.repeat,
            )
        rows += [
            ("expected_calibration_error (numpy path)", numpy_ece_time, None, ""),
            (
                f"calibration_report, x{args.resamples} (numpy path)",
                numpy_report_time,
                numpy_ece_time,
                "",
            ),
        ]
        numpy_ratio = f" ({numpy_report_time / numpy_ece_time:.1f}x on the numpy path)"
    show(rows)

    print(
        f"\ntargets: CI <= 20x one ECE: {ci_time / ece_time:.1f}x; report <= 30x one ECE: "
        f"{report_time / best_ece_time:.1f}x{numpy_ratio}; smECE no slower than relplot: "
        f"{ours_time / relplot_time:.2f}x; smECE equal to relplot: "
        f"|diff| = {abs(value - relplot_value):.1e}; SECE at {args.n} rows: {binned_time:.2f} s"
    )


if __name__ == "__main__":
    main()
