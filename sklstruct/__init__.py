"""sklstruct: max-margin structured prediction for scikit-learn."""

from . import _check_build  # noqa: F401  (readable error when the extensions are not built)
from ._version import __version__
from .learners import (
    L1M3N,
    M3NExcessiveGap,
    M3NExpGrad,
    M3NSimplicialDecomposition,
    StructSVMCuttingPlane,
)
from .structures import (
    ChainStructure,
    GraphStructure,
    Grid3DStructure,
    GridStructure,
    MultiClass,
    MultiLabelStructure,
    TreeStructure,
)

__all__ = [
    "ChainStructure", "GraphStructure", "Grid3DStructure", "GridStructure", "L1M3N",
    "M3NExcessiveGap", "M3NExpGrad", "M3NSimplicialDecomposition", "MultiClass",
    "MultiLabelStructure", "StructSVMCuttingPlane", "TreeStructure", "__version__",
]
