"""VennAbersCalibrator: the isotonic fits with the test example, the reductions, the cross
form, weights, and the `venn-abers` package as the numeric reference."""

import importlib.util

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.naive_bayes import GaussianNB

from sklearn_calib.calibrators import (
    CalibratedClassifier,
    CalibratorSelector,
    TemperatureScaling,
    VennAbersCalibrator,
)

NUMBA_PATHS = [
    "0",
    pytest.param(
        "1",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("numba") is None, reason="numba is not installed"
        ),
    ),
]


@pytest.fixture(scope="module")
def package():
    """The `venn-abers` package's module; importing it changes numpy's error state for the
    whole process (``np.seterr``), which is put back."""
    state = np.geterr()
    try:
        from venn_abers import venn_abers
    finally:
        np.seterr(**state)
    return venn_abers


def _isotonic_pair(scores, labels, weight, test):
    """``(p0, p1)`` of one test score by two isotonic regressions with it added."""
    pair = []
    for label in (0.0, 1.0):
        regression = IsotonicRegression().fit(
            np.r_[scores, test], np.r_[labels, label], sample_weight=np.r_[weight, 1.0]
        )
        pair.append(regression.predict([test])[0])
    return pair


@pytest.mark.parametrize("numba", NUMBA_PATHS)
@pytest.mark.slow
def test_pairs_are_the_isotonic_fits_with_the_test_example(numba, monkeypatch):
    monkeypatch.setenv("SKLEARN_CALIB_NUMBA", numba)
    rng = np.random.default_rng(0)
    for trial in range(24):
        n = int(rng.integers(1, 30))
        scores = np.round(rng.normal(size=n), int(rng.integers(0, 2)))  # many ties
        labels = (rng.random(n) < 0.5).astype(float)
        weight = rng.integers(0, 4, n).astype(float) if trial % 2 else np.ones(n)
        if not weight.any():
            weight[0] = 1.0
        va = VennAbersCalibrator().fit(
            scores, labels.astype(int), sample_weight=weight, classes=[0, 1]
        )
        tests = np.r_[scores[:4], rng.normal(size=4).round(1), scores.min() - 1, scores.max() + 1]
        p0, p1 = va.predict_interval(tests)
        expected = np.array([_isotonic_pair(scores, labels, weight, t) for t in tests])
        np.testing.assert_allclose(p0[:, 1], expected[:, 0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(p1[:, 1], expected[:, 1], rtol=0, atol=1e-12)
        np.testing.assert_array_equal(p0[:, 0], 1.0 - p1[:, 1])


def test_compiled_and_python_passes_agree(monkeypatch):
    pytest.importorskip("numba")
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(3000, 5))
    y = rng.integers(0, 5, 3000)
    intervals = {}
    for numba in ("0", "1"):
        monkeypatch.setenv("SKLEARN_CALIB_NUMBA", numba)
        va = VennAbersCalibrator(multi_class="one_vs_one").fit(scores, y)
        intervals[numba] = va.predict_interval(scores[:500])
    for python, compiled in zip(intervals["0"], intervals["1"], strict=True):
        np.testing.assert_array_equal(python, compiled)


def test_one_sample_or_none_gives_the_widest_pairs():
    """Below every calibration score p0 is 0, above every one p1 is 1."""
    va = VennAbersCalibrator(input="probabilities").fit(np.array([0.3, 0.6]), [0, 1])
    p0, p1 = va.predict_interval(np.array([0.1, 0.3, 0.45, 0.6, 0.9]))
    np.testing.assert_allclose(p0[:, 1], [0.0, 0.0, 0.0, 0.5, 0.5])
    np.testing.assert_allclose(p1[:, 1], [0.5, 0.5, 1.0, 1.0, 1.0])
    proba = va.predict_proba(np.array([0.45]))
    np.testing.assert_allclose(proba, [[0.5, 0.5]])  # 1 / (1 - 0 + 1)


def test_binary_equals_the_venn_abers_package(package):
    rng = np.random.default_rng(2)
    p_cal, p_test = rng.random(2000), rng.random(3000)
    y_cal = (rng.random(2000) < p_cal**1.5).astype(int)
    va = VennAbersCalibrator(input="probabilities").fit(p_cal, y_cal)
    with np.errstate(divide="ignore", invalid="ignore"):
        reference = package.VennAbers().fit(np.c_[1 - p_cal, p_cal], y_cal)
        proba, pairs = reference.predict_proba(np.c_[1 - p_test, p_test])
    np.testing.assert_allclose(va.predict_proba(p_test), proba, rtol=0, atol=1e-10)
    p0, p1 = va.predict_interval(p_test)
    np.testing.assert_allclose(p0[:, 1], pairs[:, 0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(p1[:, 1], pairs[:, 1], rtol=0, atol=1e-10)
    # only the order of the scores matters: logits of the same probabilities agree
    logits = VennAbersCalibrator().fit(np.log(p_cal / (1 - p_cal)), y_cal)
    np.testing.assert_allclose(
        logits.predict_proba(np.log(p_test / (1 - p_test))), proba, rtol=0, atol=1e-10
    )


@pytest.mark.parametrize(
    ("multi_class", "scheme"), [("one_vs_one", "one_vs_one"), ("one_vs_rest", "one_vs_all")]
)
@pytest.mark.slow
def test_multiclass_equals_the_venn_abers_package(package, multi_class, scheme):
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(3000, 5)) * 2
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = (proba.cumsum(axis=1) < rng.random((3000, 1))).sum(axis=1)
    cal, test = slice(1000, None), slice(0, 1000)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected, _ = package.predict_proba_prefitted_va(
            proba[cal], y[cal], proba[test], va_tpe=scheme
        )
    for kind, scores in (("probabilities", proba), ("logits", logits)):
        va = VennAbersCalibrator(input=kind, multi_class=multi_class).fit(scores[cal], y[cal])
        np.testing.assert_allclose(va.predict_proba(scores[test]), expected, rtol=0, atol=1e-10)


def test_cross_form_equals_the_packages_cross_venn_abers(package):
    X, y = make_classification(600, random_state=0)
    folds = StratifiedKFold(5)
    model = CalibratedClassifier(GaussianNB(), calibrator=VennAbersCalibrator(), cv=folds)
    model.fit(X, y)
    reference = package.VennAbersCV(GaussianNB(), inductive=False, n_splits=5, shuffle=False)
    with np.errstate(divide="ignore", invalid="ignore"):
        reference.fit(X, y.reshape(-1, 1))
        expected = reference.predict_proba(X[:200])
    np.testing.assert_allclose(model.predict_proba(X[:200]), expected, rtol=0, atol=1e-10)


def test_cross_form_merges_geometric_means():
    """Each class's pair of each fold, merged as GM(p1) / (GM(1 - p0) + GM(p1))."""
    X, y = make_classification(400, n_classes=3, n_informative=4, random_state=1)
    model = CalibratedClassifier(LogisticRegression(), calibrator=VennAbersCalibrator(), cv=3).fit(
        X, y
    )
    pairs = [
        calibrator.predict_interval(estimator.decision_function(X[:50]))
        for estimator, calibrator in zip(model.estimators_, model.calibrators_, strict=True)
    ]
    p0 = np.stack([pair[0] for pair in pairs])
    p1 = np.stack([pair[1] for pair in pairs])
    upper = np.prod(p1, axis=0) ** (1 / 3)
    merged = upper / (np.prod(1 - p0, axis=0) ** (1 / 3) + upper)
    expected = merged / merged.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(model.predict_proba(X[:50]), expected, rtol=1e-12)


def test_integer_weights_are_copies_and_zero_weights_no_row():
    rng = np.random.default_rng(4)
    scores = rng.normal(size=(200, 3))
    y = rng.integers(0, 3, 200)
    weight = rng.integers(0, 4, 200).astype(float)
    repeated = np.repeat(np.arange(200), weight.astype(int))
    for multi_class in ("one_vs_rest", "one_vs_one"):
        weighted = VennAbersCalibrator(multi_class=multi_class)
        weighted.fit(scores, y, sample_weight=weight)
        copies = VennAbersCalibrator(multi_class=multi_class).fit(scores[repeated], y[repeated])
        for ours, theirs in zip(
            weighted.predict_interval(scores), copies.predict_interval(scores), strict=True
        ):
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-14)


def test_weights_that_are_not_counts_raise():
    with pytest.raises(ValueError, match=r"counts \(whole numbers.*got 0\.5"):
        VennAbersCalibrator().fit(np.array([0.1, 0.2, 0.3]), [0, 1, 1], sample_weight=[1, 0.5, 2])


@pytest.mark.parametrize("multi_class", ["one_vs_rest", "one_vs_one"])
def test_pairs_bracket_the_merge_and_rise_with_the_score(multi_class):
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(1500, 4)) * 2
    y = np.argmax(logits + rng.gumbel(size=logits.shape), axis=1)
    va = VennAbersCalibrator(multi_class=multi_class).fit(logits[:1000], y[:1000])
    p0, p1 = va.predict_interval(logits[1000:])
    assert np.all((0 <= p0) & (p0 <= p1) & (p1 <= 1))
    assert np.median(p1 - p0) < 0.05  # a thousand rows pin most scores down
    if multi_class == "one_vs_rest":  # the merge of each class's pair, before the row sums
        merged = p1 / (1 - p0 + p1)
        proba = va.predict_proba(logits[1000:])
        np.testing.assert_allclose(proba, merged / merged.sum(axis=1, keepdims=True))
    # raising one class's logit alone raises its pair (one-vs-rest log-odds and the
    # pairwise differences with it all grow)
    raised = logits[1000:].copy()
    raised[:, 2] += 1.0
    q0, q1 = va.predict_interval(raised)
    assert np.all(q0[:, 2] >= p0[:, 2]) and np.all(q1[:, 2] >= p1[:, 2])


def test_one_vs_one_with_a_class_missing_from_calibration():
    """A pair without calibration samples says nothing: its pair is (0, 1)."""
    rng = np.random.default_rng(6)
    scores = rng.normal(size=(300, 3))
    y = rng.integers(0, 2, 300)  # class 2 absent
    va = VennAbersCalibrator(multi_class="one_vs_one").fit(scores, y, classes=[0, 1, 2])
    proba = va.predict_proba(scores)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.isfinite(proba).all()
    p0, p1 = va.predict_interval(scores)
    np.testing.assert_array_equal(p0[:, 2], 0.0)  # coupled from the (0, 1) pairs of class 2


def test_works_inside_the_selector():
    X, y = make_classification(600, n_classes=3, n_informative=5, random_state=2)
    logits = LogisticRegression().fit(X[:300], y[:300]).decision_function(X[300:])
    selector = CalibratorSelector(
        [TemperatureScaling(), VennAbersCalibrator()], scoring="neg_log_loss", cv=3
    ).fit(logits, y[300:])
    assert selector.predict_proba(logits).shape == (300, 3)
    assert len(selector.cv_results_["mean_test_score"]) == 2
