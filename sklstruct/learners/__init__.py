"""The learners: scikit-learn estimators that optimise a structure's objective."""

from .cutting_plane import StructSVMCuttingPlane
from .exp_grad import M3NExpGrad

__all__ = ["M3NExpGrad", "StructSVMCuttingPlane"]
