"""Structural SVMs trained by cutting planes (Joachims, Finley and Yu 2009).

:func:`fit_one_slack` is the 1-slack solver on a batch held in this process: the l1 learner's
M-steps on structures without compiled kernels call it.
"""

from ._estimator import StructSVMCuttingPlane
from ._one_slack import fit_one_slack

__all__ = ["StructSVMCuttingPlane", "fit_one_slack"]
