"""Applications on the engine: the command line, the demo job, the benchmark report."""
