"""Docstrings: the Examples of every one in sklearn_calib run and print what they show, and
those of the public API pass numpydoc's validation (as scikit-learn's do)."""

import ast
import doctest
import importlib
import inspect
import pkgutil

import pytest
from sklearn.utils import Bunch

import sklearn_calib

from estimator_registry import public_modules


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
#: The modules whose examples take about half a second or more (grid searches, boosted
#: trees, bootstrap audits, figures).
SLOW_EXAMPLES = {
    "sklearn_calib.calibrators.multicalibration",
    "sklearn_calib.estimators._calibration_scoring",
    "sklearn_calib.evaluation",
    "sklearn_calib.metrics._statistics._groups",
    "sklearn_calib.metrics._statistics._smooth_diagram",
    "sklearn_calib.plotting",
    "sklearn_calib.scoring",
}


def test_the_public_classes_have_examples():
    assert {
        "sklearn_calib.calibrators.temperature",
        "sklearn_calib.calibrators.binning",
        "sklearn_calib.estimators._net",
        "sklearn_calib.losses._losses",
        "sklearn_calib.plotting",
    } <= set(MODULES)
    assert SLOW_EXAMPLES <= set(MODULES)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=[pytest.mark.slow] if name in SLOW_EXAMPLES else [])
        for name in MODULES
    ],
)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


# ------------------------------------------------------------- numpydoc validation

#: numpydoc's checks the public docstrings pass (``numpydoc.validate.ERROR_MSGS``): the
#: sections are known and in order, every parameter is documented with a type and a
#: description and no unknown one is, what is returned or yielded is described, and each
#: description and summary is a sentence. Left out, as scikit-learn leaves them out: the
#: place of the opening and closing quotes (GL01, GL02), the named return values (RT02),
#: the summary's wording and length (SS05, SS06) and the sections a docstring may go
#: without (extended summary ES01, See Also SA01, Examples EX01).
NUMPYDOC_CHECKS = {
    "GL03", "GL05", "GL06", "GL07", "GL08", "GL09", "GL10",
    "SS01", "SS02", "SS03", "SS04",
    "PR01", "PR02", "PR03", "PR04", "PR05", "PR06", "PR07", "PR08", "PR09", "PR10",
    "RT01", "RT03", "RT04", "RT05",
    "YD01",
    "SA02", "SA03", "SA04",
}  # fmt: skip


def _function(member):
    """The function of a method, a class or static method, or a property's getter."""
    return member.fget if isinstance(member, property) else getattr(member, "__func__", member)


def _is_member(value):
    return inspect.isfunction(value) or isinstance(value, (property, classmethod, staticmethod))


def _members(cls):
    """The public methods and properties that sklearn_calib's classes give ``cls``.

    Those of third-party bases (scikit-learn, skorch, torch) are documented there. A method
    without a docstring of its own that overrides a base's is documented by the base (the
    API reference leaves it out).
    """
    seen = set()
    for position, klass in enumerate(cls.__mro__):
        if not klass.__module__.startswith("sklearn_calib"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in seen or not _is_member(value):
                continue
            seen.add(name)
            overrides = any(name in vars(base) for base in cls.__mro__[position + 1 :])
            if _function(value).__doc__ is None and overrides:
                continue
            # a class or static method as its class gives it, so that its signature is read
            yield (
                f"{cls.__qualname__}.{name}",
                value if isinstance(value, property) else getattr(cls, name),
            )


def public_api():
    """The classes and functions in the ``__all__`` of the public modules, and the members
    of the classes, each once: ``{dotted name: object}``."""
    found, seen = {}, set()
    for module in public_modules():
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isroutine(obj)) or id(obj) in seen:
                continue
            seen.add(id(obj))
            found[f"{module.__name__}.{name}"] = obj
            if inspect.isclass(obj):
                for member, value in _members(obj):
                    if id(_function(value)) not in seen:
                        seen.add(id(_function(value)))
                        found[f"{module.__name__}.{member}"] = value
    return found


def numpydoc_errors(obj):
    """The errors of ``obj``'s docstring among :data:`NUMPYDOC_CHECKS`."""
    validate = pytest.importorskip("numpydoc.validate")
    if isinstance(obj, property):
        # A property is documented as an attribute: what it returns is its description.
        checks = NUMPYDOC_CHECKS - {"RT01"}
    else:
        checks = NUMPYDOC_CHECKS
    doc = validate.get_doc_object(obj)
    errors = validate.validate(doc)["errors"]
    if _is_result_type(obj):
        # A named tuple or a Bunch documents its fields as Attributes.
        checks = checks - {"PR01"}
        documented = {name.strip() for entry in doc["Attributes"] for name in entry.name.split(",")}
        if missing := set(getattr(obj, "_fields", ())) - documented:
            errors.append(("PR01", f"Fields {sorted(missing)} not documented as Attributes"))
    if inspect.isclass(obj) and (passed_on := _passed_on_parameters(obj)):
        errors = [_without(error, passed_on) for error in errors]
    return [f"{code} {message}" for code, message in errors if message and code in checks]


def _passed_on_parameters(cls):
    """The parameters that a net's declared signature adds to its ``__init__``'s own: they
    reach the base class through ``**kwargs``, which the docstring documents."""
    init = cls.__dict__.get("__init__")
    if init is None or "__signature__" not in vars(init):
        return set()
    code = init.__code__
    own = set(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    declared = inspect.signature(init).parameters.values()
    return {p.name for p in declared if p.kind is p.KEYWORD_ONLY} - own


def _without(error, names):
    """A PR01 error without the parameters in ``names``; the error itself when it names others."""
    code, message = error
    prefix, suffix = "Parameters ", " not documented"
    if code != "PR01" or not (message.startswith(prefix) and message.endswith(suffix)):
        return error
    missing = ast.literal_eval(message[len(prefix) : -len(suffix)]) - names
    return (code, f"{prefix}{missing}{suffix}" if missing else "")


def _is_result_type(obj):
    return inspect.isclass(obj) and (hasattr(obj, "_fields") or issubclass(obj, Bunch))


@pytest.mark.slow
def test_the_public_api_passes_numpydoc_validation():
    failures = {
        name: errors for name, obj in public_api().items() if (errors := numpydoc_errors(obj))
    }
    assert failures == {}


def test_numpydoc_validation_finds_undocumented_parameters_and_returns():
    def documented(x, y):
        """Add two numbers.

        Parameters
        ----------
        x : float
            The first number.

        Returns
        -------
        float
        """
        return x + y

    assert numpydoc_errors(documented) == [
        "PR01 Parameters {'y'} not documented",
        "RT03 Return value has no description",
    ]
