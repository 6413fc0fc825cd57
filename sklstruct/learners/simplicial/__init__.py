"""Max-margin Markov networks trained by restricted simplicial decomposition (Yu and Rousu 2007)."""

from ._estimator import M3NSimplicialDecomposition

__all__ = ["M3NSimplicialDecomposition"]
