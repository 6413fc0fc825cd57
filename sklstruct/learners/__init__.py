"""The learners: scikit-learn estimators that optimise a structure's objective."""

from .cutting_plane import StructSVMCuttingPlane
from .excessive_gap import M3NExcessiveGap
from .exp_grad import M3NExpGrad

__all__ = ["M3NExcessiveGap", "M3NExpGrad", "StructSVMCuttingPlane"]
