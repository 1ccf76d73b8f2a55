"""Which path a fused pass takes: its numba kernel or its numpy twin.

numba is an optional accelerator (the ``fast`` extra). The path is set by
:data:`NUMBA_SWITCH`; by default numba takes the passes on which its kernels save more
than their first call in a process costs (they are loaded from numba's cache then, or
compiled): :data:`NUMBA_LOAD_NS`. numba is imported at that first call, not with the
package. numba's ``workqueue`` threading layer (numba's fallback where neither TBB nor
OpenMP is installed) aborts the process when two threads run parallel kernels at once:
under it the parallel kernels run one at a time (:func:`parallel_section`).
"""

import contextlib
import functools
import importlib.util
import os
import sys
import threading

#: The environment variable choosing the path of the fused passes: ``0`` numpy, ``1``
#: numba wherever it is installed, ``auto`` (the default) numba on the passes where it
#: saves more than :data:`NUMBA_LOAD_NS`.
NUMBA_SWITCH = "SKLEARN_CALIB_NUMBA"
_SWITCH_VALUES = ("0", "1", "auto")
#: Nanoseconds of a process's first numba call: numba's import, its threads, and the
#: kernels loaded from its cache (about 0.7 s on two cores; an empty cache compiles them,
#: which takes seconds).
NUMBA_LOAD_NS = 700_000_000
#: Nanoseconds the numba kernels save over numpy per value of each pass, measured on two
#: cores (10^6 x 10 predictions): per probability entry of the check and the ECE's bins
#: (numpy's column-wise maxima are nearly as fast), of the classwise bins and of the
#: isotonic fits; per row and column of smECE's grid sums; per entry of the tempered
#: NLL's gaps (a fit evaluates them tens of times); per term of the replicate sums; per
#: probability of label-shift EM's rows (a fit over many rows reads them about 8 times).
_SAVED_NS = {
    "top_label": 2,
    "classwise": 25,
    "isotonic": 90,
    "grid": 50,
    "tempered": 100,
    "replicates": 90,
    "mixture": 8,
}
#: Held by a parallel kernel where numba's threading layer is not known to be thread-safe.
_PARALLEL_LOCK = threading.Lock()


@functools.cache
def _load_numba_kernels():
    if importlib.util.find_spec("numba") is None:
        return None
    return importlib.import_module("sklearn_calib.metrics._fused._numba_kernels")


def numba_kernels(kind, n_values):
    """The numba kernels module for a pass of ``kind`` over ``n_values`` values, or None
    for numpy's path.

    None when numba is missing, switched off (:data:`NUMBA_SWITCH` ``0``), or, by default,
    when the kernels would save less than :data:`NUMBA_LOAD_NS` on the pass; the first
    call that returns the module imports numba.
    """
    mode = os.environ.get(NUMBA_SWITCH) or "auto"
    if mode not in _SWITCH_VALUES:
        raise ValueError(
            f"Expected the environment variable {NUMBA_SWITCH} to be '0', '1' or 'auto', "
            f"got {mode!r}."
        )
    if mode == "0" or (mode == "auto" and n_values * _SAVED_NS[kind] < NUMBA_LOAD_NS):
        return None
    return _load_numba_kernels()


@contextlib.contextmanager
def parallel_section(kernels):
    """Run the parallel kernels called inside one thread at a time, unless numba's threading
    layer is known to be thread-safe (TBB or OpenMP, once started): the workqueue layer
    aborts the process when two threads enter parallel code at once."""
    if kernels.threadsafe():
        yield
        return
    with _PARALLEL_LOCK, _torch_threads_kept():
        yield


@contextlib.contextmanager
def _torch_threads_kept():
    """Give torch back its number of threads if the block changed it: numba's OpenMP
    layer, started by the first parallel kernel, sets OpenMP's thread count, which torch
    shares, to the number of cores (a process that set torch to one thread would then run
    two)."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    threads = torch.get_num_threads()
    try:
        yield
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
