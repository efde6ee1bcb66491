"""What sits on the kernels with no runtime: keys, key groups, aggregates, windows, sketches."""
