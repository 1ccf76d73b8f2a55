"""The statistics of calibration: bootstrap intervals, tests, decompositions, calibration
by group, the calibration report and the report table."""
