"""The metric functions: each a check of its input, a kernel on the checked predictions,
and a resampling plan."""
