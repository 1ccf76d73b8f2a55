"""The NLL temperature search shared by temperature scaling and the log loss's decomposition.

For logit gaps ``d_ik = z_ik - max_k z_ik``, true classes ``y`` and weights ``w`` summing
to 1, the mean negative log-likelihood of ``softmax(beta * z)``,

    NLL(beta) = sum_i w_i [ -beta d_iy + log sum_k exp(beta d_ik) ],

is convex in the inverse temperature ``beta = 1/T``: its second derivative is the
``w``-mean of the variance of ``d_i`` under the scaled softmax. :func:`newton_search`
minimises it on ``[BETA_MIN, BETA_MAX]`` (``T`` in ``[1e-4, 1e4]``) by Newton steps kept
inside a bracket of the minimum; an evaluation of the NLL and its derivatives is one
pass over the data, which its caller provides (in memory, or summed over Dask chunks).
Large inputs start from the optimum of a subsample (:func:`warm_start`), so that two or
three passes over all rows reach the optimum.
"""

import numpy as np

#: beta = 1/T is searched in [BETA_MIN, BETA_MAX], that is T in [1e-4, 1e4].
BETA_MIN = 1e-4
BETA_MAX = 1e4
#: Newton steps tried before the search falls back to bisection of the bracket.
_NEWTON_STEPS = 30
_MAX_ITER = 200
#: Relative tolerance of the search of a subsample's optimum (a starting point only).
_START_RTOL = 1e-4


class FlatNLL(Exception):
    """The NLL does not depend on beta where it was evaluated (for instance, every row ties)."""


def newton_search(evaluate, beta, rtol):
    """Minimise a convex function of beta on ``[BETA_MIN, BETA_MAX]``.

    Newton steps are kept inside a bracket ``[low, high]`` of the minimum, built from the
    signs of the derivatives met so far; a step that leaves it goes to an untested bound
    or bisects the bracket geometrically.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(beta)`` returns the NLL and its first two derivatives in ``beta``.
    beta : float
        Starting point.
    rtol : float
        The search stops once a step changes beta by at most this fraction.

    Returns
    -------
    beta : float
        The minimiser, or the bound where the NLL still decreases.
    n_evaluations : int
        Number of calls of ``evaluate``.
    at_bound : bool
        Whether ``beta`` is a bound at which the NLL still decreases.

    Raises
    ------
    FlatNLL
        Where both derivatives are 0 and the NLL is not.
    RuntimeError
        When a derivative is not finite, or the search does not converge.
    """
    low, high = BETA_MIN, BETA_MAX
    low_tested = high_tested = False
    beta = float(np.clip(beta, low, high))
    for iteration in range(1, _MAX_ITER + 1):
        nll, grad, hess = evaluate(beta)
        if not (np.isfinite(grad) and np.isfinite(hess)):
            raise RuntimeError(
                f"Temperature scaling failed: the NLL derivative at 1/T = {beta!r} is not finite."
            )
        if grad == 0 and hess > 0:
            return beta, iteration, False
        if grad == 0 and nll == 0:
            # Every probability of a true class rounds to 1: the scores separate the
            # classes and the NLL decreases towards 0 as beta grows.
            return BETA_MAX, iteration, True
        if grad == 0:
            raise FlatNLL
        if grad > 0:
            high, high_tested = beta, True
        else:
            low, low_tested = beta, True
        if (beta == BETA_MAX and grad < 0) or (beta == BETA_MIN and grad > 0):
            return beta, iteration, True
        proposal = beta - grad / hess if hess > 0 and iteration <= _NEWTON_STEPS else np.nan
        if abs(proposal - beta) <= rtol * beta:
            return float(np.clip(proposal, low, high)), iteration, False
        if not low < proposal < high:
            if proposal >= high and not high_tested:
                proposal = BETA_MAX
            elif proposal <= low and not low_tested:
                proposal = BETA_MIN
            else:
                proposal = np.sqrt(low * high)
        if abs(proposal - beta) <= rtol * beta or (
            low_tested and high_tested and high - low <= rtol * beta
        ):
            return proposal, iteration, False
        beta = proposal
    raise RuntimeError(
        f"Temperature scaling did not converge in {_MAX_ITER} steps (last 1/T = {beta!r})."
    )


def warm_start(evaluate, rtol):
    """The optimum of a subsample, to a looser tolerance: the start of a large fit.

    Parameters
    ----------
    evaluate : callable
        The subsample's NLL and derivatives, as :func:`newton_search` takes them.
    rtol : float
        The tolerance of the full search (the subsample's is at least ``1e-4``).

    Returns
    -------
    beta : float
        1 where the subsample's NLL is flat.
    """
    try:
        beta, _, _ = newton_search(evaluate, 1.0, max(rtol, _START_RTOL))
    except FlatNLL:
        beta = 1.0
    return beta
