"""
Measuring any scikit-learn classifier
=====================================

TODO
"""

from sklearn_calib import expected_calibration_error

print(expected_calibration_error([0, 1], [[0.8, 0.2], [0.3, 0.7]]))
