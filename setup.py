"""Build the Cython kernels.

Compiler directives are set here once for every kernel module. Set
``FASTOPS_DEBUG=1`` to turn bounds/wraparound checks back on (and line tracing),
``FASTOPS_ANNOTATE=1`` to write Cython's HTML annotation next to each ``.pyx``.
"""
import glob
import os
import sys

from Cython.Build import cythonize
from setuptools import Extension, setup

KERNELS = "src/fastops/_kernels"
DEBUG = os.environ.get("FASTOPS_DEBUG", "") not in ("", "0")
ANNOTATE = os.environ.get("FASTOPS_ANNOTATE", "") not in ("", "0")

directives = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": True,
    "embedsignature": True,
    "autotestdict": False,  # no ``__test__`` dict of docstrings: the modules are what the stubs say
}
macros = []
if DEBUG:
    directives["linetrace"] = True
    macros.append(("CYTHON_TRACE_NOGIL", "1"))

if sys.platform == "win32":
    compile_args = ["/O2"]
else:
    compile_args = ["-O3", "-fno-strict-aliasing"]
    if DEBUG:
        compile_args = ["-O0", "-g"]

SHARED = sorted(glob.glob(KERNELS + "/*.h") + glob.glob(KERNELS + "/*.pxd"))


def kernel(path: str) -> Extension:
    """The extension of one ``.pyx``: it includes ``_<name>_*.pxi`` (one per
    concern) and cimports the shared ``.pxd`` / ``.h``, so a change to any of
    them rebuilds it."""
    name = os.path.splitext(os.path.basename(path))[0]
    return Extension(
        "fastops._kernels." + name,
        [path],
        include_dirs=[KERNELS],  # the shared headers
        depends=SHARED + sorted(glob.glob(f"{KERNELS}/_{name}_*.pxi")),
        extra_compile_args=compile_args,
        define_macros=macros,
    )


extensions = [kernel(path) for path in sorted(glob.glob(KERNELS + "/*.pyx"))]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives=directives,
        annotate=ANNOTATE,
    ),
)
