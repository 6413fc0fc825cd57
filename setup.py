"""Build the Cython extensions; all metadata lives in pyproject.toml."""
import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

MODULES = [
    "sklstruct._check_build._check_build",
    "sklstruct._inference._chain",
    "sklstruct._inference._graph",
    "sklstruct._inference._mincut",
    "sklstruct._inference._kernels",
    "sklstruct._inference._graph_kernels",
    "sklstruct._inference._grid3d_kernels",
    "sklstruct._inference._topk",
    "sklstruct._inference._dependency",
    "sklstruct._inference._dependency_kernels",
    "sklstruct._inference._cky",
    "sklstruct._inference._cky_inside",
    "sklstruct._inference._cfg_kernels",
    "sklstruct.parsing._arc_features_fast",
    "sklstruct._solvers._qp",
    "sklstruct.learners.cutting_plane._one_slack_fast",
    "sklstruct.learners.cutting_plane._n_slack_fast",
    "sklstruct.learners.exp_grad._online_fast",
    "sklstruct.learners._factored_dual_fast",
    "sklstruct.learners._frank_wolfe_fast",
    "sklstruct.learners._multi_point_fast",
]
DEBUG = os.environ.get("SKLSTRUCT_CYTHON_DEBUG", "0") == "1"
# Cython regenerates a .c file only when its .pyx is newer, not when the directives change:
# the mode of the last generation is kept here, and a change of mode regenerates them all
MODE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "build", "cython-mode")
MODE = "debug" if DEBUG else "release"
previous_mode = None
if os.path.exists(MODE_FILE):
    with open(MODE_FILE) as f:
        previous_mode = f.read()

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
        force=previous_mode != MODE,
    )
)
os.makedirs(os.path.dirname(MODE_FILE), exist_ok=True)
with open(MODE_FILE, "w") as f:
    f.write(MODE)
