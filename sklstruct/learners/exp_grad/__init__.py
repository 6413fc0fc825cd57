"""Max-margin Markov networks trained by exponentiated gradient (Bartlett et al. 2004)."""

from ._estimator import M3NExpGrad

__all__ = ["M3NExpGrad"]
