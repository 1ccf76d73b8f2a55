"""What every layer of the metrics shares: the bin rule, weights, rows and conventions,
resampling plans, groups' rows, Poisson counts, the Dask routing and the metric registry."""
