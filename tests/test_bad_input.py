"""Bad input, everywhere: every public estimator, calibrator, metric and scorer.

Each call with NaN, inf, a wrong shape, a wrong dtype (strings, object arrays), empty
input, a single class, labels unseen at fit, a different number of classes at predict
time or negative sample weights raises a ValueError or TypeError whose message names the
problem, and a fitted estimator predicts afterwards exactly as before. The label-shift
estimators' ``adapt`` rejects the same bad target input (and target labels), and leaves
them unadapted: their probabilities are the calibrated ones again.

The estimators are those of the registry shared by the walks over every estimator
(``tests/estimator_registry.py``), so a public estimator added later joins the walk; the
calibrators are fitted once for the module and each test changes a copy.
"""

import copy
import sys
from functools import partial

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression

from sklearn_calib import scoring
from sklearn_calib.calibrators import CalibratedClassifier, HistogramBinning, TemperatureScaling

from estimator_registry import CALIBRATORS, LABEL_SHIFT_ADAPTERS, LABEL_SHIFT_CLASSIFIERS, tiny
from estimator_registry import META_CLASSIFIERS as META_NAMES
from estimator_registry import NET_CLASSIFIERS as NET_NAMES

#: Network classifiers trained from ``(X, y)``: (id, factory of an unfitted instance).
NET_CLASSIFIERS = [(name, partial(tiny, name)) for name in NET_NAMES]

#: Meta-estimators around a classifier: (id, factory of an unfitted instance); beside each
#: one's tiny instance, the cross-validated forms.
META_CLASSIFIERS = [(name, partial(tiny, name)) for name in META_NAMES] + [
    (
        "CalibratedClassifier(LogisticRegression, cv, ensemble=False)",
        partial(tiny, "CalibratedClassifier", cv=3, ensemble=False),
    ),
    (
        "CalibratedClassifier(NetClassifier, cv)",
        lambda: tiny(
            "CalibratedClassifier",
            estimator=tiny("NetClassifier", max_epochs=1),
            calibrator=HistogramBinning(n_bins=5),
            cv=2,
        ),
    ),
]

METRICS = [
    scoring.expected_calibration_error,
    scoring.maximum_calibration_error,
    scoring.adaptive_calibration_error,
    scoring.classwise_calibration_error,
    scoring.smooth_calibration_error,
    scoring.differentiable_calibration_error,
    scoring.brier_score,
    scoring.negative_log_likelihood,
    scoring.top_label_accuracy,
    scoring.reliability_diagram,
]

SCORER_NAMES = [
    "neg_ece",
    "neg_mce",
    "neg_adaptive_ece",
    "neg_classwise_ece",
    "neg_sece",
    "neg_brier",
    "neg_nll",
]

#: What the metrics say when given logits: the scores look like logits, and how to get
#: probabilities from them.
LOGITS_TO_PROBABILITIES = (
    r"look like logits.*scipy\.special\.softmax\(logits, axis=1\).*input='logits'"
)
NAN = r"NaN"
INF = r"[Ii]nf"
EMPTY = r"0 sample|empty|at least one sample"
STRINGS = r"string|numbers|dtype|convert"
NEGATIVE = r"negative"


def _data():
    X, y = make_classification(120, n_features=6, n_informative=4, n_classes=3, random_state=0)
    return X.astype(np.float32), y


X, Y = _data()
RNG = np.random.default_rng(0)
LOGITS = RNG.normal(size=(90, 3)) * 2
LOGIT_LABELS = np.arange(90) % 3
PROBA = np.exp(LOGITS) / np.exp(LOGITS).sum(1, keepdims=True)


def with_value(array, value, where=(1, 1)):
    array = np.array(array, dtype=np.float64)
    array[where] = value
    return array


def strings(array):
    return np.asarray(array).astype(str).astype(object) + "x"


def objects(array):
    mixed = np.asarray(array).astype(object)
    mixed[0, 0] = "a"
    mixed[1, 1] = None
    return mixed


def with_label(labels, value, index=3):
    """Return ``labels`` as an object array holding ``value`` at ``index``."""
    labels = np.asarray(labels).astype(object)
    labels[index] = value
    return labels


NONE_LABEL = r"`{}` contains None \(at index 3\); expected labels that are all strings or all"
MIXED_LABELS = r"`{}` mixes labels of types int, str; expected labels that are all strings"


def assert_raises_naming(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        result = call()
        pytest.fail(f"returned {result!r} instead of raising")


# ----------------------------------------------------------------- metrics


METRIC_CASES = {
    "nan_proba": (dict(y_true=LOGIT_LABELS, y_prob=with_value(PROBA, np.nan)), NAN),
    "inf_proba": (dict(y_true=LOGIT_LABELS, y_prob=with_value(PROBA, np.inf)), r"infinite"),
    "nan_labels": (dict(y_true=with_value(LOGIT_LABELS, np.nan, 3), y_prob=PROBA), NAN),
    "none_label": (
        dict(y_true=with_label(LOGIT_LABELS, None), y_prob=PROBA),
        NONE_LABEL.format("y_true"),
    ),
    "mixed_labels": (
        dict(y_true=with_label(LOGIT_LABELS, "a"), y_prob=PROBA),
        MIXED_LABELS.format("y_true"),
    ),
    "none_in_labels": (
        dict(y_true=LOGIT_LABELS, y_prob=PROBA, labels=with_label([0, 1, 2, 3], None)[1:]),
        r"`labels` contains None \(at index 2\)",
    ),
    "three_d_proba": (dict(y_true=LOGIT_LABELS, y_prob=PROBA[:, :, None]), r"shape"),
    "two_d_labels": (dict(y_true=np.c_[LOGIT_LABELS, LOGIT_LABELS], y_prob=PROBA), r"1-D"),
    "length_mismatch": (dict(y_true=LOGIT_LABELS[:-1], y_prob=PROBA), r"same length"),
    "string_proba": (dict(y_true=LOGIT_LABELS, y_prob=strings(PROBA)), STRINGS),
    "object_proba": (dict(y_true=LOGIT_LABELS, y_prob=objects(PROBA)), STRINGS),
    "empty": (dict(y_true=LOGIT_LABELS[:0], y_prob=PROBA[:0]), EMPTY),
    "single_column": (dict(y_true=np.zeros(90, int), y_prob=np.ones((90, 1))), r"2 columns"),
    "rows_not_summing_to_one": (dict(y_true=LOGIT_LABELS, y_prob=PROBA * 2), r"sum to 1"),
    "negative_proba": (
        dict(y_true=LOGIT_LABELS, y_prob=np.tile([1.5, -0.5, 0.0], (90, 1))),
        r"negative",
    ),
    "logits": (dict(y_true=LOGIT_LABELS, y_prob=LOGITS), LOGITS_TO_PROBABILITIES),
    "positive_logits": (
        dict(y_true=LOGIT_LABELS, y_prob=LOGITS - LOGITS.min()),
        r"sum to 1.*values up to .* look like logits.*softmax\(logits, axis=1\)",
    ),
    "binary_logits": (
        dict(y_true=LOGIT_LABELS % 2, y_prob=LOGITS[:, 0]),
        r"look like logits.*scipy\.special\.expit\(logits\).*input='logits'",
    ),
    "unseen_label": (
        dict(y_true=np.where(LOGIT_LABELS == 2, 7, LOGIT_LABELS), y_prob=PROBA, labels=[0, 1, 2]),
        r"not in `labels`.*7",
    ),
    "duplicate_labels": (
        dict(y_true=LOGIT_LABELS, y_prob=PROBA, labels=[0, 1, 1]),
        r"distinct",
    ),
    "labels_of_other_number_of_classes": (
        dict(y_true=LOGIT_LABELS, y_prob=PROBA, labels=[0, 1]),
        r"names 2 classes but `y_prob` has 3 columns",
    ),
    "more_labels_than_columns": (
        dict(y_true=np.arange(90) % 4, y_prob=PROBA),
        r"4 distinct labels \(0, 1, 2, 3\) but `y_prob` has 3 columns",
    ),
    "negative_weights": (
        dict(y_true=LOGIT_LABELS, y_prob=PROBA, sample_weight=-np.ones(90)),
        NEGATIVE,
    ),
    "nan_weights": (
        dict(y_true=LOGIT_LABELS, y_prob=PROBA, sample_weight=with_value(np.ones(90), np.nan, 0)),
        NAN,
    ),
    "zero_weights": (
        dict(y_true=LOGIT_LABELS, y_prob=PROBA, sample_weight=np.zeros(90)),
        r"positive sum",
    ),
    "weights_of_wrong_length": (
        dict(y_true=LOGIT_LABELS, y_prob=PROBA, sample_weight=np.ones(89)),
        r"shape \(90,\)",
    ),
}


@pytest.mark.parametrize("case", METRIC_CASES, ids=str)
@pytest.mark.parametrize("metric", METRICS, ids=lambda f: f.__name__)
def test_metrics_reject_bad_input(metric, case):
    kwargs, match = METRIC_CASES[case]
    assert_raises_naming(lambda: metric(**kwargs), match)


@pytest.mark.parametrize(
    "case", ["nan_proba", "empty", "unseen_label", "negative_weights", "single_column", "logits"]
)
def test_reliability_display_rejects_bad_input(case):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sklearn_calib import ReliabilityDisplay

    kwargs, match = METRIC_CASES[case]
    n_figures = len(plt.get_fignums())
    assert_raises_naming(lambda: ReliabilityDisplay.from_predictions(**kwargs), match)
    assert len(plt.get_fignums()) == n_figures  # nothing drawn before the check
    plt.close("all")


# ----------------------------------------------------------------- scorers


@pytest.fixture(scope="module")
def logistic():
    return LogisticRegression().fit(X, Y)


def scorer_cases():
    return {
        "nan_X": ((with_value(X, np.nan), Y), NAN),
        "inf_X": ((with_value(X, np.inf), Y), r"infinity|[Ii]nf"),
        "wrong_number_of_features": ((X[:, :4], Y), r"features"),
        "string_X": ((strings(X), Y), STRINGS),
        "empty": ((X[:0], Y[:0]), EMPTY),
        "unseen_label": ((X, np.where(Y == 2, 5, Y)), r"not in `labels`.*5"),
        "length_mismatch": ((X, Y[:-1]), r"same length|inconsistent"),
    }


@pytest.mark.parametrize("case", scorer_cases(), ids=str)
@pytest.mark.parametrize("name", SCORER_NAMES)
def test_scorers_reject_bad_input(logistic, name, case):
    (X_bad, y_bad), match = scorer_cases()[case]
    scorer = scoring.get_scorer(name)
    assert_raises_naming(lambda: scorer(logistic, X_bad, y_bad), match)


@pytest.mark.parametrize("name", SCORER_NAMES)
def test_scorers_reject_negative_sample_weights(logistic, name):
    scorer = scoring.get_scorer(name)
    assert_raises_naming(lambda: scorer(logistic, X, Y, sample_weight=-np.ones(len(Y))), NEGATIVE)


# ----------------------------------------------------------------- calibrators


def calibrator_fit_cases(input):
    scores = LOGITS if input == "logits" else PROBA
    cases = {
        "nan": ((with_value(scores, np.nan), LOGIT_LABELS), NAN),
        "inf": ((with_value(scores, np.inf), LOGIT_LABELS), INF),
        "three_d": ((scores[:, :, None], LOGIT_LABELS), r"dim|shape"),
        "one_column": ((scores[:, :1], LOGIT_LABELS % 2), r"at least 2"),
        "strings": ((strings(scores), LOGIT_LABELS), STRINGS),
        "objects": ((objects(scores), LOGIT_LABELS), STRINGS),
        "empty": ((scores[:0], LOGIT_LABELS[:0]), EMPTY),
        "single_class": ((scores, np.zeros(90, int)), r"at least 2 classes, got 1"),
        "two_labels_three_columns": (
            (scores, np.where(LOGIT_LABELS == 0, 5, 7)),
            r"distinct labels \(.*\) but `scores` has 3 columns",
        ),
        "four_labels_three_columns": (
            (scores, np.arange(90) % 4),
            r"distinct labels \(.*\) but `scores` has 3 columns",
        ),
        "nan_labels": ((scores, with_value(LOGIT_LABELS, np.nan, 3)), NAN),
        "none_label": ((scores, with_label(LOGIT_LABELS, None)), NONE_LABEL.format("y")),
        "mixed_labels": ((scores, with_label(LOGIT_LABELS, "a")), MIXED_LABELS.format("y")),
        "continuous_labels": ((scores, np.linspace(0, 1, 90)), r"continuous"),
        "length_mismatch": ((scores, LOGIT_LABELS[:-1]), r"inconsistent"),
    }
    if input == "probabilities":
        cases["rows_not_summing_to_one"] = ((scores * 2, LOGIT_LABELS), r"sum to 1")
        cases["negative"] = ((scores - 0.5, LOGIT_LABELS), r"negative")
        cases["logits"] = ((LOGITS, LOGIT_LABELS), r"`scores`.*look like logits.*input='logits'")
        cases["binary_logits"] = (
            (LOGITS[:, 0], LOGIT_LABELS % 2),
            r"`scores`.*look like logits.*input='logits'",
        )
    return cases


def calibrator_predict_cases(input):
    scores = LOGITS if input == "logits" else PROBA
    return {
        "nan": (with_value(scores, np.nan), NAN),
        "inf": (with_value(scores, np.inf), INF),
        "other_number_of_classes": (np.c_[scores, scores[:, :1]], r"4 features.*expecting 3"),
        "fewer_classes": (scores[:, :2], r"2 features.*expecting 3"),
        "one_dimensional": (scores[:, 0], r"2D array|1-D"),
        "strings": (strings(scores), STRINGS),
        "objects": (objects(scores), STRINGS),
        "empty": (scores[:0], EMPTY),
    }


@pytest.fixture(scope="module")
def fitted_calibrator():
    """Return a function of a calibrator's name and input: a copy of the calibrator fitted
    on that input, and its probabilities there.

    Each calibrator is fitted once for the module; every call copies it, so that a test
    may change its copy.
    """
    fitted = {}

    def get(name, input):
        if (name, input) not in fitted:
            scores = LOGITS if input == "logits" else PROBA
            calibrator = tiny(name, input=input).fit(scores, LOGIT_LABELS)
            fitted[name, input] = calibrator, calibrator.predict_proba(scores)
        calibrator, proba = fitted[name, input]
        return copy.deepcopy(calibrator), proba.copy()

    return get


def assert_unchanged(calibrator, scores, expected):
    np.testing.assert_array_equal(calibrator.predict_proba(scores), expected)


WEIGHT_CASES = {
    "negative_weights": (-np.ones(90), NEGATIVE),
    "nan_weights": (with_value(np.ones(90), np.nan, 0), NAN),
    "weights_of_wrong_length": (np.ones(89), r"shape \(90,\)"),
    "zero_weights": (np.zeros(90), r"positive sum"),
}


def assert_rejects(estimator, scores, kind, case):
    """Fit an estimator of scores on bad data (``kind="fit"``) or weights, or predict with
    it on bad scores, and check that it raises naming the problem."""
    bad, match = case
    if kind == "fit":
        assert_raises_naming(lambda: estimator.fit(*bad), match)
    elif kind == "weights":
        assert_raises_naming(lambda: estimator.fit(scores, LOGIT_LABELS, sample_weight=bad), match)
    else:
        for method in (estimator.predict_proba, estimator.predict, estimator.transform):
            assert_raises_naming(lambda: method(bad), match)  # noqa: B023


def assert_same_attributes(estimator, attributes):
    """The estimator holds the same attributes, the same objects, as before."""
    assert vars(estimator).keys() == attributes.keys()
    assert all(vars(estimator)[key] is value for key, value in attributes.items())


def calibrator_cases(input):
    cases = {f"fit_{name}": ("fit", case) for name, case in calibrator_fit_cases(input).items()}
    cases.update({f"fit_{name}": ("weights", case) for name, case in WEIGHT_CASES.items()})
    cases.update(
        {
            f"predict_{name}": ("predict", case)
            for name, case in calibrator_predict_cases(input).items()
        }
    )
    return cases


@pytest.mark.parametrize(
    "input, case",
    [(input, case) for input in ("logits", "probabilities") for case in calibrator_cases(input)],
)
@pytest.mark.parametrize("name", CALIBRATORS)
def test_calibrators_reject_bad_input_and_stay_fitted(fitted_calibrator, name, input, case):
    scores = LOGITS if input == "logits" else PROBA
    calibrator, expected = fitted_calibrator(name, input)
    attributes = dict(vars(calibrator))
    assert_rejects(calibrator, scores, *calibrator_cases(input)[case])
    assert_same_attributes(calibrator, attributes)
    assert_unchanged(calibrator, scores, expected)


@pytest.mark.parametrize("name", CALIBRATORS + LABEL_SHIFT_ADAPTERS)
def test_binary_calibrators_reject_two_columns_after_one_dimensional_fit(name):
    calibrator = tiny(name).fit(LOGITS[:, 0], LOGIT_LABELS % 2)
    expected = calibrator.predict_proba(LOGITS[:, 1])
    assert_raises_naming(lambda: calibrator.predict_proba(LOGITS[:, :2]), r"1-D binary scores")
    assert_raises_naming(lambda: calibrator.predict_proba(LOGITS[:0, 0]), EMPTY)
    np.testing.assert_array_equal(calibrator.predict_proba(LOGITS[:, 1]), expected)


# ----------------------------------------------------------------- classifiers


def classifier_fit_cases():
    return {
        "nan_X": ((with_value(X, np.nan), Y), NAN),
        "inf_X": ((with_value(X, np.inf), Y), r"infinity|[Ii]nf"),
        "one_dimensional_X": ((X[:, 0], Y), r"2D array|1-D|dimension"),
        "string_X": ((strings(X), Y), STRINGS),
        "object_X": ((objects(X), Y), STRINGS),
        "empty": ((X[:0], Y[:0]), EMPTY),
        "single_class": ((X, np.zeros(len(Y), int)), r"2 classes"),
        "nan_y": ((X, with_value(Y, np.nan, 3)), NAN),
        "none_label": ((X, with_label(Y, None)), NONE_LABEL.format("y")),
        "mixed_labels": ((X, with_label(Y, "a")), MIXED_LABELS.format("y")),
        "continuous_y": ((X, np.linspace(0, 1, len(Y))), r"continuous"),
        "length_mismatch": ((X, Y[:-1]), r"inconsistent"),
    }


def classifier_predict_cases():
    return {
        "nan_X": (with_value(X, np.nan), NAN),
        "inf_X": (with_value(X, np.inf), r"infinity|[Ii]nf"),
        "other_number_of_features": (X[:, :4], r"4 features.*expecting 6|features"),
        "string_X": (strings(X), STRINGS),
        "object_X": (objects(X), STRINGS),
        "empty": (X[:0], EMPTY),
    }


CLASSIFIERS = NET_CLASSIFIERS + META_CLASSIFIERS


@pytest.fixture(scope="module", params=CLASSIFIERS, ids=[name for name, _ in CLASSIFIERS])
def fitted_classifier(request):
    return request.param[1]().fit(X, Y)


@pytest.mark.parametrize("case", classifier_fit_cases(), ids=str)
@pytest.mark.slow
def test_classifiers_reject_bad_fit_input_and_stay_fitted(fitted_classifier, case):
    model = copy.deepcopy(fitted_classifier)
    expected = model.predict_proba(X)
    (bad_X, bad_y), match = classifier_fit_cases()[case]
    assert_raises_naming(lambda: model.fit(bad_X, bad_y), match)
    np.testing.assert_array_equal(model.predict_proba(X), expected)


@pytest.mark.parametrize("case", classifier_predict_cases(), ids=str)
def test_classifiers_reject_bad_predict_input(fitted_classifier, case):
    model = fitted_classifier
    bad_X, match = classifier_predict_cases()[case]
    methods = [model.predict, model.predict_proba]
    if hasattr(model, "decision_function"):
        methods.append(model.decision_function)
    for method in methods:
        assert_raises_naming(lambda: method(bad_X), match)  # noqa: B023


@pytest.mark.parametrize(
    "factory", [f for _, f in NET_CLASSIFIERS], ids=[n for n, _ in NET_CLASSIFIERS]
)
def test_net_partial_fit_rejects_unseen_labels_and_other_shapes(factory):
    net = factory().fit(X, Y)
    expected = net.predict_proba(X)
    assert_raises_naming(lambda: net.partial_fit(X, np.where(Y == 2, 9, Y)), r"not seen.*9")
    assert_raises_naming(lambda: net.partial_fit(X[:, :4], Y), r"features")
    assert_raises_naming(lambda: net.partial_fit(with_value(X, np.nan), Y), NAN)
    # float64 values beyond float32's range become inf when cast: rejected, not trained on.
    too_large = with_value(X, 1e39)
    assert_raises_naming(lambda: net.partial_fit(too_large, Y), r"infinity|too large")
    assert_raises_naming(lambda: net.predict_proba(too_large), r"infinity|too large")
    assert_raises_naming(lambda: factory().fit(too_large, Y), r"infinity|too large")
    assert_raises_naming(
        lambda: factory().set_params(classes=[0, 1]).fit(X, Y), r"not in `classes`.*2"
    )
    np.testing.assert_array_equal(net.predict_proba(X), expected)


@pytest.mark.parametrize(
    "factory", [f for _, f in META_CLASSIFIERS], ids=[n for n, _ in META_CLASSIFIERS]
)
def test_meta_classifiers_reject_negative_weights_and_unknown_labels(factory):
    model = factory().fit(X, Y)
    expected = model.predict_proba(X)
    assert_raises_naming(lambda: model.fit(X, Y, sample_weight=-np.ones(len(Y))), NEGATIVE)
    assert_raises_naming(
        lambda: model.fit(X, Y, sample_weight=with_value(np.ones(len(Y)), np.nan, 0)), NAN
    )
    prefit = CalibratedClassifier(FrozenEstimator(model.estimators_[0]))
    assert_raises_naming(lambda: prefit.fit(X, np.where(Y == 2, 4, Y)), r"does not know.*4")
    strings_y = np.array(["a", "b", "c"], dtype=object)[Y]
    assert_raises_naming(lambda: prefit.fit(X, strings_y), r"does not know.*\['a', 'b', 'c'\]")
    np.testing.assert_array_equal(model.predict_proba(X), expected)


# ----------------------------------------------------------------- label-shift adaptation

#: Target rows of shifted priors (class 2 left out), of the walk's scores and features.
TARGET_ROWS = np.flatnonzero(LOGIT_LABELS != 2)
X_TARGET = X[Y != 2]


def adapt_cases(scores):
    """Bad target input to ``adapt`` (beside the bad input ``predict_proba`` rejects)."""
    return {
        "labels": (dict(target_scores=scores, y=LOGIT_LABELS), r"got labels `y`"),
        "neither": ({}, r"got neither"),
        "both": (dict(target_scores=scores, target_prior=[0.5, 0.5, 0.0]), r"got both"),
        "three_d": (dict(target_scores=scores[:, :, None]), r"dim|shape"),
        "prior_of_other_length": (dict(target_prior=[0.5, 0.5]), r"one prior per class \(3\)"),
        "nan_prior": (dict(target_prior=[np.nan, 0.5, 0.5]), r"finite"),
        "prior_not_summing_to_one": (dict(target_prior=[0.5, 0.5, 0.5]), r"sum to 1"),
    }


def adapter_cases(input):
    """The calibrators' cases, and bad target scores (those predict rejects) to adapt."""
    scores = LOGITS if input == "logits" else PROBA
    cases = calibrator_cases(input)
    for name, (bad, match) in calibrator_predict_cases(input).items():
        cases[f"adapt_{name}"] = ("adapt", (dict(target_scores=bad), match))
    cases.update({f"adapt_{name}": ("adapt", case) for name, case in adapt_cases(scores).items()})
    return cases


@pytest.fixture(scope="module")
def adapted_adapter():
    """Return a function of an adapter's name and input: a copy of the adapter fitted and
    adapted on that input, and its adapted and its calibrated probabilities."""
    fitted = {}

    def get(name, input):
        if (name, input) not in fitted:
            scores = LOGITS if input == "logits" else PROBA
            adapter = tiny(name, input=input).fit(scores, LOGIT_LABELS)
            calibrated = adapter.predict_proba(scores)
            adapter.adapt(scores[TARGET_ROWS])
            fitted[name, input] = adapter, adapter.predict_proba(scores), calibrated
        adapter, proba, calibrated = fitted[name, input]
        return copy.deepcopy(adapter), proba.copy(), calibrated.copy()

    return get


@pytest.mark.parametrize(
    "input, case",
    [(input, case) for input in ("logits", "probabilities") for case in adapter_cases(input)],
)
@pytest.mark.parametrize("name", LABEL_SHIFT_ADAPTERS)
def test_label_shift_adapters_reject_bad_input(adapted_adapter, name, input, case):
    scores = LOGITS if input == "logits" else PROBA
    adapter, expected, calibrated = adapted_adapter(name, input)
    assert not np.array_equal(expected, calibrated)  # the adaptation changes them
    attributes = dict(vars(adapter))
    kind, (bad, match) = adapter_cases(input)[case]
    if kind == "adapt":
        assert_raises_naming(lambda: adapter.adapt(**bad), match)
        assert not hasattr(adapter, "target_prior_")  # no priors of the earlier target
        np.testing.assert_array_equal(adapter.predict_proba(scores), calibrated)
        return
    assert_rejects(adapter, scores, kind, (bad, match))
    assert_same_attributes(adapter, attributes)
    np.testing.assert_array_equal(adapter.predict_proba(scores), expected)


def label_shift_classifier_cases():
    cases = {f"fit_{name}": ("fit", case) for name, case in classifier_fit_cases().items()}
    cases["fit_negative_weights"] = ("weights", (-np.ones(len(Y)), NEGATIVE))
    cases["fit_nan_weights"] = ("weights", (with_value(np.ones(len(Y)), np.nan, 0), NAN))
    for name, (bad, match) in classifier_predict_cases().items():
        cases[f"predict_{name}"] = ("predict", (bad, match))
        cases[f"adapt_{name}"] = ("adapt", (dict(X_target=bad), match))
    cases["adapt_labels"] = ("adapt", (dict(X_target=X_TARGET, y=Y[Y != 2]), r"got labels `y`"))
    cases["adapt_neither"] = ("adapt", ({}, r"got neither"))
    cases["adapt_prior_of_other_length"] = (
        "adapt",
        (dict(target_prior=[0.5, 0.5]), r"one prior per class \(3\)"),
    )
    return cases


@pytest.fixture(scope="module", params=LABEL_SHIFT_CLASSIFIERS)
def adapted_classifier(request):
    """A label-shift classifier of 3 folds fitted and adapted, its adapted and its
    calibrated probabilities."""
    model = tiny(request.param, cv=3).fit(X, Y)
    calibrated = model.predict_proba(X)
    return model.adapt(X_TARGET), model.predict_proba(X), calibrated


@pytest.mark.parametrize("case", label_shift_classifier_cases(), ids=str)
@pytest.mark.slow
def test_label_shift_classifiers_reject_bad_input(adapted_classifier, case):
    model, expected, calibrated = copy.deepcopy(adapted_classifier)
    kind, (bad, match) = label_shift_classifier_cases()[case]
    if kind == "fit":
        assert_raises_naming(lambda: model.fit(*bad), match)
    elif kind == "weights":
        assert_raises_naming(lambda: model.fit(X, Y, sample_weight=bad), match)
    elif kind == "predict":
        for method in (model.predict_proba, model.predict):
            assert_raises_naming(lambda: method(bad), match)  # noqa: B023
    else:
        assert_raises_naming(lambda: model.adapt(**bad), match)
        assert not hasattr(model, "target_prior_")
        assert not any(hasattr(adapter, "target_prior_") for adapter in model.adapters_)
        np.testing.assert_array_equal(model.predict_proba(X), calibrated)
        return
    np.testing.assert_array_equal(model.target_prior_, adapted_classifier[0].target_prior_)
    np.testing.assert_array_equal(model.predict_proba(X), expected)


# ----------------------------------------------------------------- extreme labels

#: uint64 labels at and beyond 2**63 cannot be cast to int64.
HUGE_LABELS = np.array([2**63, 2**63 + 1, 2**63 + 7], dtype=np.uint64)


@pytest.mark.parametrize("metric", METRICS, ids=lambda f: f.__name__)
def test_metrics_take_uint64_labels_beyond_int64(metric):
    expected = metric(LOGIT_LABELS, PROBA)
    for labels in (None, HUGE_LABELS):
        got = metric(HUGE_LABELS[LOGIT_LABELS], PROBA, labels=labels)
        if isinstance(expected, float):
            assert got == expected
        else:
            for key in expected:
                np.testing.assert_array_equal(got[key], expected[key])


@pytest.mark.parametrize("name", CALIBRATORS + LABEL_SHIFT_ADAPTERS)
def test_calibrators_take_uint64_labels_beyond_int64(fitted_calibrator, name):
    expected, _ = fitted_calibrator(name, "logits")
    calibrator = tiny(name).fit(LOGITS, HUGE_LABELS[LOGIT_LABELS])
    np.testing.assert_array_equal(calibrator.classes_, HUGE_LABELS)
    np.testing.assert_array_equal(calibrator.predict_proba(LOGITS), expected.predict_proba(LOGITS))
    np.testing.assert_array_equal(calibrator.predict(LOGITS), HUGE_LABELS[expected.predict(LOGITS)])


def test_classifiers_take_uint64_labels_beyond_int64(fitted_classifier):
    expected = fitted_classifier
    model = clone(expected).fit(X, HUGE_LABELS[Y])
    np.testing.assert_array_equal(model.classes_, HUGE_LABELS)
    np.testing.assert_array_equal(model.predict_proba(X), expected.predict_proba(X))
    np.testing.assert_array_equal(model.predict(X), HUGE_LABELS[expected.predict(X)])


def test_label_shift_classifiers_take_uint64_labels_beyond_int64(adapted_classifier):
    expected = adapted_classifier[0]
    model = clone(expected).fit(X, HUGE_LABELS[Y]).adapt(X_TARGET)
    np.testing.assert_array_equal(model.classes_, HUGE_LABELS)
    np.testing.assert_array_equal(model.target_prior_, expected.target_prior_)
    np.testing.assert_array_equal(model.predict_proba(X), expected.predict_proba(X))
    np.testing.assert_array_equal(model.predict(X), HUGE_LABELS[expected.predict(X)])


def test_persistence_without_skops_says_how_to_install_it(monkeypatch, tmp_path):
    from sklearn_calib import persistence

    monkeypatch.setitem(sys.modules, "skops", None)
    monkeypatch.setitem(sys.modules, "skops.io", None)
    with pytest.raises(ImportError, match=r"needs skops.*pip install skops.*\.\[persist\]"):
        persistence.dump(TemperatureScaling(), tmp_path / "model.skops")
    with pytest.raises(ImportError, match=r"needs skops"):
        persistence.load(tmp_path / "model.skops")
