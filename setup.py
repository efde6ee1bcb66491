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

extensions = [
    Extension(
        "fastops._kernels." + os.path.splitext(os.path.basename(path))[0],
        [path],
        include_dirs=[KERNELS],  # the shared headers
        depends=sorted(glob.glob(KERNELS + "/*.h") + glob.glob(KERNELS + "/*.pxd")),
        extra_compile_args=compile_args,
        define_macros=macros,
    )
    for path in sorted(glob.glob(KERNELS + "/*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives=directives,
        annotate=ANNOTATE,
    ),
)
