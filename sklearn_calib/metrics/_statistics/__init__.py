"""The statistics of calibration: bootstrap intervals, tests, decompositions, calibration
by group, the simultaneous reliability band and its equivalence test, the calibration
report and the report table."""
