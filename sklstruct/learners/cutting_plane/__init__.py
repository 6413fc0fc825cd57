"""Structural SVMs trained by cutting planes (Joachims, Finley and Yu 2009)."""

from ._estimator import StructSVMCuttingPlane

__all__ = ["StructSVMCuttingPlane"]
