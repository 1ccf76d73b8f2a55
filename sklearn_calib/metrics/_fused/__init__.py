"""The fused passes over predictions: each a numba kernel and its numpy twin, which return
the same result; ``_switch`` chooses the path."""
