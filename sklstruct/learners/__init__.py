"""The learners: scikit-learn estimators that optimise a structure's objective."""

from .cutting_plane import StructSVMCuttingPlane
from .excessive_gap import M3NExcessiveGap
from .exp_grad import M3NExpGrad
from .l1 import L1M3N
from .simplicial import M3NSimplicialDecomposition

__all__ = ["L1M3N", "M3NExcessiveGap", "M3NExpGrad", "M3NSimplicialDecomposition",
           "StructSVMCuttingPlane"]
