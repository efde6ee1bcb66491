"""Window assigners: ``Tumbling``, ``Sliding``, ``Session``, ``GlobalWindow``.

The public face of :mod:`fastops.core.window.assigners`.
"""
from fastops.core.window.assigners import GlobalWindow, Session, Sliding, Tumbling

__all__ = ["GlobalWindow", "Session", "Sliding", "Tumbling"]
