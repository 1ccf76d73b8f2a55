"""Counter-based Poisson(1) bootstrap weights: a row's weights depend only on its id.

The Poisson bootstrap gives every row an independent Poisson(1) count per replicate
instead of drawing ``n`` rows with replacement; the two agree as ``n`` grows (Hanley and
MacGibbon 2006; Chamandy et al. 2012). Here the count of row ``i`` in replicate ``r`` is a
pure function of ``(seed, i, r)``, so chunks of rows can be weighted on different
workers, in any order and any chunking, and their sums merge exactly into those of one
pass over all rows.

The generator is SplitMix64's mixing function (Steele, Lea and Flood 2014) applied to
counters: ``base_i = mix(i * GAMMA + mix(seed))`` keys the row, and the ``j``-th 64-bit
output of the row is ``mix(base_i + (j + 1) * GAMMA)``; its high and low 32-bit halves are
the uniforms of replicates ``2j`` and ``2j + 1``. A uniform ``u`` in ``[0, 2^32)`` becomes
the count ``#{k >= 0 : u >= T_k}`` with ``T_k = ceil(2^32 P(K <= k))`` for ``K`` Poisson(1):
the exact Poisson(1) distribution, each probability rounded to a multiple of ``2^-32``.

numpy (uint64), torch (int64 on any device, with logical shifts) and the optional numba
kernels compute the same counts bit for bit.

References
----------
.. [1] J. A. Hanley and B. MacGibbon, "Creating non-parametric bootstrap samples using
   Poisson frequencies", Computer Methods and Programs in Biomedicine 83(1), 2006.
.. [2] N. Chamandy, O. Muralidharan, A. Najmi and S. Naidu, "Estimating uncertainty for
   massive data streams", Google technical report, 2012.
.. [3] G. L. Steele, D. Lea and C. H. Flood, "Fast splittable pseudorandom number
   generators", OOPSLA 2014.
"""

import math

import numpy as np

GAMMA = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_MASK32 = 0xFFFFFFFF


def _poisson_thresholds():
    """``T_k = ceil(2^32 P(K <= k))`` for the ``k`` where it is below ``2^32``."""
    thresholds = []
    cumulative, term, k = 0.0, math.exp(-1.0), 0
    while True:
        cumulative += term
        threshold = math.ceil(cumulative * 2.0**32)
        if threshold >= 2**32:
            return np.array(thresholds, dtype=np.uint64)
        thresholds.append(threshold)
        k += 1
        term /= k


#: Thresholds of the 32-bit uniform: the Poisson count is how many of them it reaches.
THRESHOLDS = _poisson_thresholds()


def mix64(z):
    """SplitMix64's finaliser of uint64 values (numpy, elementwise, wrapping)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return z ^ (z >> np.uint64(31))


def seed_key(seed):
    """The 64-bit key of a seed (an integer in ``[0, 2^64)``), as a Python int."""
    return int(mix64(np.uint64(seed)))


def row_keys(row_ids, key):
    """Each row's base key, ``mix(id * GAMMA + key)``, as uint64."""
    ids = np.asarray(row_ids).astype(np.uint64)
    with np.errstate(over="ignore"):
        return mix64(ids * np.uint64(GAMMA) + np.uint64(key))


def poisson_counts(row_ids, key, n_resamples):
    """Poisson(1) count of each row in each replicate.

    Parameters
    ----------
    row_ids : ndarray of shape (n_rows,)
        Non-negative integer row ids.
    key : int
        The generator's key, from :func:`seed_key`.
    n_resamples : int
        Number of replicates.

    Returns
    -------
    counts : ndarray of shape (n_resamples, n_rows), dtype uint8
    """
    return counts_from_keys(row_keys(row_ids, key), n_resamples)


def counts_from_keys(base, n_resamples):
    """:func:`poisson_counts` from the rows' keys (:func:`row_keys`)."""

    def halves(pair):
        bits = mix64(base + np.uint64((pair + 1) * GAMMA % 2**64))
        return bits >> np.uint64(32), bits & np.uint64(_MASK32)

    counts = np.empty((n_resamples + n_resamples % 2, base.shape[0]), dtype=np.uint8)
    with np.errstate(over="ignore"):
        _fill_counts(counts, halves, lambda u: np.searchsorted(THRESHOLDS, u, side="right"))
    return counts[:n_resamples]


def _fill_counts(counts, halves, count):
    """Fill rows ``2j`` and ``2j + 1`` of ``counts`` from the halves of draw ``j``."""
    for pair in range(counts.shape[0] // 2):
        for half, uniform in enumerate(halves(pair)):
            counts[2 * pair + half] = count(uniform)


def _signed(value):
    """A uint64 constant as the int64 with the same bits."""
    return value - 2**64 if value >= 2**63 else value


def _torch_shift_right(z, bits):
    """Logical right shift of int64 tensors (torch's ``>>`` is arithmetic)."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def _torch_mix64(z):
    z = (z ^ _torch_shift_right(z, 30)) * _signed(_MIX1)
    z = (z ^ _torch_shift_right(z, 27)) * _signed(_MIX2)
    return z ^ _torch_shift_right(z, 31)


def torch_poisson_counts(row_ids, key, n_resamples):
    """:func:`poisson_counts` of an int64 tensor of row ids, on its device.

    The arguments are those of :func:`poisson_counts`; the counts are a uint8 tensor of
    shape (n_resamples, n_rows) on the ids' device.
    """
    import torch  # loaded already: the ids are a tensor

    thresholds = torch.as_tensor(THRESHOLDS.astype(np.int64), device=row_ids.device)
    base = _torch_mix64(row_ids * _signed(GAMMA) + _signed(key))

    def halves(pair):
        bits = _torch_mix64(base + _signed((pair + 1) * GAMMA % 2**64))
        return _torch_shift_right(bits, 32), bits & _MASK32

    size = (n_resamples + n_resamples % 2, row_ids.shape[0])
    counts = torch.empty(size, dtype=torch.uint8, device=row_ids.device)
    _fill_counts(counts, halves, lambda u: torch.searchsorted(thresholds, u, right=True))
    return counts[:n_resamples]
