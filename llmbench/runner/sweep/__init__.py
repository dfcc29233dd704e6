"""Several load points in one process: sweep values, checkpoint, knee, analysis and compare."""
