"""Compiled inference kernels (chains, min-cut on grids, CKY for grammars, per-example
kernels) and their validated Python wrappers."""
