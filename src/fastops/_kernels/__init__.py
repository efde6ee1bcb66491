"""Compiled kernels: loops over Arrow buffers, no Python objects per row."""
