"""Shared test setup: the ``slow`` marker (``pytest -m "not slow"`` skips those tests) and shared fixtures.

Reference models and hypothesis strategies live in ``tests/support`` (importable as
``support.*``: pytest puts ``tests/`` on ``sys.path``, see ``pythonpath`` in pyproject.toml).
"""
import builtins

import pytest


@pytest.fixture
def without_rich_or_tqdm(monkeypatch):
    """Importing rich or tqdm fails, as on a machine without them (the plain progress line)."""
    real_import = builtins.__import__

    def fake_import(name, *a, **k):
        if name.startswith(("rich", "tqdm")):
            raise ImportError(name)
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake_import)
