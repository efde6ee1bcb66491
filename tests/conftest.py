"""Shared test setup: the ``slow`` marker (``pytest -m "not slow"`` skips those tests).

Reference models and hypothesis strategies live in ``tests/support`` (importable as
``support.*``: pytest puts ``tests/`` on ``sys.path``, see ``pythonpath`` in pyproject.toml).
"""
