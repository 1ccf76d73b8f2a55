"""Fixtures shared by the test modules."""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


@pytest.fixture(scope="module")
def digits():
    """scikit-learn's digits scaled to [0, 1] in float32, split 75/25 (stratified, seed 0).

    Returns ``X_train, X_test, y_train, y_test``.
    """
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
