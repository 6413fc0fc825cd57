"""Max-margin Markov networks trained by the excessive gap technique (Zhang, Saha and
Vishwanathan)."""

from ._estimator import M3NExcessiveGap

__all__ = ["M3NExcessiveGap"]
