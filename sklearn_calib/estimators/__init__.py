"""Neural classifiers (skorch) and their network zoo."""
