"""Analysis: pure functions from a run's tables to phases and metrics."""
