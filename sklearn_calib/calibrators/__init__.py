"""Post-hoc calibrators and the calibrated meta-classifier."""
