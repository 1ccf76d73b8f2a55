"""Deprecations of version 0.2: renamed parameters, functions and module attributes.

scikit-learn's pattern, for one minor version: an old parameter spelling stays in the
signature with the default :data:`DEPRECATED` and, when given, warns at ``fit`` and means
what it meant; an old function wraps the new one; an old module attribute is looked up by
the module's ``__getattr__``; an old positional argument of a now keyword-only
constructor warns and is passed by its name. Every warning is a ``FutureWarning`` naming
the new spelling and the version that removes the old one.
"""

import functools
import inspect
import warnings

#: Default of a deprecated parameter spelling: "not given".
DEPRECATED = "deprecated"

#: The version that deprecated the old spellings, and the one that removes them.
SINCE, REMOVED_IN = "0.2", "0.3"


def _warn(message, stacklevel):
    warnings.warn(
        f"{message} (deprecated in {SINCE}, removed in {REMOVED_IN}).",
        FutureWarning,
        stacklevel=stacklevel + 1,
    )


def is_given(value):
    """Whether a deprecated parameter spelling was given (its value is not the sentinel)."""
    return not (isinstance(value, str) and value == DEPRECATED)


def _same(value, default):
    """Whether a parameter value is its default (identical, or equal of the same type)."""
    if value is default:
        return True
    try:
        return type(value) is type(default) and bool(value == default)
    except (TypeError, ValueError):
        return False


def parameter(estimator, name):
    """Return the value in effect of parameter ``name`` of ``estimator``.

    That of its deprecated old spelling when given (``estimator._renamed_parameters``
    maps old names to new ones), else its own.

    Parameters
    ----------
    estimator : estimator
    name : str
        The new name of the parameter.

    Returns
    -------
    value : object
    """
    for old, new in getattr(type(estimator), "_renamed_parameters", {}).items():
        value = getattr(estimator, old, DEPRECATED)
        if new == name and is_given(value):
            return value
    return getattr(estimator, name)


def warn_renamed_parameters(estimator, stacklevel=2):
    """Warn for each deprecated parameter spelling given to ``estimator``.

    Raises a ValueError when both spellings of a parameter were given (the new one
    differing from its default).

    Parameters
    ----------
    estimator : estimator
        Its class's ``_renamed_parameters`` maps old parameter names to new ones.
    stacklevel : int, default=2
        Of the warnings, as :func:`warnings.warn` counts it from the caller.
    """
    defaults = inspect.signature(type(estimator)).parameters
    for old, new in getattr(type(estimator), "_renamed_parameters", {}).items():
        if not is_given(getattr(estimator, old, DEPRECATED)):
            continue
        if not _same(getattr(estimator, new), defaults[new].default):
            raise ValueError(
                f"Expected one of `{old}` and `{new}` for {type(estimator).__name__}, got "
                f"both; `{old}` is deprecated: pass `{new}` only."
            )
        _warn(f"`{old}` of {type(estimator).__name__} was renamed `{new}`", stacklevel + 1)


def renamed_state(state, renamed):
    """Return a saved ``__dict__`` with old parameter or attribute names moved to new ones.

    A state saved before the rename holds the old name only: its value moves to the new
    name and an old parameter name gets :data:`DEPRECATED`. A state holding the new name
    is returned unchanged.

    Parameters
    ----------
    state : dict
        Attribute name to value, as pickle and skops save it.
    renamed : dict
        Old name to new name; an old name that ends in ``_`` is a fitted attribute
        (removed after the move), another one a parameter.

    Returns
    -------
    state : dict
        A new dict.
    """
    state = dict(state)
    for old, new in renamed.items():
        if old in state and new not in state:
            state[new] = state.pop(old)
            if not old.endswith("_"):
                state[old] = DEPRECATED
    return state


def renamed_attribute(old, new):
    """A read-only property ``old`` that warns and returns the attribute ``new``.

    Parameters
    ----------
    old, new : str
        The old and new names of a fitted attribute.

    Returns
    -------
    attribute : property
    """

    def getter(self):
        value = getattr(self, new)
        _warn(f"`{old}` of {type(self).__name__} was renamed `{new}`", 2)
        return value

    return property(getter, doc=f"Deprecated name of ``{new}``.")


def renamed_function(function, old, stacklevel=2):
    """Return a function named ``old`` that warns and calls ``function``.

    Parameters
    ----------
    function : callable
        The function under its new name.
    old : str
        The deprecated name.
    stacklevel : int, default=2

    Returns
    -------
    wrapper : callable
    """

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        _warn(f"`{old}` was renamed `{function.__name__}`", stacklevel)
        return function(*args, **kwargs)

    wrapper.__name__ = wrapper.__qualname__ = old
    wrapper.__doc__ = f"Deprecated name of :func:`{function.__module__}.{function.__name__}`."
    return wrapper


def module_getattr(module_name, moved):
    """Return a module ``__getattr__`` that serves names moved out of a module's API.

    Parameters
    ----------
    module_name : str
        The module's ``__name__``.
    moved : dict
        Old name to ``(object, advice)``: the object the old name gives, and what to use
        instead, as a sentence fragment.

    Returns
    -------
    getattr : callable
    """

    def __getattr__(name):
        if name not in moved:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value, advice = moved[name]
        _warn(f"`{module_name}.{name}` is no longer public: {advice}", 2)
        return value

    return __getattr__


def keyword_only(*old_order):
    """Decorate an ``__init__`` whose parameters became keyword-only.

    Positional arguments past those the new signature allows still work for one minor
    version: they warn and are passed by their names in the former order ``old_order``.
    scikit-learn's ``get_params`` reads the new signature (``__wrapped__``).

    Parameters
    ----------
    *old_order : str
        The parameter names of the former signature, in order, after ``self``.

    Returns
    -------
    decorator : callable
    """

    def decorate(init):
        signature = inspect.signature(init)
        n_positional = sum(
            parameter.kind is parameter.POSITIONAL_OR_KEYWORD
            for parameter in signature.parameters.values()
        )

        @functools.wraps(init)
        def wrapper(self, *args, **kwargs):
            extra = args[n_positional - 1 :]
            if extra:
                names = old_order[n_positional - 1 : n_positional - 1 + len(extra)]
                if len(names) < len(extra):
                    raise TypeError(
                        f"{type(self).__name__}() takes at most {len(old_order)} positional "
                        f"arguments, got {len(args)}."
                    )
                twice = [name for name in names if name in kwargs]
                if twice:
                    raise TypeError(
                        f"{type(self).__name__}() got multiple values for {twice[0]!r}."
                    )
                passed = ", ".join(f"{name}=..." for name in names)
                _warn(f"Pass {passed} to {type(self).__name__} by keyword", 2)
                kwargs.update(zip(names, extra, strict=True))
                args = args[: n_positional - 1]
            init(self, *args, **kwargs)

        return wrapper

    return decorate
