"""``CalibrationAccumulator``: calibration metrics of a stream of batches from summed
statistics in fixed memory."""
