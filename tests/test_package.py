"""The installed package: loud failure without the compiled kernels, shipped stubs."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import fastops

PKG_DIR = os.path.dirname(fastops.__file__)

BLOCK_CORE = textwrap.dedent("""
    import importlib.abc, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "fastops._kernels.core":
                raise ImportError("blocked for the test: fastops._kernels.core")
            return None

    sys.meta_path.insert(0, Block())
    try:
        import fastops
    except ImportError as exc:
        print("IMPORT-ERROR:", exc)
        sys.exit(3)
    print("IMPORTED")
""")


def test_import_fails_loudly_without_compiled_kernels():
    proc = subprocess.run([sys.executable, "-c", BLOCK_CORE], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    msg = proc.stdout
    assert "IMPORT-ERROR:" in msg
    assert "fastops._kernels.core" in msg and "pip install" in msg


def test_import_works_normally():
    proc = subprocess.run([sys.executable, "-c", "import fastops; print(fastops.hash64([1]))"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_py_typed_and_stubs_are_shipped():
    """Every compiled kernel module has its stub beside it (``.ci/stubtest``
    checks the stubs against the modules: names, signatures, classes)."""
    kernels = os.path.join(PKG_DIR, "_kernels")
    assert os.path.isfile(os.path.join(PKG_DIR, "py.typed"))
    modules = {name.split(".")[0] for name in os.listdir(kernels)
               if name.endswith((".so", ".pyd")) and not name.startswith("_")}
    assert modules >= {"core", "keys", "window", "sketch"}, modules
    for name in modules:
        assert os.path.isfile(os.path.join(kernels, name + ".pyi")), name


def test_public_api():
    for name in ("hash64", "null_hash", "partition", "partition_ids", "key_group_range",
                 "moved_fraction"):
        assert name in fastops.__all__ and callable(getattr(fastops, name))


def test_dir_shows_the_public_api_only():
    names = dir(fastops)
    # helper imports of the package's own module do not leak into its namespace
    for helper in ("sys", "os", "annotations", "_WINDOWS_ALL"):
        assert helper not in names and not hasattr(fastops, helper), helper
    assert [n for n in names if n.startswith("_") and n != "__version__"] == []
    assert set(fastops.__all__) <= set(names)
    assert names == sorted(names)
    for name in names:   # everything listed resolves
        assert getattr(fastops, name) is not None, name
    for name in ("TableEnvironment", "StreamEnvironment", "Tumbling", "table", "windows"):
        assert name in names


def test_star_import_gives_all():
    ns: dict = {}
    exec("from fastops import *", ns)
    assert set(ns) - {"__builtins__"} == set(fastops.__all__)
