"""Build the Cython extensions; all metadata lives in pyproject.toml."""
import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

MODULES = [
    "sklstruct._check_build._check_build",
    "sklstruct._inference._chain",
    "sklstruct._inference._qp",
    "sklstruct._inference._constraints",
    "sklstruct._inference._mincut",
    "sklstruct.learners._block_qp",
    "sklstruct.learners._online_eg",
    "sklstruct.learners._bcfw",
    "sklstruct.learners._rsd_pass",
]
DEBUG = os.environ.get("SKLSTRUCT_CYTHON_DEBUG", "0") == "1"

extensions = [
    Extension(
        name,
        [name.replace(".", "/") + ".pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    )
    for name in MODULES
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={
            "language_level": 3,
            "boundscheck": DEBUG,
            "wraparound": False,
            "initializedcheck": DEBUG,
            "nonecheck": False,
            "cdivision": True,
        },
        nthreads=os.cpu_count() or 1,
    )
)
