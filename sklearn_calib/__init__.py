"""sklearn_calib: calibrated neural classifiers, post-hoc calibrators and calibration metrics."""

__version__ = "0.1.0"

__all__ = ["__version__"]
