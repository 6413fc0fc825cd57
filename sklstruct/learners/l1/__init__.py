"""l1-regularised max-margin Markov networks (Zhu, Xing and Zhang 2008)."""

from ._estimator import L1M3N

__all__ = ["L1M3N"]
