"""The learners: scikit-learn estimators that optimise a structure's objective."""

from .cutting_plane import StructSVMCuttingPlane

__all__ = ["StructSVMCuttingPlane"]
