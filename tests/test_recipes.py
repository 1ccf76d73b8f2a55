"""The training recipes' names: the papers' ("wang2021", "mukhoti2020"), and the former
"seed001"/"seed002", which still work and warn."""

import pickle
import warnings

import numpy as np
import pytest

from sklearn_calib.estimators import RECIPES, NetClassifier
from sklearn_calib.estimators._recipes import RECIPE_ALIASES, resolve_recipe


@pytest.mark.parametrize("alias, name", sorted(RECIPE_ALIASES.items()))
def test_former_recipe_names_warn_and_resolve_to_the_same_recipe(alias, name):
    with pytest.warns(FutureWarning, match=f"'{alias}' is deprecated; use '{name}'"):
        recipe = resolve_recipe(alias)
    assert recipe is RECIPES[name] and recipe.name == name
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_recipe(name) is RECIPES[name]


def test_unknown_recipe_names_the_current_ones():
    with pytest.raises(ValueError, match=r"\['mukhoti2020', 'onecycle', 'wang2021'\], got 'x'"):
        resolve_recipe("x")


def test_a_net_with_a_former_recipe_name_trains_as_with_the_new_one(digits):
    X, y = digits[0][:200], digits[2][:200]
    params = {"module__hidden_units": (16,), "max_epochs": 4, "lr": None, "random_state": 0}
    new = NetClassifier(recipe="wang2021", **params).fit(X, y)
    with pytest.warns(FutureWarning, match="'seed001' is deprecated"):
        old = NetClassifier(recipe="seed001", **params).fit(X, y)
    np.testing.assert_allclose(old.history[:, "lr"], [0.1, 0.1, 0.01, 0.001])
    np.testing.assert_array_equal(old.history[:, "lr"], new.history[:, "lr"])
    np.testing.assert_allclose(old.predict_proba(X), new.predict_proba(X), rtol=1e-6)
    # a pickled net of the former name still loads (rebuilding its optimiser warns) and
    # predicts alike
    with pytest.warns(FutureWarning, match="'seed001' is deprecated"):
        loaded = pickle.loads(pickle.dumps(old))
    assert loaded.recipe == "seed001"
    np.testing.assert_array_equal(loaded.predict_proba(X), old.predict_proba(X))
