"""MulticalibrationBoosting and its histogram trees."""

import itertools
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, softmax
from sklearn.base import clone
from sklearn.compose import make_column_transformer
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import check_estimator

from sklearn_calib.calibrators import (
    CalibratedClassifier,
    CalibratorSelector,
    MulticalibrationBoosting,
    TemperatureScaling,
    fit_calibrator,
)
from sklearn_calib.calibrators._group_guard import choose_guarded, guarded_rows
from sklearn_calib.calibrators._histogram_tree import fit_tree
from sklearn_calib.datasets import make_miscalibrated_groups
from sklearn_calib.metrics import (
    calibration_audit,
    expected_calibration_error,
    negative_log_likelihood,
)
from sklearn_calib.persistence import dump, load, untrusted_types
from sklearn_calib.scoring import make_worst_group_scorer

# ------------------------------------------------------------------------------ the trees


def brute_force_split(codes, categorical, gradient, hessian, l2, min_leaf):
    """The best depth-1 split by trying every feature and every subset (or threshold)."""
    best = (0.0, None)

    def score(rows):
        return gradient[rows].sum() ** 2 / (hessian[rows].sum() + l2)

    everything = np.ones(len(gradient), dtype=bool)
    for j in range(codes.shape[1]):
        values = np.unique(codes[:, j])
        if categorical[j]:
            candidates = [
                set(subset)
                for size in range(1, len(values))
                for subset in itertools.combinations(values.tolist(), size)
            ]
        else:
            candidates = [set(values[values <= t].tolist()) for t in values[:-1]]
        for left_set in candidates:
            left = np.isin(codes[:, j], list(left_set))
            if left.sum() < min_leaf or (~left).sum() < min_leaf:
                continue
            gain = score(left) + score(~left) - score(everything)
            if gain > best[0] + 1e-12:
                best = (gain, left)
    return best


def test_a_depth_one_tree_takes_the_best_split_and_newton_leaves():
    rng = np.random.default_rng(0)
    n = 300
    codes = np.column_stack([rng.integers(0, 5, n), rng.integers(0, 8, n)])
    # category-dependent gradients, non-monotone in the category code
    effect = np.array([0.3, -0.5, 0.1, 0.6, -0.2])[codes[:, 0]]
    gradient = effect + 0.3 * rng.normal(size=n)
    hessian = rng.uniform(0.1, 0.25, n)
    tree = fit_tree(
        codes,
        [5, 8],
        [True, False],
        gradient,
        hessian,
        np.ones(n),
        None,
        max_depth=1,
        l2=1.0,
        min_samples_leaf=10,
    )
    gain, left = brute_force_split(codes, [True, False], gradient, hessian, 1.0, 10)
    leaf = tree.apply(codes)
    np.testing.assert_array_equal(leaf == 0, left)
    for side, rows in ((0, left), (1, ~left)):
        expected = -gradient[rows].sum() / (hessian[rows].sum() + 1.0)
        assert tree.value[side] == pytest.approx(expected)
    np.testing.assert_allclose(tree.predict(codes, np.zeros(n)), tree.value[leaf])


def test_linear_leaves_take_the_centred_newton_slope():
    rng = np.random.default_rng(1)
    n = 200
    x = rng.normal(size=n)
    gradient = 0.4 * x + 0.1 * rng.normal(size=n)
    hessian = rng.uniform(0.1, 0.25, n)
    codes = np.zeros((n, 1), dtype=np.intp)
    tree = fit_tree(
        codes,
        [1],
        [True],
        gradient,
        hessian,
        np.ones(n),
        x,
        max_depth=1,
        l2=0.5,
        min_samples_leaf=1,
    )
    center = np.sum(hessian * x) / hessian.sum()
    slope = -np.sum(gradient * (x - center)) / (np.sum(hessian * (x - center) ** 2) + 0.5)
    value = -gradient.sum() / (hessian.sum() + 0.5)
    leaf = tree.apply(codes)
    assert np.all(leaf == 0)  # nothing to split on
    assert (tree.center[0], tree.slope[0]) == pytest.approx((center, slope))
    np.testing.assert_allclose(tree.predict(codes, x), value + slope * (x - center))


def test_a_category_without_rows_follows_the_larger_child():
    n = 100
    codes = np.repeat([[0], [1]], [70, 30], axis=0)
    gradient = np.where(codes[:, 0] == 0, 0.5, -0.5)
    tree = fit_tree(
        codes,
        [3],
        [True],
        gradient,
        np.full(n, 0.2),
        np.ones(n),
        None,
        max_depth=1,
        l2=1.0,
        min_samples_leaf=5,
    )
    # category 2 (unseen in fit) goes with category 0, the side of more hessian
    assert tree.apply(np.array([[2]]))[0] == tree.apply(np.array([[0]]))[0]
    assert tree.apply(np.array([[1]]))[0] != tree.apply(np.array([[0]]))[0]


# ---------------------------------------------------------------- planted group miscalibration


@pytest.fixture(scope="module")
def planted():
    scores, groups, y, truth = make_miscalibrated_groups(20000, random_state=0)
    fit, test = slice(0, 10000), slice(10000, None)
    mcb = MulticalibrationBoosting(input="probabilities", random_state=0)
    mcb.fit(scores[fit], y[fit], groups=groups[fit])
    ts = TemperatureScaling(input="probabilities").fit(scores[fit], y[fit])
    return {
        "y": y[test],
        "groups": groups[test],
        "truth": truth[test],
        "multicalibrated": mcb.predict_proba(scores[test], groups=groups[test])[:, 1],
        "temperature": ts.predict_proba(scores[test])[:, 1],
    }


@pytest.mark.slow
def test_planted_bias_is_removed_by_multicalibration_and_not_by_temperature(planted):
    audits = {
        name: calibration_audit(
            planted["y"],
            planted[name],
            planted["groups"],
            convention="positive_class",
            n_resamples=300,
            random_state=0,
        )
        for name in ("multicalibrated", "temperature")
    }
    fixed, scaled = audits["multicalibrated"], audits["temperature"]
    # the worst group's ECE is within the noise of calibrated scores after multicalibration
    assert fixed.worst_ece <= fixed.worst_ece_null_high
    # every group is close to its true probabilities (a group's test on 2,000 rows may
    # still reject at the 5 % level by chance)
    for group in range(4):
        rows = planted["groups"] == group
        assert np.abs(planted["multicalibrated"] - planted["truth"])[rows].mean() < 0.03
    assert fixed.n_miscalibrated <= 1
    # one temperature cannot remove opposite shifts: three groups stay miscalibrated
    assert scaled.worst_ece > scaled.worst_ece_null_high
    assert scaled.n_miscalibrated >= 3
    errors = {
        name: np.abs(planted[name] - planted["truth"]).mean()
        for name in ("multicalibrated", "temperature")
    }
    assert errors["multicalibrated"] < 0.5 * errors["temperature"]


def test_held_out_log_loss_improves_on_temperature_scaling(planted):
    y = planted["y"]
    assert negative_log_likelihood(y, planted["multicalibrated"]) < negative_log_likelihood(
        y, planted["temperature"]
    )


# ----------------------------------------------------------------- multiclass reductions


def group_temperatures(n=12000, seed=0):
    """Logits whose truth is the softmax at a different temperature in each group."""
    rng = np.random.default_rng(seed)
    logits = 2 * rng.normal(size=(n, 4))
    groups = rng.integers(0, 3, n)
    truth = softmax(logits * np.array([0.5, 1.0, 2.0])[groups, None], axis=1)
    y = (truth.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1)
    return logits, groups, y


@pytest.mark.parametrize("multi_class", ["classwise", "top_label"])
@pytest.mark.slow
def test_multiclass_reductions_calibrate_every_group(multi_class):
    logits, groups, y = group_temperatures()
    fit, test = slice(0, 6000), slice(6000, None)
    mcb = MulticalibrationBoosting(multi_class=multi_class, random_state=0)
    proba = mcb.fit(logits[fit], y[fit], groups=groups[fit]).predict_proba(
        logits[test], groups=groups[test]
    )
    scaled = TemperatureScaling().fit(logits[fit], y[fit]).predict_proba(logits[test])
    for name, candidate in (("mcb", proba), ("ts", scaled)):
        assert np.allclose(candidate.sum(axis=1), 1.0), name

    def worst(p):
        return max(
            expected_calibration_error(y[test][groups[test] == g], p[groups[test] == g])
            for g in range(3)
        )

    assert worst(proba) < 0.5 * worst(scaled)
    assert negative_log_likelihood(y[test], proba) < negative_log_likelihood(y[test], scaled)


@pytest.mark.slow
def test_top_label_mode_keeps_the_other_classes_proportions():
    logits, groups, y = group_temperatures(3000)
    mcb = MulticalibrationBoosting(multi_class="top_label", random_state=0)
    proba = mcb.fit(logits, y, groups=groups).predict_proba(logits, groups=groups)
    before = softmax(logits, axis=1)
    top = before.argmax(axis=1)
    rest = np.ones_like(before, dtype=bool)
    rest[np.arange(len(top)), top] = False
    ratio = proba[rest].reshape(-1, 3) / before[rest].reshape(-1, 3)
    np.testing.assert_allclose(ratio, ratio[:, :1] * np.ones((1, 3)), rtol=1e-9)
    assert mcb.n_iter_ > 0


# -------------------------------------------------------------------- fitting and groups


def weighted_problem(n=600, seed=0):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=n)
    features = pd.DataFrame({"g": rng.choice(["a", "b", "c"], n), "x": rng.normal(size=n)})
    shift = features["g"].map({"a": -0.5, "b": 0.0, "c": 0.8}).to_numpy()
    y = (rng.random(n) < expit(scores + shift + 0.3 * features["x"].to_numpy())).astype(int)
    return scores, features, y


@pytest.mark.parametrize("linear_leaves", [True, False])
def test_weights_count_as_repeated_rows(linear_leaves):
    scores, features, y = weighted_problem()
    weight = np.random.default_rng(1).integers(0, 4, len(y))
    repeated = np.repeat(np.arange(len(y)), weight)
    # the guard's held-out folds split a row's copies, which its weight cannot
    options = {
        "early_stopping": False,
        "guard_groups": False,
        "max_iter": 20,
        "linear_leaves": linear_leaves,
    }
    weighted = MulticalibrationBoosting(**options).fit(
        scores, y, sample_weight=weight, groups=features
    )
    copies = MulticalibrationBoosting(**options).fit(
        scores[repeated], y[repeated], groups=features.iloc[repeated]
    )
    np.testing.assert_allclose(
        weighted.predict_proba(scores, groups=features),
        copies.predict_proba(scores, groups=features),
        atol=1e-12,
    )


@pytest.mark.slow
def test_mixed_group_features_and_unseen_categories():
    scores, features, y = weighted_problem(2000)
    mcb = MulticalibrationBoosting(random_state=0).fit(scores, y, groups=features)
    assert mcb.n_group_features_ == 2 and mcb.n_iter_ > 0
    unseen = features.assign(g="d")
    proba = mcb.predict_proba(scores, groups=unseen)
    assert np.isfinite(proba).all() and np.allclose(proba.sum(axis=1), 1.0)
    # integer labels are categories by default; as floats they are ordered
    as_codes = features.assign(g=features["g"].map({"a": 0, "b": 1, "c": 2}))
    by_codes = MulticalibrationBoosting(random_state=0).fit(scores, y, groups=as_codes)
    np.testing.assert_allclose(
        by_codes.predict_proba(scores, groups=as_codes), mcb.predict_proba(scores, groups=features)
    )
    explicit = MulticalibrationBoosting(random_state=0, categorical_features=[0])
    np.testing.assert_allclose(
        explicit.fit(scores, y, groups=as_codes.astype(float)).predict_proba(
            scores, groups=as_codes.astype(float)
        ),
        mcb.predict_proba(scores, groups=features),
    )


@pytest.mark.slow
def test_early_stopping_keeps_the_iteration_of_least_held_out_loss():
    scores, features, y = weighted_problem(3000)
    for validation in (0.25, 4):
        mcb = MulticalibrationBoosting(validation_fraction=validation, random_state=0, max_iter=60)
        mcb.fit(scores, y, groups=features)
        assert mcb.n_iter_ == int(np.argmin(mcb.validation_loss_))
        assert len(mcb.trees_) == mcb.n_iter_
    fixed = MulticalibrationBoosting(early_stopping=False, max_iter=7).fit(scores, y)
    assert fixed.n_iter_ == 7 and not hasattr(fixed, "validation_loss_")


def test_calibrated_scores_without_signal_get_few_trees():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=5000)
    y = (rng.random(5000) < expit(scores)).astype(int)
    noise = rng.integers(0, 5, 5000)
    mcb = MulticalibrationBoosting(random_state=0).fit(scores, y, groups=noise)
    proba = mcb.predict_proba(scores, groups=noise)[:, 1]
    assert np.abs(proba - expit(scores)).max() < 0.05
    assert mcb.validation_loss_[mcb.n_iter_] <= mcb.validation_loss_[0]


@pytest.mark.parametrize(
    ("fit_groups", "predict_groups", "message"),
    [
        (None, np.zeros(50), "fitted without groups"),
        (np.zeros(50), None, "fitted with 1 group feature"),
        (np.zeros(50), np.zeros((50, 2)), "Expected 1 group feature"),
        (np.zeros(50), np.zeros(49), r"one row per score \(50\), got 49"),
    ],
)
def test_groups_must_match_between_fit_and_predict(fit_groups, predict_groups, message):
    rng = np.random.default_rng(0)
    scores, y = rng.normal(size=50), rng.integers(0, 2, 50)
    mcb = MulticalibrationBoosting(early_stopping=False, max_iter=2)
    mcb.fit(scores, y, groups=fit_groups)
    with pytest.raises(ValueError, match=message):
        mcb.predict_proba(scores, groups=predict_groups)


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        (np.array([0.0, np.nan] * 25), "without missing values, got nan in 25 of 50 rows"),
        (np.array([0.0, np.inf] * 25), "column 0 holds infinite values"),
        (np.arange(50), None),
        (np.arange(2000) % 1100, "1100 categories, more than 1024"),
        (np.array(["a", None] * 25, dtype=object), "without missing values, got None in 25"),
        (np.array(["a", 1] * 25, dtype=object), "cannot be compared"),
    ],
)
def test_bad_group_features_are_named(groups, message):
    rng = np.random.default_rng(0)
    n = len(groups)
    scores, y = rng.normal(size=n), rng.integers(0, 2, n)
    mcb = MulticalibrationBoosting(early_stopping=False, max_iter=1)
    if message is None:
        mcb.fit(scores, y, groups=groups)  # one category per row is allowed
        return
    with pytest.raises(ValueError, match=message):
        mcb.fit(scores, y, groups=groups)


def test_missing_and_unorderable_group_values_in_predict():
    scores, features, y = weighted_problem(500)
    mcb = MulticalibrationBoosting(early_stopping=False, max_iter=3).fit(scores, y, groups=features)
    with_none = features.assign(g=features["g"].astype(object))
    with_none.loc[[2, 5], "g"] = None
    with pytest.raises(ValueError, match="got None in 2 of 500 rows of `groups` column 0"):
        mcb.predict_proba(scores, groups=with_none)
    with_nan = features.copy()
    with_nan.loc[4, "x"] = np.nan
    with pytest.raises(ValueError, match="got nan in 1 of 500 rows of `groups` column 1"):
        mcb.predict_proba(scores, groups=with_nan)
    # a number among string categories is an unseen category, as an unseen string is
    with_number = features.assign(g=features["g"].astype(object))
    with_number.loc[[2, 5], "g"] = 7
    unseen = features.assign(g=features["g"].astype(object))
    unseen.loc[[2, 5], "g"] = "d"
    np.testing.assert_array_equal(
        mcb.predict_proba(scores, groups=with_number), mcb.predict_proba(scores, groups=unseen)
    )


def test_a_failed_fit_leaves_the_fitted_calibrator_unchanged():
    scores, features, y = weighted_problem()
    mcb = MulticalibrationBoosting(random_state=0).fit(scores, y, groups=features)
    before = mcb.predict_proba(scores, groups=features)
    with pytest.raises(ValueError):
        mcb.fit(scores, y, groups=features.iloc[:10])
    np.testing.assert_array_equal(mcb.predict_proba(scores, groups=features), before)


def test_a_fit_with_groups_warns_once_at_its_caller():
    # probabilities declared as logits: the warning names the line that called fit
    rng = np.random.default_rng(3)
    proba = softmax(3 * rng.normal(size=(400, 3)), axis=1)
    y, groups = proba.argmax(axis=1), rng.integers(0, 2, 400)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        MulticalibrationBoosting(max_iter=3, random_state=0).fit(proba, y, groups=groups)
    declared = [w for w in caught if "declared as logits" in str(w.message)]
    assert len(declared) == 1
    assert declared[0].filename == __file__


@pytest.mark.parametrize("guard_groups", [False, True])
@pytest.mark.slow
def test_pickle_and_skops_round_trips_and_metadata_requests(tmp_path, guard_groups):
    scores, features, y = weighted_problem()
    mcb = MulticalibrationBoosting(guard_groups=guard_groups, random_state=0)
    mcb.fit(scores, y, groups=features)
    loaded = pickle.loads(pickle.dumps(mcb))
    np.testing.assert_array_equal(
        loaded.predict_proba(scores, groups=features), mcb.predict_proba(scores, groups=features)
    )
    # skops needs no type beyond the trusted ones: the fitted state is plain arrays
    pytest.importorskip("skops")
    path = tmp_path / "mcb.skops"
    dump(mcb, path)
    assert untrusted_types(path) == []
    np.testing.assert_array_equal(
        load(path).predict_proba(scores, groups=features),
        mcb.predict_proba(scores, groups=features),
    )
    routing = mcb.get_metadata_routing()
    assert "groups" in routing.fit.requests and "groups" in routing.predict_proba.requests


# --------------------------------------------- inside CalibratedClassifier and the selector


def grouped_frame(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"x": rng.normal(size=n), "g": rng.choice(["a", "b", "c"], n)})
    shift = X["g"].map({"a": -1.0, "b": 0.0, "c": 1.0}).to_numpy()
    y = (rng.random(n) < expit(2 * X["x"].to_numpy() + shift)).astype(int)
    model = make_pipeline(make_column_transformer(("passthrough", ["x"])), LogisticRegression())
    return X, y, model


@pytest.mark.parametrize("selector", [["g"], "g", lambda X: X[["g"]]])
@pytest.mark.slow
def test_calibrated_classifier_passes_columns_of_X_as_groups(selector):
    X, y, model = grouped_frame()
    model.fit(X, y)
    clf = CalibratedClassifier(
        FrozenEstimator(model),
        calibrator=MulticalibrationBoosting(random_state=0),
        group_features=selector,
    ).fit(X, y)
    by_hand = MulticalibrationBoosting(input="logits", random_state=0).fit(
        model.decision_function(X), y, groups=X[["g"]]
    )
    np.testing.assert_allclose(
        clf.predict_proba(X), by_hand.predict_proba(model.decision_function(X), groups=X[["g"]])
    )


@pytest.mark.slow
def test_calibrated_classifier_with_group_features_cross_validates():
    X, y, model = grouped_frame()
    # opposite shifts cancel in the top-label bins of a binary problem: bin the positive class
    scorer = make_worst_group_scorer(group_features=["g"], convention="positive_class")
    scores = {}
    for name, calibrator, features in (
        ("mcb", MulticalibrationBoosting(random_state=0), ["g"]),
        ("ts", TemperatureScaling(), None),
    ):
        clf = CalibratedClassifier(
            model, calibrator=calibrator, cv=0.5, random_state=0, group_features=features
        )
        scores[name] = cross_val_score(clf, X, y, cv=3, scoring=scorer).mean()
    assert scores["mcb"] > scores["ts"]  # negated worst-group ECE: greater is better
    with pytest.raises(ValueError, match="needs a calibrator that takes group features"):
        CalibratedClassifier(model, calibrator=TemperatureScaling(), group_features=["g"]).fit(X, y)
    with pytest.raises(ValueError, match="Could not select `group_features`"):
        CalibratedClassifier(
            model, calibrator=MulticalibrationBoosting(), group_features=["missing"]
        ).fit(X, y)


@pytest.mark.slow
def test_selector_gives_groups_to_the_candidates_that_take_them():
    scores, groups, y, _ = make_miscalibrated_groups(4000, random_state=1)
    candidates = [
        TemperatureScaling(),
        MulticalibrationBoosting(random_state=0),
    ]
    cv = StratifiedKFold(3)
    selector = CalibratorSelector(candidates, cv=cv, input="probabilities")
    selector.fit(scores, y, groups=groups)
    for index, candidate in enumerate(candidates):
        folds = []
        for train, test in cv.split(scores, y):
            fitted = clone(candidate).set_params(input="probabilities")
            if index == 1:
                fitted.fit(scores[train], y[train], groups=groups[train])
                proba = fitted.predict_proba(scores[test], groups=groups[test])
            else:
                proba = fitted.fit(scores[train], y[train]).predict_proba(scores[test])
            folds.append(-negative_log_likelihood(y[test], proba))
        assert selector.cv_results_["mean_test_score"][index] == pytest.approx(np.mean(folds))
    assert isinstance(selector.best_calibrator_, MulticalibrationBoosting)
    two_columns = np.column_stack([1 - scores, scores])  # what the selector's candidates see
    np.testing.assert_array_equal(
        selector.predict_proba(scores, groups=groups),
        selector.best_calibrator_.predict_proba(two_columns, groups=groups),
    )


@pytest.mark.slow
def test_fit_calibrator_passes_groups_to_a_calibrator_that_takes_them():
    scores, groups, y, _ = make_miscalibrated_groups(2000, random_state=2)
    fitted = fit_calibrator(
        MulticalibrationBoosting(random_state=0),
        scores,
        y,
        input="probabilities",
        classes=np.array([0, 1]),
        groups=groups,
    )
    by_hand = MulticalibrationBoosting(input="probabilities", random_state=0).fit(
        scores, y, groups=groups
    )
    np.testing.assert_array_equal(
        fitted.predict_proba(scores, groups=groups), by_hand.predict_proba(scores, groups=groups)
    )
    assert fitted.n_group_features_ == 1
    with pytest.raises(ValueError, match="`groups` needs a calibrator that takes group features"):
        fit_calibrator(TemperatureScaling(), scores, y, input="probabilities", groups=groups)


# --------------------------------------------------------------------------- the group guard


def shifted_majority(seed, n_big=3000, n_small=300):
    """A large group whose truth is shifted by +1 in log-odds, and a small calibrated one
    that no leaf of 500 rows can isolate: without group offsets, the shared corrections
    make it worse."""
    rng = np.random.default_rng(seed)
    groups = np.repeat([0, 1], [n_big, n_small])
    log_odds = rng.normal(size=groups.size)
    truth = expit(log_odds + np.where(groups == 0, 1.0, 0.0))
    return log_odds, groups, (rng.random(groups.size) < truth).astype(int)


@pytest.mark.slow
def test_the_guard_keeps_the_scores_of_a_group_the_corrections_make_worse():
    scores, groups, y = shifted_majority(0)
    test_scores, test_groups, test_y = shifted_majority(1)
    small, large = test_groups == 1, test_groups == 0
    given = expit(test_scores)
    proba = {}
    for guard in (False, True):
        mcb = MulticalibrationBoosting(
            min_samples_leaf=500, group_offsets=False, guard_groups=guard, random_state=0
        )
        mcb.fit(scores, y, groups=groups)
        proba[guard] = mcb.predict_proba(test_scores, groups=test_groups)[:, 1]
    assert mcb.guarded_groups_ == [(0, 1)]

    def loss(name, rows):
        return negative_log_likelihood(
            test_y[rows], proba[name][rows] if name != "given" else given[rows]
        )

    # unguarded, the small group's log loss rises from 0.58 to 0.72
    assert loss(False, small) > loss("given", small) + 0.1
    np.testing.assert_array_equal(proba[True][small], given[small])
    # the large group keeps its correction (0.63 to 0.54)
    np.testing.assert_array_equal(proba[True][large], proba[False][large])
    assert loss(True, large) < loss("given", large) - 0.05


def test_the_guard_corrects_every_group_the_corrections_help():
    scores, groups, y, _ = make_miscalibrated_groups(20000, random_state=0)
    fit, test = slice(0, 10000), slice(10000, None)
    proba = {}
    for guard in (False, True):
        mcb = MulticalibrationBoosting(input="probabilities", guard_groups=guard, random_state=0)
        mcb.fit(scores[fit], y[fit], groups=groups[fit])
        proba[guard] = mcb.predict_proba(scores[test], groups=groups[test])
    assert mcb.guarded_groups_ == []
    np.testing.assert_array_equal(proba[True], proba[False])


def test_the_guard_keeps_the_scores_of_unseen_categories_and_works_without_early_stopping():
    scores, features, y = weighted_problem(2000)
    mcb = MulticalibrationBoosting(
        guard_groups=True, early_stopping=False, max_iter=10, random_state=0
    ).fit(scores, y, groups=features)
    assert mcb.n_iter_ == 10 and not hasattr(mcb, "validation_loss_")
    proba = mcb.predict_proba(scores, groups=features.assign(g="d"))[:, 1]
    np.testing.assert_allclose(proba, expit(scores))
    # numeric group features are guarded by quarters, named by their ranges
    for feature, value in mcb.guarded_groups_:
        assert feature == "all" or (feature == 0 and value in "abc") or len(value) == 2


def test_guarded_cells_are_chosen_on_the_rows_the_other_cells_leave():
    # gains of the corrections per row: +0.3, -0.2, -0.5, +0.6; the cell of rows 0 and 1
    # is helped (+0.1) until the cell of rows 0 and 2 (-0.2) keeps its scores
    cells = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 1, 1]])
    corrected = np.array([0.7, 1.2, 1.5, 0.4])
    guarded = choose_guarded(cells, [1, 2, 2], corrected, np.ones(4), np.ones(4))
    assert [g.tolist() for g in guarded] == [[False], [True, False], [True, False]]
    assert guarded_rows(cells, guarded).tolist() == [True, True, True, False]


@pytest.mark.slow
def test_check_estimator_passes_with_the_guard():
    check_estimator(
        MulticalibrationBoosting(guard_groups=True, max_iter=5, random_state=0),
        expected_failed_checks={
            "check_sample_weight_equivalence_on_dense_data": "held-out rows drawn at random",
            "check_estimators_fit_returns_self": "more classes than score columns",
            "check_estimators_overwrite_params": "more classes than score columns",
            "check_readonly_memmap_input": "more classes than score columns",
            "check_estimators_dtypes": "ambiguous labels",
        },
    )


# --------------------------------------------------------------------- the group offsets


def small_shifted_groups(n=2000, seed=0):
    """Scores whose log-odds are off by a different amount in each of four groups, one
    of them small: a calibration set of the size where shrunken tree steps stop early."""
    rng = np.random.default_rng(seed)
    log_odds = rng.normal(-0.5, 1.0, n)
    groups = rng.choice(4, n, p=[0.15, 0.35, 0.38, 0.12])
    shift = np.array([0.3, -0.15, 0.1, -0.6])[groups]
    y = (rng.random(n) < expit(log_odds + shift)).astype(int)
    return log_odds, groups, y


def test_group_offsets_solve_the_penalised_likelihood_of_each_category():
    log_odds, groups, y = small_shifted_groups()
    mcb = MulticalibrationBoosting(early_stopping=False, max_iter=1, random_state=0)
    mcb.fit(log_odds, y, groups=groups)
    offsets, slopes = mcb.offsets_[0][:, 0], mcb.offset_slopes_[0][:, 0]
    centres = mcb.offset_centres_[0][:, 0]
    a, b = mcb.scaling_
    given = a * log_odds + b
    np.testing.assert_allclose(
        centres[:4], [given[groups == g].mean() for g in range(4)], rtol=1e-12
    )
    spread = given - centres[groups]
    proba = expit(given + offsets[groups] + slopes[groups] * spread)
    # stationarity: each category's gradients balance their penalties
    gradient = np.bincount(groups, proba - y, minlength=5)
    np.testing.assert_allclose(gradient + mcb.l2_regularization * offsets, 0.0, atol=1e-5)
    slope_gradient = np.bincount(groups, (proba - y) * spread, minlength=5)
    np.testing.assert_allclose(
        slope_gradient + 100 * mcb.l2_regularization * slopes, 0.0, atol=1e-5
    )
    # the extra bin of unseen categories has no rows, no offset and no slope
    assert offsets[4] == 0.0 and slopes[4] == 0.0
    assert np.sign(offsets[:4]).tolist() == [1.0, -1.0, 1.0, -1.0]


@pytest.mark.slow
def test_group_slopes_temper_an_overconfident_category():
    scores, groups, y, _ = make_miscalibrated_groups(6000, random_state=0)
    mcb = MulticalibrationBoosting(input="probabilities", random_state=0)
    mcb.fit(scores, y, groups=groups[:, None])
    # the global map's slope times each category's own: the planted 1, 1, 1 and 0.5
    slopes = mcb.scaling_[0] * (1.0 + mcb.offset_slopes_[0][:4, 0])
    np.testing.assert_allclose(slopes, [1.0, 1.0, 1.0, 0.5], atol=0.15)


@pytest.mark.slow
def test_group_offsets_are_zero_for_numeric_features():
    scores, features, y = weighted_problem()
    mcb = MulticalibrationBoosting(random_state=0)
    mcb.fit(scores, y, groups=features)
    assert np.any(mcb.offsets_[0] != 0.0) and np.any(mcb.offset_slopes_[0] != 0.0)
    assert np.all(mcb.offsets_[1] == 0.0) and np.all(mcb.offset_slopes_[1] == 0.0)
    unfitted = MulticalibrationBoosting(group_offsets=False, random_state=0)
    unfitted.fit(scores, y, groups=features)
    assert unfitted.offsets_ is None and unfitted.offset_slopes_ is None


@pytest.mark.slow
def test_group_offsets_lower_the_held_out_log_loss_of_a_small_calibration_set():
    gains = []
    for seed in range(4):
        log_odds, groups, y = small_shifted_groups(4000, seed)
        fit, test = slice(0, 2000), slice(2000, None)
        losses = []
        for group_offsets in (True, False):
            mcb = MulticalibrationBoosting(group_offsets=group_offsets, random_state=seed)
            mcb.fit(log_odds[fit], y[fit], groups=groups[fit])
            proba = mcb.predict_proba(log_odds[test], groups=groups[test])
            losses.append(negative_log_likelihood(y[test], proba))
        gains.append(losses[1] - losses[0])
    assert np.mean(gains) > 0


def test_a_model_saved_before_the_group_offsets_loads_and_predicts_alike():
    log_odds, groups, y = small_shifted_groups(800)
    mcb = MulticalibrationBoosting(group_offsets=False, random_state=0)
    mcb.fit(log_odds, y, groups=groups)
    state = dict(mcb.__getstate__())
    del state["group_offsets"], state["offsets_"]
    del state["offset_slopes_"], state["offset_centres_"]
    earlier = MulticalibrationBoosting.__new__(MulticalibrationBoosting)
    earlier.__setstate__(state)
    assert earlier.get_params()["group_offsets"] is False
    np.testing.assert_array_equal(
        earlier.predict_proba(log_odds, groups=groups), mcb.predict_proba(log_odds, groups=groups)
    )


def test_a_model_saved_before_the_group_slopes_loads_with_slopes_of_zero():
    log_odds, groups, y = small_shifted_groups(800)
    mcb = MulticalibrationBoosting(random_state=0).fit(log_odds, y, groups=groups)
    state = dict(mcb.__getstate__())
    del state["offset_slopes_"], state["offset_centres_"]
    earlier = MulticalibrationBoosting.__new__(MulticalibrationBoosting)
    earlier.__setstate__(state)
    assert all(np.all(slopes == 0.0) for slopes in earlier.offset_slopes_)
    mcb.offset_slopes_ = [np.zeros_like(slopes) for slopes in mcb.offset_slopes_]
    np.testing.assert_array_equal(
        earlier.predict_proba(log_odds, groups=groups), mcb.predict_proba(log_odds, groups=groups)
    )
