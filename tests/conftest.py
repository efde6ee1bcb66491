"""Shared test setup: the ``slow`` marker (``pytest -m "not slow"`` skips those tests) and shared fixtures.

Reference models and hypothesis strategies live in ``tests/support`` (importable as
``support.*``: pytest puts ``tests/`` on ``sys.path``, see ``pythonpath`` in pyproject.toml).
"""
import builtins
import math
import os

import pytest
from hypothesis import Phase, settings

# CI: a failing property test reports the example it found without shrinking it (shrinking
# can take minutes per test); elsewhere examples are shrunk as usual
settings.register_profile("ci", phases=[Phase.explicit, Phase.reuse, Phase.generate])
if os.environ.get("FASTOPS_CI"):
    settings.load_profile("ci")


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one test worker per core this process may use, counting a
    cgroup CPU quota (a container can see more cores than it is given)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()
        if quota != "max":
            cores = min(cores, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    return max(1, cores)


@pytest.fixture
def without_rich_or_tqdm(monkeypatch):
    """Importing rich or tqdm fails, as on a machine without them (the plain progress line)."""
    real_import = builtins.__import__

    def fake_import(name, *a, **k):
        if name.startswith(("rich", "tqdm")):
            raise ImportError(name)
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake_import)
