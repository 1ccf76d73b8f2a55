"""The Examples of every docstring in sklearn_calib run and print what they show."""

import doctest
import importlib
import pkgutil

import pytest

import sklearn_calib


def _modules_with_examples():
    names = [sklearn_calib.__name__]
    for info in pkgutil.walk_packages(sklearn_calib.__path__, prefix="sklearn_calib."):
        if info.name.endswith("__main__"):
            continue
        names.append(info.name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [
        name
        for name in names
        if any(test.examples for test in finder.find(importlib.import_module(name)))
    ]


MODULES = _modules_with_examples()


def test_the_public_classes_have_examples():
    assert {
        "sklearn_calib.calibrators.temperature",
        "sklearn_calib.calibrators.binning",
        "sklearn_calib.estimators._net",
        "sklearn_calib.losses._losses",
        "sklearn_calib.plotting",
    } <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
