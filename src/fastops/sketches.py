"""Sketches (synopses) with batch ``update``, ``merge`` and ``to_bytes`` / ``from_bytes``.

The public face of :mod:`fastops.core.sketches`.
"""
from fastops.core.sketches import KLL, BloomFilter, CountMinSketch, HyperLogLog, Reservoir, SpaceSaving

__all__ = ["KLL", "BloomFilter", "CountMinSketch", "HyperLogLog", "Reservoir", "SpaceSaving"]
