import numpy as np
import pytest

from sklearn_calib._validation import (
    check_classification_inputs,
    check_n_bins,
    check_probabilities,
    check_sample_weight,
    encode_labels,
)

P = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])


def test_probabilities_pass_through_without_copy():
    proba = P.astype(np.float32)
    assert check_probabilities(proba) is proba


def test_binary_positive_class_column_becomes_two_columns():
    np.testing.assert_allclose(check_probabilities([0.2, 1.0]), [[0.8, 0.2], [0.0, 1.0]])


def test_binary_column_tolerates_rounding_above_one_like_a_row_sum():
    # a 2-D row [0, 1 + 1e-9] is accepted, so its positive-class column is too
    got = check_probabilities(np.array([0.2, 1.0 + 1e-9]))
    np.testing.assert_array_equal(got, [[0.8, 0.2], [0.0, 1.0]])
    with pytest.raises(ValueError, match=r"in \[0, 1\] \(up to 1 \+ 0.001\)"):
        check_probabilities(np.array([0.2, 1.01]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_entries_rounded_above_one_count_as_one_in_two_columns_too(dtype):
    proba = np.array([[1.0004, 0.0], [0.3, 0.7]], dtype=dtype)
    got = check_probabilities(proba)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.array([[1.0, 0.0], [0.3, 0.7]], dtype=dtype))
    assert proba[0, 0] == dtype(1.0004)  # the input is left as it was


@pytest.mark.parametrize(
    "y_prob, message",
    [
        (np.array([[0.5, -0.1, 0.6]]), "negative"),
        (np.array([[np.nan, 0.5, 0.5]]), "NaN or infinite"),
        (np.array([[np.inf, 0.5, 0.5]]), "NaN or infinite"),
        (np.array([[0.5, 0.6, 0.1]]), "sum to 1"),
        (np.zeros((0, 3)), "empty"),
        (np.zeros((2, 2, 2)), "1-D"),
        (np.array([[1.0]]), "at least 2 columns"),
        (np.array([1.2, 0.1]), r"\[0, 1\]"),
        (np.array([np.nan, 0.1]), "NaN"),
        (np.array([["a", "b"]]), "numbers"),
    ],
)
def test_bad_probabilities_raise(y_prob, message):
    with pytest.raises(ValueError, match=message):
        check_probabilities(y_prob)


@pytest.mark.parametrize("row", [0, 65535, 65536, -1])
def test_probabilities_read_block_by_block_are_checked_in_every_block(row):
    # two columns: blocks of 65,536 rows; the bad row lies in the first, at the edge
    # between the first two, or in the last (partial) block
    proba = np.full((140_000, 2), 0.5)
    assert check_probabilities(proba) is proba
    proba[row] = [1.2, -0.2]
    with pytest.raises(ValueError, match=r"negative values \(minimum -0.2"):
        check_probabilities(proba)
    proba[row] = [0.5, 0.6]
    with pytest.raises(ValueError, match=f"row {row % len(proba)} sums to 1.1"):
        check_probabilities(proba)


def test_labels_of_any_type_and_explicit_labels():
    y_index, _, _ = check_classification_inputs(["b", "a", "c"], P)
    np.testing.assert_array_equal(y_index, [1, 0, 2])
    y_index, _, _ = check_classification_inputs(["x", "y", "z"], P, labels=["z", "y", "x"])
    np.testing.assert_array_equal(y_index, [2, 1, 0])


def test_integer_labels_are_column_indices_when_a_class_is_missing():
    y_index, _, _ = check_classification_inputs([0, 0, 2], P)
    np.testing.assert_array_equal(y_index, [0, 0, 2])
    y_index, _, _ = check_classification_inputs(np.array([0.0, 0.0, 2.0]), P)
    np.testing.assert_array_equal(y_index, [0, 0, 2])
    # 1-based labels with all classes present map to the columns in sorted order
    y_index, _, _ = check_classification_inputs([1, 3, 2], P)
    np.testing.assert_array_equal(y_index, [0, 2, 1])
    # Booleans are unambiguous even when only True is present
    y_index, _, _ = check_classification_inputs(np.array([True, True]), np.array([0.2, 0.9]))
    np.testing.assert_array_equal(y_index, [1, 1])


@pytest.mark.parametrize("y", [[1, 2, 2], [1, 1, 1], np.array([2.0, 1.0, 1.0])])
def test_integer_labels_without_zero_and_a_missing_class_are_ambiguous(y):
    # [1, 2] for three columns may be 1-based labels lacking class 3
    with pytest.raises(ValueError, match=r"pass `labels=`.*only when they include 0"):
        check_classification_inputs(y, P)
    y_index, _, _ = check_classification_inputs(y, P, labels=[1, 2, 3])
    np.testing.assert_array_equal(y_index, np.asarray(y, dtype=int) - 1)


def test_bad_labels_raise():
    with pytest.raises(ValueError, match="not in `labels`"):
        check_classification_inputs([0, 1, 5], P, labels=[0, 1, 2])
    with pytest.raises(ValueError, match="pass `labels=`"):
        check_classification_inputs(["a", "a", "b"], P)
    with pytest.raises(ValueError, match="same length"):
        check_classification_inputs([0, 1], P)
    with pytest.raises(ValueError, match="names 2 classes"):
        check_classification_inputs([0, 1, 1], P, labels=[0, 1])
    with pytest.raises(ValueError, match="distinct"):
        check_classification_inputs([0, 1, 1], P, labels=[0, 1, 1])


@pytest.mark.parametrize("n_bins", [0, -3, 2.5, "10", True, None])
def test_bad_n_bins_raise(n_bins):
    with pytest.raises(ValueError, match="`n_bins` to be an integer >= 1"):
        check_n_bins(n_bins)


@pytest.mark.parametrize(
    "weight, message",
    [([1.0, -1.0], "negative"), ([1.0], "shape"), ([np.nan, 1.0], "NaN"), ([0.0, 0.0], "sum")],
)
def test_bad_sample_weight_raise(weight, message):
    with pytest.raises(ValueError, match=message):
        check_sample_weight(weight, 2)


@pytest.mark.parametrize(
    "classes",
    [np.array([0, 1, 2]), np.array([30, -5, 7]), np.array([2, 0, 1], dtype=np.uint8)],
)
def test_integer_label_lookup_matches_the_general_mapping(classes):
    rng = np.random.default_rng(0)
    y = classes[rng.integers(0, 3, 50)]
    y_index, _, _ = check_classification_inputs(y, np.tile(P, (17, 1))[:50], labels=classes)
    np.testing.assert_array_equal(classes[y_index], y)
    # the same labels as strings take the general (sorting) path
    y_index_str, _, _ = check_classification_inputs(
        y.astype(str), np.tile(P, (17, 1))[:50], labels=classes.astype(str)
    )
    np.testing.assert_array_equal(y_index, y_index_str)


@pytest.mark.parametrize("y", [[30, 8, 7], [30, -6, 7], [31, 30, 7]])
def test_unknown_integer_label_raises_through_the_lookup(y):
    with pytest.raises(ValueError, match="not in `labels`"):
        check_classification_inputs(y, P, labels=[30, -5, 7])


def test_row_sums_in_float32_still_catch_a_small_deviation():
    proba = np.array([[0.5, 0.4985, 0.0]], dtype=np.float32)
    with pytest.raises(ValueError, match=r"row 0 sums to 0\.998"):
        check_probabilities(proba)
    check_probabilities(np.array([[0.5, 0.4995, 0.0]], dtype=np.float32))


HUGE = 2**63  # beyond int64: uint64 labels from here on cannot be cast to int64


@pytest.mark.parametrize(
    "classes",
    [
        np.array([HUGE + 2, HUGE, HUGE + 1], dtype=np.uint64),
        np.array([2**64 - 1, 0, HUGE], dtype=np.uint64),
        np.array([2**64 - 1, 5, 2**64 - 3], dtype=np.uint64),
    ],
    ids=["close", "spread", "near_the_top"],
)
def test_uint64_labels_beyond_int64_encode_exactly(classes):
    rng = np.random.default_rng(0)
    y = classes[rng.integers(0, 3, 50)]
    proba = np.tile(P, (17, 1))[:50]
    y_index, _, _ = check_classification_inputs(y, proba, labels=classes)
    np.testing.assert_array_equal(classes[y_index], y)
    # inferred classes are the sorted distinct labels
    y_index, _, _ = check_classification_inputs(y, proba)
    np.testing.assert_array_equal(np.sort(classes)[y_index], y)
    with pytest.raises(ValueError, match=rf"not in `labels`: \[{2**64 - 2}\]"):
        check_classification_inputs(np.r_[y[:-1], np.uint64(2**64 - 2)], proba, labels=classes)


def test_labels_of_mixed_integer_dtypes_compare_exactly():
    # as float64, 2**63 - 1, 2**63 and 2**63 + 1 are one number
    classes = np.array([HUGE, HUGE + 1, 7], dtype=np.uint64)
    y_index = encode_labels(np.array([HUGE + 1, HUGE, 7], dtype=np.uint64), classes)
    np.testing.assert_array_equal(y_index, [1, 0, 2])
    with pytest.raises(ValueError, match=r"not in `labels`: \[-1\]"):
        encode_labels(np.array([7, -1]), classes)
    np.testing.assert_array_equal(encode_labels(np.array([7, 7]), classes), [2, 2])
    with pytest.raises(ValueError, match=rf"not in `labels`: \[{2**63 - 1}\]"):
        encode_labels(np.array([2**63 - 1]), classes)
    # labels above the smallest class: the lookup table is offset by the difference
    np.testing.assert_array_equal(encode_labels(np.array([0, 7]), np.array([-5, 0, 7])), [1, 2])
    signed = np.array([-(2**63), 2**63 - 1, 0])
    y = np.array([0, 2**63 - 1], np.uint64)
    np.testing.assert_array_equal(encode_labels(y, signed), [2, 1])


@pytest.mark.parametrize(
    "y, message",
    [
        (np.array([0, None, 1], dtype=object), r"`y_true` contains None \(at index 1\)"),
        (np.array(["a", 1, "b"], dtype=object), r"`y_true` mixes labels of types int, str"),
        (np.array([1.5, "b", None], dtype=object), r"`y_true` contains None \(at index 2\)"),
        (np.array([1, 2.0, float("nan")], dtype=object), r"`y_true` contains NaN or infinite"),
        (np.array([1, np.float32(2), np.float64("inf")], dtype=object), r"NaN or infinite"),
        (np.array([1, 2, (3,)], dtype=object), r"`y_true` mixes labels of types int, tuple"),
        (
            np.array([1j, 2j, 1j], dtype=object),
            r"`y_true` holds complex labels; expected labels that are all strings",
        ),
    ],
)
def test_object_labels_that_cannot_be_ordered_raise_naming_the_argument(y, message):
    with pytest.raises(ValueError, match=message):
        check_classification_inputs(y, P)
    with pytest.raises(ValueError, match=message.replace("y_true", "labels")):
        check_classification_inputs([0, 1, 2], P, labels=y)


def test_object_labels_of_one_kind_are_accepted():
    y_index, _, _ = check_classification_inputs(np.array([True, 2, 0.5], dtype=object), P)
    np.testing.assert_array_equal(y_index, [1, 2, 0])
    y_index, _, _ = check_classification_inputs(np.array(["b", "a", "c"], dtype=object), P)
    np.testing.assert_array_equal(y_index, [1, 0, 2])
