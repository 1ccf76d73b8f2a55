"""A continued fit (``partial_fit``, ``fit`` with ``warm_start``, ``fit_loop``) of NetClassifier.

Parameters set with ``set_params`` are only stored; a continued fit compares them with
the parameters the fitted parts were built from (``built_params_``). A new network
(``module``, ``module__*`` or one of the class's ``fresh_fit_params``) or optimiser class
(or parameter-group patterns) makes it a fresh fit (:func:`continuable`); otherwise
:func:`update_parts` applies the changes to the fitted parts.
"""

from ._optimizer import OptimizerSettings, same_value


def changed_params(net):
    """Return the net's current parameter values and the names of those changed since its
    parts were built (``built_params_``)."""
    built, current = net.built_params_, net._param_values()
    changed = {
        name
        for name in set(built) | set(current)
        if not same_value(built.get(name), current.get(name))
    }
    return current, changed


def continuable(net):
    """Whether a training call may continue the fitted net (same network and optimiser).

    Parameters
    ----------
    net : NetClassifier

    Returns
    -------
    continuable : bool
    """
    if not net.__sklearn_is_fitted__():
        return False
    current, changed = changed_params(net)
    fresh = set(net.fresh_fit_params)
    if any(name.split("__", 1)[0] == "module" or name in fresh for name in changed):
        return False
    before = OptimizerSettings.from_params(net.built_params_)
    after = OptimizerSettings.from_params(current)
    return before.optimizer is after.optimizer and same_value(before.patterns, after.patterns)


def update_parts(net):
    """Apply the parameters set since the net's parts were built (a continued fit).

    The loss is rebuilt if ``criterion`` or ``criterion__*`` changed, the optimiser's
    changed values are written into it (after the same checks as at a fresh fit), the
    callbacks are re-initialised if ``callbacks`` or ``callbacks__*`` changed.

    Parameters
    ----------
    net : NetClassifier
        Continuable (:func:`continuable`).

    Returns
    -------
    built_params : dict
        The parameters the parts are now built from (the net's ``built_params_``).
    """
    current, changed = changed_params(net)
    OptimizerSettings.from_params(current).update(
        net.optimizer_, OptimizerSettings.from_params(net.built_params_)
    )
    if any(name.split("__", 1)[0] == "criterion" for name in changed):
        with net._current_init_context("criterion"):
            net.initialize_criterion()
    if any(name.split("__", 1)[0] == "callbacks" for name in changed):
        net._initialize_callbacks()
    return current


__all__ = ["changed_params", "continuable", "update_parts"]
